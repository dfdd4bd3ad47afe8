"""The expander's fast paths equal their references (docs/architecture.md, "Fast paths").

- the compiled region and selection functions (`pgraph.expand.compiled`: one function of plain
  Python arithmetic per region, per dep selection, beside the `Evaluator` of `pgraph.ir.queries`,
  which decides whenever a compiled function cannot answer) and the inlined one-block and
  SPMD paths they allow (`tasks._simple_args`, `tasks._blocked_args`, `edges.tile_producers`);
  also in the window's slab check (`window._bbox`);
- the expander's memos (`ExpansionState.memo`): buffers resolved once per (loop nest,
  iteration) and tensor name; tile maps once per tile set and dep; producers' iterations
  once per (producer, consumer, consumer iterations).

`PGRAPH_REFERENCE=1` (pgraph.fastpath.reference_mode) turns both off. Every spec under specs/
and tests/ whose program lowers is expanded four ways (references; compiled only; memo only;
both, the default) and generated programs (tests/differential/programs.py: GENERATED in every
run, 400 more with `-m slow`) two ways (references, default); the instance graphs must be
identical field by field (instances, edges in insertion order with their records, argument
boxes, per-block accesses, allocations, issues, dropped dummies) and so must the work counted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pgraph.diagnostics import DiagnosticBag
from pgraph.expand import compiled, tasks
from pgraph.expand.expander import build
from pgraph.expand.state import ExpansionState
from pgraph.expand.window import make_window
from pgraph.fastpath import reference_mode
from pgraph.ir import program as ir
from pgraph.ir.instances import InstanceGraph
from pgraph.pipeline import Options, run_until
from tests.conftest import ROOT
from tests.differential.programs import RandomChooser, generate, render
from tests.unit.test_diagnostics import spec_options

SPECS = sorted(p for folder in ("specs", "tests") for p in (ROOT / folder).rglob("*.pgl"))
#: Generated programs compared in every run (seeds 0..N-1); `-m slow` compares 400 more.
GENERATED = 100
#: (compiled, memo) of the four ways; the first is the references, the last the default
WAYS = ((False, False), (True, False), (False, True), (True, True))


def program_of(spec: Path, opts: Options) -> ir.Program | None:
    """The checked Program of `spec` (None when it does not get that far, e.g. a diagnostic spec)."""
    stopped = run_until(spec, opts, DiagnosticBag(), "ir")
    return stopped.program


def picture(g: InstanceGraph, work: int) -> dict[str, Any]:
    """Everything an instance graph holds, as plain comparable values (edges in insertion order)."""
    return {
        "instances": list(g.instances),
        "by_key": list(g.by_key.items()),
        "edges": [(u, v, sorted(e.prov), e.entries, e.span) for u, v, e in g.edges()],
        "pred": [(v, list(adj)) for v, adj in g.pred.items()],
        "args": list(g.args.items()),
        "blocks": list(g.blocks.items()),
        "alloc_info": [(k, sid, loops, [t.name for t in ts]) for k, (sid, loops, ts) in g.alloc_info.items()],
        "issues": list(g.issues),
        "dropped": g.dropped,
        "windowed": sorted(g.windowed),
        "loop_weights": g.loop_weights,
        "scope_loops": g.scope_loops,
        "work": work,
    }


def expanded(program: ir.Program, full: bool, compiled_: bool, memo: bool) -> dict[str, Any]:
    st = ExpansionState(program, full, make_window(program, full), compiled=compiled_, memo=memo)
    return picture(build(st), st.work)


@pytest.mark.parametrize("spec", SPECS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_spec_expands_the_same_four_ways(spec: Path) -> None:
    opts, _ = spec_options(spec)
    program = program_of(spec, opts)
    if program is None:
        pytest.skip("does not lower (a diagnostic spec)")
    reference, *others = (expanded(program, opts.full, c, m) for c, m in WAYS)
    for (c, m), got in zip(WAYS[1:], others):
        for field in reference:
            assert got[field] == reference[field], (field, {"compiled": c, "memo": m})


def _generated_differ(tmp_path: Path, seeds: range) -> list[int]:
    spec = tmp_path / "g.pgl"
    differ = []
    for seed in seeds:
        spec.write_text(render(generate(RandomChooser(seed))), encoding="utf-8")
        program = program_of(spec, Options())
        if program is None:
            continue
        for full in (False, True):
            if expanded(program, full, False, False) != expanded(program, full, True, True):
                differ.append(seed)
                break
    return differ


def test_generated_programs_expand_the_same_with_the_references(tmp_path: Path) -> None:
    differ = _generated_differ(tmp_path, range(GENERATED))
    assert not differ, f"seeds whose expansion differs with the references: {differ[:10]}"


@pytest.mark.slow
def test_many_generated_programs_expand_the_same_with_the_references(tmp_path: Path) -> None:
    differ = _generated_differ(tmp_path, range(GENERATED, GENERATED + 400))
    assert not differ, f"seeds whose expansion differs with the references: {differ[:10]}"


def test_reference_mode_turns_the_fast_paths_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under PGRAPH_REFERENCE=1 the state runs the references: no compiled function is made
    (the Evaluator answers every region and selection) and nothing is memoised."""
    program = program_of(ROOT / "specs" / "decode_layer.pgl", Options())
    assert program is not None
    made: list[int] = []
    real_region, real_selection = compiled.region_function, compiled.selection_function

    def region_function(*a: Any) -> Any:
        made.append(1)
        return real_region(*a)

    def selection_function(*a: Any) -> Any:
        made.append(1)
        return real_selection(*a)

    from pgraph.expand import state, window

    monkeypatch.setattr(state, "region_function", region_function)
    monkeypatch.setattr(state, "selection_function", selection_function)
    monkeypatch.setattr(window, "region_function", region_function)
    monkeypatch.setenv("PGRAPH_REFERENCE", "1")
    assert reference_mode()
    st = ExpansionState(program, False, make_window(program, False))
    assert (st.compiled, st.memo) == (False, False)
    build(st)
    assert not made, "a compiled function was made in reference mode"
    assert not st.memos_used(), "a memo was filled in reference mode"
    monkeypatch.delenv("PGRAPH_REFERENCE")
    st = ExpansionState(program, False, make_window(program, False))
    assert (st.compiled, st.memo) == (True, True)
    build(st)
    assert made and st.memos_used(), "the default runs neither fast path: the comparisons above hold vacuously"


def test_the_compiled_paths_are_taken_on_the_decode_layer(monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparisons above would hold vacuously if no task took the inlined paths: on the
    decode layer most tasks take the one-block or the SPMD path, and no compiled region gives
    an answer the Evaluator does not."""
    program = program_of(ROOT / "specs" / "decode_layer.pgl", Options())
    assert program is not None
    taken = {"simple": 0, "blocked": 0, "general": 0}
    real = {name: getattr(tasks, f) for name, f in
            (("simple", "_simple_args"), ("blocked", "_blocked_args"), ("general", "_general_args"))}

    def counting(name: str) -> Any:
        def run(*a: Any) -> Any:
            taken[name] += 1
            return real[name](*a)
        return run

    for name, f in (("simple", "_simple_args"), ("blocked", "_blocked_args"), ("general", "_general_args")):
        monkeypatch.setattr(tasks, f, counting(name))
    build(ExpansionState(program, False, make_window(program, False), compiled=True, memo=True))
    assert taken["simple"] > 100 and taken["blocked"] > 10, taken
    compiled_general = taken["general"]
    taken.update(simple=0, blocked=0, general=0)
    build(ExpansionState(program, False, make_window(program, False), compiled=False, memo=True))
    assert taken["simple"] == taken["blocked"] == 0 and taken["general"] > compiled_general, taken
