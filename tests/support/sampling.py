"""Sampled sweeps: which window of a long sweep one run of the suite checks.

A long sweep of `total` cases (seeds 0..total-1 of the differential test, mutants of the
mutation fuzz, edges of the NumPy mutation test, specs of a corpus) is cut into windows of
`size` consecutive cases. A run of the suite checks one window: number `key % windows`, where
the key is `PGRAPH_SAMPLE` (an integer) when the environment sets it, else the UTC day number
(days since 1970-01-01). So successive days check successive windows, and `windows` days (or
the runs `PGRAPH_SAMPLE=0 .. windows-1`) together check every case of the sweep once: what one
long run checks. The whole sweep runs at once under `-m slow`.

tests/conftest.py fixes the key once per session (it sets `PGRAPH_SAMPLE` in the environment
before any test module is imported, so xdist workers, which inherit the environment, collect
the same windows) and prints it in the report header; every sampled test names its window in
its output and in its failure message (`describe`), so a failure is rerun with the key printed.
docs/reliability.md ("Sampling") lists the sweeps, their windows and their cycles.
"""

from __future__ import annotations

import datetime
import math
import os
from dataclasses import dataclass

ENV = "PGRAPH_SAMPLE"


def today() -> int:
    """The UTC day number (days since 1970-01-01): the key of a run that sets no PGRAPH_SAMPLE."""
    return (datetime.datetime.now(datetime.UTC).date() - datetime.date(1970, 1, 1)).days


def run_key() -> int:
    """This run's key: `PGRAPH_SAMPLE` when set (an integer, else ValueError), else today()."""
    text = os.environ.get(ENV, "").strip()
    if not text:
        return today()
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{ENV}={text!r}: the sample key must be an integer") from None


@dataclass(frozen=True)
class Sample:
    """Part `index` (0-based) of `parts` of a sweep over cases 0..total-1, chosen by `key`."""

    name: str
    total: int
    index: int
    parts: int
    key: int
    cases: range
    strided: bool = False

    def describe(self) -> str:
        """One line for the test output: which cases, how to rerun them, where the whole sweep is."""
        if self.strided:
            which = f"cases i = {self.index} mod {self.parts} of 0..{self.total - 1}"
        else:
            which = f"cases {self.cases.start}..{self.cases.stop - 1} of 0..{self.total - 1}"
        return (f"{self.name}: part {self.index + 1}/{self.parts}, {which} ({len(self.cases)} cases;"
                f" {ENV}={self.key} reruns this part; `-m slow` runs every case)")


def _check(name: str, total: int, n: int) -> None:
    if total <= 0 or n <= 0:
        raise ValueError(f"{name}: a sweep needs a positive number of cases and of parts (got {total}, {n})")


def window(name: str, total: int, size: int, key: int | None = None) -> Sample:
    """Block `key % parts` of the sweep cut into consecutive windows of `size` cases
    (parts = ceil(total / size); the last window may be shorter). ValueError when `total` or
    `size` is not positive."""
    _check(name, total, size)
    key = run_key() if key is None else key
    parts = math.ceil(total / size)
    index = key % parts
    return Sample(name, total, index, parts, key, range(index * size, min(total, (index + 1) * size)))


def strided(name: str, total: int, parts: int, key: int | None = None) -> Sample:
    """Part `key % parts` of the sweep cut by stride: the cases i with i % parts == index
    (spread over the whole sweep, e.g. over every wave of a layer). ValueError when `total` or
    `parts` is not positive."""
    _check(name, total, parts)
    key = run_key() if key is None else key
    index = key % parts
    return Sample(name, total, index, parts, key, range(index, total, parts), strided=True)
