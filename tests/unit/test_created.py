"""Runtime-created tensors (`tensor t : dtype[...] created`, docs/language.md §5.2, PG124).

The recorded graph of tests/examples/a2a3_created.pgl equals the plan in
tests/unit/test_a2a3.py (`test_example_recorded_graph_equals_pgraph`); here: the syntax, the
plan's shape (no alloc task, creator edges from the creating task, no TensorMap entry for the
creating write), the emitted C++, PG124's cases, and that the simulator runs it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pgraph.backends.a2a3 import build
from pgraph.backends.target import BuildInfo
from pgraph.cli import main
from pgraph.diagnostics import DiagnosticBag
from pgraph.frontend.parser import parse_source
from pgraph.frontend.unparse import unparse
from pgraph.kinds import Provenance
from pgraph.pipeline import Options, plan_program
from pgraph.source import SourceFile

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "tests" / "examples" / "a2a3_created.pgl"


def _plan(path: Path):  # type: ignore[no-untyped-def]
    plan, bag = plan_program(path, Options())
    return plan, bag


def test_created_parses_and_unparses() -> None:
    text = "entry e {\n  tensor a : f32[4] created\n}\n"
    bag = DiagnosticBag()
    mod = parse_source(SourceFile("<t>", text), bag)
    assert mod is not None and not bag.items
    decl = mod.items[0].block.stmts[0]
    assert decl.created and not decl.external
    assert "tensor a : f32[4] created" in unparse(mod)


def test_no_alloc_task_and_creator_edges_from_the_creating_task() -> None:
    plan, bag = _plan(EXAMPLE)
    assert plan is not None and not bag.has_errors, [d.message for d in bag.items]
    g = plan.graph
    labels = [i.label for i in g.instances]
    assert [i.label for i in g.instances if i.kind == "alloc"] == ["alloc@scope0"]  # `kept` only
    edges = {(labels[u], labels[v]): set(d.prov) for u, v, d in g.graph.edges(data=True)}
    assert edges[("stage1@s=0", "stage2@s=0")] == {Provenance.CREATOR}
    assert edges[("stage2@s=0", "stage3@s=0")] == {Provenance.CREATOR}
    # stage3's INOUT on b registers an entry: stage4's read finds it; stage2's creating write does not
    assert edges[("stage3@s=0", "stage4@s=0")] == {Provenance.INFERRED}
    assert edges[("stage2@s=0", "stage4@s=0")] == {Provenance.CREATOR}
    assert not any(u.startswith("stage") and v.startswith("stage") and u[-1] != v[-1] and "stage4" not in u
                   for u, v in edges)  # each iteration's buffers are its own


def test_the_creating_submit_passes_the_create_info_and_binds_the_ref() -> None:
    plan, _ = _plan(EXAMPLE)
    files = build(plan, BuildInfo(str(EXAMPLE), ""))
    cpp = next(text for name, text in files.items() if name.endswith(".cpp"))
    assert "TensorCreateInfo a_ci(a_ci_shapes, 1, DataType::FLOAT32);" in cpp
    assert "params_t1.add_output(a_ci);" in cpp
    assert "a = task_1_outs.get_ref(0);" in cpp
    assert "params_t3.add_inout(b);" in cpp
    assert cpp.count("alloc_tensors(") == 1


@pytest.mark.parametrize("body,message", [
    ("at peek { call copy(h, y) }\n  at make { call copy(x, h) }", "'peek' reads created tensor 'h' before"),
    ("parallel make[i in 0..2] { call half(x, h[i*8 +: 8, :]) }\n  at peek { call copy(h, y) }",
     "'make[i=0]' writes part of created tensor 'h'"),
    ("for s in 0..2 { at make { call copy(x, h) } }\n  at peek { call copy(h, y) }",
     "'make@s=1' would create created tensor 'h' a second time"),
    ("view hv = h as [1024]\n  at make { call copy(x, h) }\n  at peek { call copy(h, y) }",
     "view 'hv' of created tensor 'h'"),
])
def test_pg124(tmp_path: Path, body: str, message: str) -> None:
    spec = tmp_path / "c.pgl"
    spec.write_text("tensor x : f32[16, 64] external\ntensor y : f32[16, 64] external\n"
                    "kernel copy aiv (src : in f32[16, 64], dst : out f32[16, 64])\n"
                    "kernel half aiv (src : in f32[16, 64], dst : out f32[8, 64])\n"
                    f"entry e {{\n  tensor h : f32[16, 64] created\n  {body}\n}}\n")
    _, bag = _plan(spec)
    got = [d.message for d in bag.items if d.code == "PG124"]
    assert len(got) == 1 and message in got[0], [d.message for d in bag.items]


def test_sim_runs_a_created_pipeline(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sim", str(EXAMPLE)]) == 0
    assert "utilisation" in capsys.readouterr().out
