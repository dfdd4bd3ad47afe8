"""`pgraph fmt` on generated programs (tests/differential/programs.py) with comments and blank
lines scattered in: the result parses to the same tree, keeps every comment in order, and is a
fixed point (hypothesis). Sampled (tests/support/sampling.py): each run draws EXAMPLES examples
from its sample key (PGRAPH_SAMPLE, else the date; a failure prints the key), so successive
runs draw different ones; `-m slow` draws SLOW_EXAMPLES (`PGRAPH_FMT_EXAMPLES=N` for more)."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from pgraph.frontend.fmt import tokens
from tests.conftest import ROOT
from tests.differential.programs import DataChooser, generate, render
from tests.support import sampling
from tests.unit.test_fmt import check_round_trip

EXAMPLES = 50
SLOW_EXAMPLES = int(os.environ.get("PGRAPH_FMT_EXAMPLES", "500"))
HEALTH = [HealthCheck.too_slow, HealthCheck.data_too_large]


@hypothesis_seed(sampling.run_key())
@settings(max_examples=EXAMPLES, database=None, deadline=None, suppress_health_check=HEALTH)
@given(data=st.data())
def test_fmt_of_generated_programs(data: st.DataObject) -> None:
    """EXAMPLES programs of this run's key (SLOW_EXAMPLES fresh ones: test_fmt_of_generated_programs_many)."""
    check_fmt(data)


@pytest.mark.slow
@settings(max_examples=SLOW_EXAMPLES, database=None, deadline=None, suppress_health_check=HEALTH)
@given(data=st.data())
def test_fmt_of_generated_programs_many(data: st.DataObject) -> None:
    check_fmt(data)


def check_fmt(data: st.DataObject) -> None:
    """One generated program with comments and blank lines drawn in: fmt round-trips it."""
    text = render(generate(DataChooser(data)))
    lines = text.split("\n")
    out = []
    for i, line in enumerate(lines):
        what = data.draw(st.sampled_from(["keep", "keep", "trailing", "above", "blank"]), label=f"line {i}")
        if what == "above":
            out.append(" " * data.draw(st.integers(0, 6)) + f"# above {i}")
        elif what == "blank":
            out.append("")
        out.append(line + (f"{' ' * data.draw(st.integers(1, 40))}# after {i}" if what == "trailing" and line.strip()
                           else ""))
    source = "\n".join(out)
    assert check_round_trip(source) is not None, f"({sampling.ENV}={sampling.run_key()})\n{source}"


SPEC_FILES = sorted({*ROOT.joinpath("specs").rglob("*.pgl"), *ROOT.joinpath("tests", "examples").glob("*.pgl")})


@settings(max_examples=int(os.environ.get("PGRAPH_FMT_EXAMPLES", "40")), derandomize=True, database=None,
          deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_fmt_of_the_specs_with_their_whitespace_scrambled(data: st.DataObject) -> None:
    """Random indentation, and random runs of spaces wherever the spec had a space (which line
    tokens up by chance and makes runs fmt must settle): the same tree, a fixed point."""
    path = data.draw(st.sampled_from(SPEC_FILES), label="spec")
    out = []
    for line in path.read_text(encoding="utf-8").split("\n"):
        toks = tokens(line)
        if not toks:
            out.append(line)
            continue
        text, end = " " * data.draw(st.integers(0, 8)), None
        for col, tok in toks:
            if end is not None and col > end:
                text += " " * data.draw(st.sampled_from([1, 1, 2, 5]))
            text += tok
            end = col + len(tok)
        out.append(text)
    source = "\n".join(out)
    assert check_round_trip(source) is not None, source
