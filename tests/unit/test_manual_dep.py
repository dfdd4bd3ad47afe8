"""`manual_dep` tensors (`tensor t : dtype[...] manual_dep`, docs/language.md §5.3).

simpler TRB/runtime/tensor_create_info.h `TensorCreateInfo(shapes, ndims, dtype, bool
manual_dep=false)`; TRB/orchestration submit: for such a buffer the creator edge
(owner_task_id) is kept, but there is no TensorMap lookup (INPUT/INOUT) and no insert
(INOUT/OUTPUT_EXISTING), so in an auto scope its order comes from explicit deps. The recorded
graph of tests/examples/a2a3_manual_dep.pgl equals the plan in tests/unit/test_a2a3.py
(`test_example_recorded_graph_equals_pgraph`); here: syntax, the plan's edges (hand-counted),
the race pass on unordered writers, the emitted C++, and `external manual_dep` (PG036).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pgraph.backends.a2a3 import build
from pgraph.backends.target import BuildInfo
from pgraph.diagnostics import DiagnosticBag
from pgraph.frontend.parser import parse_source
from pgraph.frontend.unparse import unparse
from pgraph.kinds import Provenance
from pgraph.pipeline import Options, plan_program
from pgraph.source import SourceFile

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "tests" / "examples" / "a2a3_manual_dep.pgl"

HEAD = ("tensor x : f32[16, 64] external\ntensor y : f32[16, 64] external\n"
        "kernel copy aiv (src : in f32[16, 64], dst : out f32[16, 64])\n"
        "kernel bump aiv (acc : inout f32[16, 64])\n")


def _plan(path: Path):  # type: ignore[no-untyped-def]
    return plan_program(path, Options())


@pytest.mark.parametrize("flags", ["manual_dep", "created manual_dep"])
def test_manual_dep_parses_and_unparses(flags: str) -> None:
    text = f"entry e {{\n  tensor a : f32[4] {flags}\n}}\n"
    bag = DiagnosticBag()
    mod = parse_source(SourceFile("<t>", text), bag)
    assert mod is not None and not bag.items
    decl = mod.items[0].block.stmts[0]
    assert decl.manual_dep and not decl.external and decl.created == ("created" in flags)
    assert f"tensor a : f32[4] {flags}" in unparse(mod)


def test_example_edges_hand_counted() -> None:
    plan, bag = _plan(EXAMPLE)
    assert plan is not None and not bag.has_errors, [d.message for d in bag.items]
    g = plan.graph
    labels = [i.label for i in g.instances]
    edges = {(labels[u], labels[v]): set(d.prov) for u, v, d in g.graph.edges(data=True)}
    a = "alloc@scope0"  # one alloc task makes acc and h
    want = {
        # creator edges: every task passed acc or h (one edge per task, however many args)
        (a, "seed"): {Provenance.CREATOR}, (a, "pre"): {Provenance.CREATOR},
        (a, "band0"): {Provenance.CREATOR}, (a, "band1"): {Provenance.CREATOR},
        (a, "out"): {Provenance.CREATOR},
        # explicit deps: the only order on acc
        ("seed", "band0"): {Provenance.EXPLICIT}, ("seed", "band1"): {Provenance.EXPLICIT},
        ("band0", "out"): {Provenance.EXPLICIT}, ("band1", "out"): {Provenance.EXPLICIT},
        # inferred from the ordinary h: pre writes it, both bands read it
        ("pre", "band0"): {Provenance.INFERRED}, ("pre", "band1"): {Provenance.INFERRED},
    }
    assert len(want) == 5 + 4 + 2
    assert edges == want
    # without manual_dep, acc alone would add band0 -> band1 (atomic_add registers, then looks up)
    assert ("band0", "band1") not in edges


def _spec(tmp_path: Path, decl: str, body: str) -> Path:
    spec = tmp_path / "m.pgl"
    spec.write_text(HEAD + f"entry e {{\n  tensor h : f32[16, 64] {decl}\n  {body}\n}}\n")
    return spec


@pytest.mark.parametrize("decl", ["manual_dep", "created manual_dep"])
def test_unordered_writers_of_a_manual_dep_tensor_race(tmp_path: Path, decl: str) -> None:
    # the same body as test_an_ordinary_tensor_needs_no_deps: w1's INOUT would find w0's entry
    body = "at w0 { call copy(x, h) }\n  at w1 { call bump(h) }\n  at r deps(w0, w1) { call copy(h, y) }"
    if decl.startswith("created"):  # the creating write orders all later users (creator edge): two bumps after it
        body = "at c { call copy(x, h) }\n  at w0 { call bump(h) }\n  at w1 { call bump(h) }\n" \
               "  at r deps(w0, w1) { call copy(h, y) }"
    _, bag = _plan(_spec(tmp_path, decl, body))
    races = [d.message for d in bag.items if d.code == "PG100"]
    assert races and "'w0'" in races[0] and "'w1'" in races[0], [d.message for d in bag.items]


def test_explicit_deps_order_a_manual_dep_tensor(tmp_path: Path) -> None:
    body = "at w0 { call copy(x, h) }\n  at w1 deps(w0) { call bump(h) }\n  at r deps(w1) { call copy(h, y) }"
    _, bag = _plan(_spec(tmp_path, "manual_dep", body))
    assert not bag.has_errors, [d.message for d in bag.items]


def test_an_ordinary_tensor_needs_no_deps(tmp_path: Path) -> None:
    body = "at w0 { call copy(x, h) }\n  at w1 { call bump(h) }\n  at r { call copy(h, y) }"
    _, bag = _plan(_spec(tmp_path, "", body))
    assert not bag.has_errors, [d.message for d in bag.items]


def test_the_create_info_carries_manual_dep() -> None:
    plan, _ = _plan(EXAMPLE)
    files = build(plan, BuildInfo(str(EXAMPLE), ""))
    cpp = next(text for name, text in files.items() if name.endswith(".cpp"))
    assert "TensorCreateInfo acc_ci(acc_ci_shapes, 1, DataType::FLOAT32, /*manual_dep=*/true);" in cpp
    assert "TensorCreateInfo h_ci(h_ci_shapes, 1, DataType::FLOAT32);" in cpp


def test_a_created_manual_dep_tensor_passes_the_flag(tmp_path: Path) -> None:
    body = "at c { call copy(x, h) }\n  at r deps(c) { call copy(h, y) }"
    plan, bag = _plan(_spec(tmp_path, "created manual_dep", body))
    assert plan is not None and not bag.has_errors, [d.message for d in bag.items]
    cpp = next(text for name, text in build(plan, BuildInfo("m.pgl", "")).items() if name.endswith(".cpp"))
    assert "TensorCreateInfo h_ci(h_ci_shapes, 2, DataType::FLOAT32, /*manual_dep=*/true);" in cpp
    assert "add_output(h_ci);" in cpp and "alloc_tensors(" not in cpp


def test_manual_dep_on_an_external_tensor_is_pg036(tmp_path: Path) -> None:
    spec = tmp_path / "e.pgl"
    spec.write_text("tensor x : f32[16, 64] external manual_dep\ntensor y : f32[16, 64] external\n"
                    "kernel copy aiv (src : in f32[16, 64], dst : out f32[16, 64])\n"
                    "entry e {\n  at c { call copy(x, y) }\n}\n")
    _, bag = _plan(spec)
    got = [d.message for d in bag.items if d.code == "PG036"]
    assert len(got) == 1 and "`manual_dep` on external tensor 'x'" in got[0], [d.message for d in bag.items]


def test_created_external_is_still_refused() -> None:
    bag = DiagnosticBag()
    parse_source(SourceFile("<t>", "tensor a : f32[4] created external\n"), bag)
    assert bag.has_errors
