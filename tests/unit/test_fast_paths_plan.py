"""The planner's fast paths equal their references (docs/architecture.md, "Fast paths").

- the NumPy race analysis (`plan/races.py`: `_numpy_pairs` for the touches of a tensor name with
  at least NUMPY_TOUCHES of them, and `Reach.ordered_mask` for 10,000 pairs or more once NumPy is
  loaded) beside the pure-Python sweep and `Reach.ordered_pairs`;
- the steady-state jump of `plan/critical_path.py`'s `unrolled_length` (a windowed loop whose
  passes all move by the same step skips to its last pass) beside evaluating every pass;
- `plan/reach.py`'s ancestor id ranges (graphs above BITSET_NODES; forced here for every graph,
  with RANGE_CAP 4 so that most sets are widened and their answers searched) beside the
  bounded searches (the references here for every graph too) and the bitsets (the default), and `plan/hygiene.py`'s funnel candidates beside the intersection of
  every consumer's predecessors.

`PGRAPH_REFERENCE=1` (pgraph.fastpath.reference_mode) runs the references. Each spec under
specs/ and tests/ and generated programs (tests/differential/programs.py: 100 in every run,
400 more with `-m slow`) are planned three ways: the references, the default (each fast path where its thresholds take it)
and every fast path forced (the NumPy pairing for every tensor name, whatever its size); the
`plan --format json` report (facts and diagnostics) and the diagnostics must be the same.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pgraph.backends.report import report_json
from pgraph.diagnostics import diagnostic_json
from pgraph.fastpath import reference_mode
from pgraph.pipeline import Options, plan_program
from pgraph.plan import races, reach
from tests.conftest import ROOT
from tests.differential.programs import RandomChooser, generate, render
from tests.unit.test_diagnostics import spec_options

SPECS = sorted(p for folder in ("specs", "tests") for p in (ROOT / folder).rglob("*.pgl"))
#: Generated programs compared in every run (seeds 0..N-1); `-m slow` compares 400 more.
GENERATED = 100


def outcome(spec: Path, opts: Options) -> str:
    """The report JSON of the plan (facts and diagnostics), or the diagnostics when no plan was made."""
    plan, bag = plan_program(spec, opts)
    if plan is None:
        return json.dumps([diagnostic_json(d) for d in bag.sorted()], indent=1, sort_keys=True)
    return json.dumps(report_json(plan, str(spec)), indent=1, sort_keys=True)


def three_ways(spec: Path, opts: Options, monkeypatch: pytest.MonkeyPatch, default: bool = True
               ) -> tuple[str, str | None, str]:
    """(references, default (None unless `default`), every fast path forced)."""
    with monkeypatch.context() as m:
        m.setenv("PGRAPH_REFERENCE", "1")
        assert reference_mode()
        m.setattr(reach, "BITSET_NODES", 0)  # the bounded searches (the default's are bitsets)
        reference = outcome(spec, opts)
    with monkeypatch.context() as m:
        m.delenv("PGRAPH_REFERENCE", raising=False)
        assert not reference_mode()
        by_default = outcome(spec, opts) if default else None
        m.setattr(races, "NUMPY_TOUCHES", 1)
        m.setattr(races, "NUMPY_LOADED_TOUCHES", 1)
        m.setattr(reach, "BITSET_NODES", 0)
        m.setattr(reach, "RANGE_CAP", 4)
        forced = outcome(spec, opts)
    return reference, by_default, forced


@pytest.mark.parametrize("spec", SPECS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_spec_plans_the_same_with_the_references(spec: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    opts, _ = spec_options(spec)
    reference, default, forced = three_ways(spec, opts, monkeypatch)
    assert default == reference
    assert forced == reference


def _generated_differ(tmp_path: Path, seeds: range, monkeypatch: pytest.MonkeyPatch, default: bool) -> list[int]:
    spec = tmp_path / "g.pgl"
    differ = []
    for seed in seeds:
        spec.write_text(render(generate(RandomChooser(seed))), encoding="utf-8")
        reference, by_default, forced = three_ways(spec, Options(), monkeypatch, default)
        if forced != reference or (default and by_default != reference):
            differ.append(seed)
    return differ


def test_generated_programs_plan_the_same_with_the_references(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """GENERATED programs, the references against every fast path forced (the default takes the
    jump as forced does, and on these small tensors never pairs with NumPy)."""
    differ = _generated_differ(tmp_path, range(GENERATED), monkeypatch, default=False)
    assert not differ, f"seeds whose plan differs with the references: {differ[:10]}"


@pytest.mark.slow
def test_many_generated_programs_plan_the_same_three_ways(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    differ = _generated_differ(tmp_path, range(GENERATED, GENERATED + 400), monkeypatch, default=True)
    assert not differ, f"seeds whose plan differs with the references: {differ[:10]}"


def test_the_corpus_exercises_both_fast_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparisons above would hold vacuously if no spec took a fast path: the decode
    layer's 40 windowed layers jump, and the forced NumPy pairing pairs its tensors."""
    from pgraph.plan import critical_path

    jumps: list[int] = []
    pairs: list[int] = []
    real_unrolled, real_numpy = critical_path.unrolled_length, races._numpy_pairs

    def unrolled(plan, cost):  # type: ignore[no-untyped-def]
        out = real_unrolled(plan, cost)
        jumps.append(len(out[2]))  # the path has one copy per pass evaluated
        return out

    def numpy_pairs(named, rank):  # type: ignore[no-untyped-def]
        pairs.append(len(named))
        return real_numpy(named, rank)

    monkeypatch.setattr(critical_path, "unrolled_length", unrolled)
    monkeypatch.setattr(races, "_numpy_pairs", numpy_pairs)
    monkeypatch.setattr(races, "NUMPY_TOUCHES", 1)
    monkeypatch.setattr(races, "NUMPY_LOADED_TOUCHES", 1)
    monkeypatch.delenv("PGRAPH_REFERENCE", raising=False)
    spec = ROOT / "specs" / "decode_layer.pgl"
    plan_program(spec, Options())
    assert pairs, "the forced NumPy pairing did not run"
    fast_path = jumps[-1]
    monkeypatch.setenv("PGRAPH_REFERENCE", "1")
    pairs.clear()
    plan_program(spec, Options())
    assert not pairs, "the reference mode paired with NumPy"
    assert jumps[-1] > fast_path, "every pass evaluated gives a path through more copies than the jump"


def test_reference_mode_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for value, on in (("1", True), ("yes", True), ("0", False), ("", False)):
        monkeypatch.setenv("PGRAPH_REFERENCE", value)
        assert reference_mode() is on
    monkeypatch.delenv("PGRAPH_REFERENCE")
    assert not reference_mode()


def test_reference_mode_takes_names(monkeypatch: pytest.MonkeyPatch) -> None:
    """PGRAPH_REFERENCE=a,b switches off the named fast paths only; 1 or any other value all."""
    from pgraph.fastpath import FAST_PATHS

    monkeypatch.setenv("PGRAPH_REFERENCE", "lalr,steady-jump")
    assert reference_mode("lalr") and reference_mode("steady-jump")
    assert not reference_mode("race-numpy") and not reference_mode("query-cache")
    assert not reference_mode()  # not every one is off
    for value in ("1", "yes", "lalr,no-such-path"):
        monkeypatch.setenv("PGRAPH_REFERENCE", value)
        assert reference_mode() and all(reference_mode(n) for n in FAST_PATHS)
    monkeypatch.setenv("PGRAPH_REFERENCE", "0")
    assert not any(reference_mode(n) for n in FAST_PATHS)
    with pytest.raises(ValueError, match="not a fast path"):
        reference_mode("no-such-path")
