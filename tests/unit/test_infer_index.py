"""Auto-scope TensorMap inference through the interval index (`pgraph/expand/tensormap.py`)
equals the reference (`edges.infer_edges` under PGRAPH_REFERENCE=1: every lookup against every
live entry): the same edges with the same provenances, inserted in the same order, on every
spec of the corpus, on generated programs, and on hand-made auto-scope cases that stress the
index (length classes, covering INOUTs that replace entries, empty boxes,
views of another shape, several arguments of one task on one buffer).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pgraph.expand import tensormap
from pgraph.kinds import Provenance
from pgraph.pipeline import Options, plan_program
from tests.conftest import ROOT
from tests.differential.programs import RandomChooser, generate, render
from tests.unit.test_diagnostics import spec_options

SPECS = sorted(p for folder in ("specs", "tests") for p in (ROOT / folder).rglob("*.pgl"))


def edges(spec: Path, opts: Options) -> list[tuple[int, list[tuple[int, list[str]]]]] | None:
    """Every instance's successors in insertion order, with their provenances (None: no plan)."""
    plan, _bag = plan_program(spec, opts)
    if plan is None:
        return None
    g = plan.graph
    return [(v, [(w, sorted(str(p) for p in data.prov)) for w, data in g.succ[v].items()])
            for v in range(len(g.instances))]


def both(spec: Path, opts: Options, monkeypatch: pytest.MonkeyPatch) -> tuple[object, object]:
    with monkeypatch.context() as m:
        m.setenv("PGRAPH_REFERENCE", "1")
        reference = edges(spec, opts)
    with monkeypatch.context() as m:
        m.delenv("PGRAPH_REFERENCE", raising=False)
        fast = edges(spec, opts)
    return reference, fast


@pytest.mark.parametrize("spec", SPECS, ids=lambda p: str(p.relative_to(ROOT)))
def test_corpus_edges_equal_the_reference(spec: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    opts, _ = spec_options(spec)
    reference, fast = both(spec, opts, monkeypatch)
    assert fast == reference


def test_generated_program_edges_equal_the_reference(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = tmp_path / "g.pgl"
    differ = []
    inferred = 0
    for seed in range(150):
        spec.write_text(render(generate(RandomChooser(seed))), encoding="utf-8")
        reference, fast = both(spec, Options(), monkeypatch)
        if fast != reference:
            differ.append(seed)
        inferred += sum(str(Provenance.INFERRED) in prov for _, succ in (reference or []) for _, prov in succ)
    assert not differ, f"seeds whose edges differ from the reference: {differ[:10]}"
    assert inferred > 100, "the generated programs infer too few edges for the comparison to mean much"


STRESS = """
tensor x : f32[64, 32] external
view xv = x as [32, 64]
tensor y : f32[64, 32] external
kernel put aiv (dst : out f32[R, C])
kernel bump aiv (dst : inout f32[R, C])
kernel get aiv (src : in f32[R, C])
kernel two aiv (a : in f32[R, C], b : inout f32[R2, C2])
entry main {
  auto scope {
    parallel rows[i in 0..16] { call put(x[i * 4 +: 4, :]) }
    parallel cols[j in 0..8] { call get(x[:, j * 4 +: 4]) }
    at wide { call bump(x[0:32, :]) }
    parallel again[i in 0..16] { call get(x[i * 4 +: 4, 0:8]) }
    at small { call bump(x[40:41, 3:5]) }
    at empty { call bump(x[8:8, :]) }
    at whole { call bump(x) }
    parallel after[i in 0..64] { call get(x[i +: 1, :]) }
    at both { call two(x[0:16, :], x[8:24, :]) }
    parallel yw[i in 0..8] { call put(y[i * 8 +: 8, :]) }
    at yv { call get(y[4:20, 0:16]) }
    at v0 { call bump(xv[0:2, :]) }
    at v1 { call get(x[0:8, :]) }
  }
}
"""


def test_stress_edges_equal_the_reference(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every feature of the index in one auto scope; the index is used (not only the plain list)."""
    spec = tmp_path / "stress.pgl"
    spec.write_text(STRESS.replace("f32[R, C]", "f32").replace("f32[R2, C2]", "f32"), encoding="utf-8")
    used: list[int] = []
    real = tensormap.LiveIndex.lookup

    def lookup(self, box, tensor):  # type: ignore[no-untyped-def]
        out = real(self, box, tensor)
        used.append(len(out))
        return out

    monkeypatch.setattr(tensormap.LiveIndex, "lookup", lookup)
    reference, fast = both(spec, Options(), monkeypatch)
    assert reference is not None, "the stress spec does not plan"
    assert fast == reference
    assert used and max(used) > 1
