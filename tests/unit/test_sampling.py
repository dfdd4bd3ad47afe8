"""tests/support/sampling.py: the windows of a sampled sweep cover it, and the key is the run's.

The properties that make a sampled test check what its long run checks, given enough runs:
the parts of keys 0..parts-1 are disjoint and together every case; a key names the same part on
every machine and in every worker; the key comes from PGRAPH_SAMPLE when set.
"""

from __future__ import annotations

import datetime
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from tests.support import sampling


@pytest.mark.parametrize(("total", "size"), [(10_000, 100), (300, 50), (20, 5), (7, 3), (1, 1), (5, 9)])
def test_windows_partition_the_sweep(total: int, size: int) -> None:
    parts = -(-total // size)
    seen: list[int] = []
    for key in range(parts):
        w = sampling.window("x", total, size, key)
        assert w.parts == parts and w.index == key
        assert len(w.cases) == (size if key < parts - 1 else total - size * (parts - 1))
        seen += w.cases
    assert seen == list(range(total))  # in order, each once
    assert sampling.window("x", total, size, parts + 3).cases == sampling.window("x", total, size, 3 % parts).cases


@pytest.mark.parametrize(("total", "parts"), [(12, 4), (3, 3), (588, 6), (5, 7)])
def test_strided_parts_partition_the_sweep(total: int, parts: int) -> None:
    seen = sorted(c for key in range(parts) for c in sampling.strided("x", total, parts, key).cases)
    assert seen == list(range(total))
    assert list(sampling.strided("x", 12, 4, 6).cases) == [2, 6, 10]  # by hand: 6 % 4 = 2


def test_bad_sweeps_are_refused() -> None:
    for total, size in ((0, 5), (5, 0), (-1, 3)):
        with pytest.raises(ValueError, match="positive"):
            sampling.window("x", total, size, 0)
        with pytest.raises(ValueError, match="positive"):
            sampling.strided("x", total, size, 0)


def test_the_key_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(sampling.ENV, " 42 ")
    assert sampling.run_key() == 42
    assert sampling.window("x", 10_000, 100).cases == range(4200, 4300)
    monkeypatch.setenv(sampling.ENV, "-3")  # Python's % keeps the part in range
    assert sampling.window("x", 10_000, 100).index == 97
    monkeypatch.setenv(sampling.ENV, "yesterday")
    with pytest.raises(ValueError, match="must be an integer"):
        sampling.run_key()
    monkeypatch.delenv(sampling.ENV)
    assert sampling.run_key() == sampling.today()


def test_today_is_the_utc_day_number() -> None:
    # 2024-01-01 is day 19,723 (by hand: 54 years of 365 days plus 13 leap days since 1970)
    assert (datetime.date(2024, 1, 1) - datetime.date(1970, 1, 1)).days == 54 * 365 + 13 == 19_723
    now = datetime.datetime.now(datetime.UTC).date()
    assert sampling.today() in {(now - datetime.date(1970, 1, 1)).days + d for d in (0, 1)}  # midnight


def test_describe_names_the_cases_and_the_key() -> None:
    w = sampling.window("differential seeds", 10_000, 100, 20_789)
    text = w.describe()
    assert "part 90/100" in text and "cases 8900..8999 of 0..9999" in text and "PGRAPH_SAMPLE=20789" in text
    assert "-m slow" in text
    s = sampling.strided("chunks", 12, 4, 5).describe()
    assert "part 2/4" in s and "i = 1 mod 4" in s and "(3 cases;" in s


def test_the_session_fixes_the_key_for_every_worker() -> None:
    """conftest sets PGRAPH_SAMPLE once (workers and subprocesses inherit it) and prints it, in
    the header and, for a -q run, in the summary."""
    key = os.environ[sampling.ENV]
    assert int(key) == sampling.run_key()
    for quiet in ([], ["-q"]):
        out = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *quiet,
                              "tests/unit/test_sampling.py::test_bad_sweeps_are_refused"], cwd=ROOT,
                             capture_output=True, text=True, env={**os.environ, sampling.ENV: "77"}, check=False)
        assert out.returncode == 0, out.stdout + out.stderr
        assert out.stdout.count("pgraph sample key: PGRAPH_SAMPLE=77 (set in the environment)") == (1 if quiet else 2)
