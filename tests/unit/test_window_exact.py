"""The two-iteration window equals `--full`: every count, every capacity figure, every diagnostic.

The window expands iterations lo and lo+1 of an identical loop and weights lo+1 for the rest
(pgraph.expand.window); a report that is true under the window must be true of the real
program, so each figure is compared with the full expansion of the same spec.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pgraph.backends.report import report_facts
from pgraph.pipeline import Options, plan_program
from tests.conftest import HEAD_SPEC, ROOT, VARIANT_762

EXAMPLES = sorted(p for p in (ROOT / "tests" / "examples").glob("*.pgl") if "entry " in p.read_text(encoding="utf-8"))
#: the loop-iteration suffix of an instance label (`p_5[i6=1]@L1=2,L4=0`)
ITERS = re.compile(r"@[A-Za-z_0-9=,]+")


def comparable(facts: dict[str, object]) -> dict[str, object]:
    """The report figures that windowed and --full plans must share: all of them but the critical
    path's listing of expanded tasks (`path`, `window_length_us`, the modelled path: only its
    length is compared), whose broken links name the window's copy of an iteration (compared
    without the iteration)."""
    out = dict(facts)
    cp = out.get("critical_path")
    if isinstance(cp, dict):
        out["critical_path"] = {k: (ITERS.sub("", repr(v)) if k.startswith("first_broken") else
                                    v["length_us"] if k == "modelled" else v)
                                for k, v in cp.items() if k not in ("path", "window_length_us")}
    return out


def facts(spec: Path, full: bool, **kw: object) -> tuple[dict[str, object], set[tuple[str, str, int]]]:
    plan, bag = plan_program(spec, Options(full=full, **kw))  # type: ignore[arg-type]
    where = {(d.code, d.span.filename if d.span else "", d.span.line if d.span else 0) for d in bag.items}
    assert plan is not None, [d.message for d in bag.items]
    return comparable(report_facts(plan)), where


def assert_same(spec: Path, **kw: object) -> dict[str, object]:
    """Windowed and --full facts and diagnostics of `spec` are equal; the --full facts."""
    window, wdiag = facts(spec, False, **kw)
    full, fdiag = facts(spec, True, **kw)
    for key in window.keys() | full.keys():
        assert window.get(key) == full.get(key), key
    assert wdiag == fdiag
    return full


def windowed_loops(spec: Path) -> set[int]:
    """The ids of the loops the default (windowed) plan of `spec` expands twice only."""
    plan, bag = plan_program(spec, Options())
    assert plan is not None, [d.message for d in bag.items]
    return set(plan.graph.windowed)


@pytest.mark.parametrize("layers", [3, 5])
def test_head_window_equals_full(layers: int) -> None:
    assert_same(HEAD_SPEC, layers=layers)


def test_762_window_equals_full() -> None:
    assert_same(VARIANT_762, layers=4)


@pytest.mark.parametrize("spec", EXAMPLES, ids=lambda p: p.stem)
def test_examples_window_equal_full(spec: Path) -> None:
    assert_same(spec)


def test_dep_pool_of_a_producer_read_by_every_iteration(tmp_path: Path) -> None:
    """A producer declared once in the entry, consumed by one task in each of 20 iterations: its
    fanout holds 20 dep-pool entries. The window used to count 2 (L=0 and L=1) and miss PG111."""
    spec = tmp_path / "fan.pgl"
    spec.write_text("""
target a2a3 { dep_pool = 10 }
tensor x : f32[16, 64] external
tensor y : f32[20, 16, 64] external
kernel fill aiv (a : out f32[16, 64])
kernel use aiv (a : in f32[16, 64], b : out f32[16, 64])
entry e {
  manual scope {
    at p { call fill(x) }
    for L in 0..20 {
      at c deps(p) { call use(x, y[L, :, :]) }
    }
  }
}
""", encoding="utf-8")
    window, wdiag = facts(spec, False)
    full, fdiag = facts(spec, True)
    ring2 = next(r for r in window["rings"] if r["ring"] == 2)  # type: ignore[attr-defined]
    assert ring2["peak_dep_pool"] == 20  # p's 20 consumers, one per iteration (by hand)
    assert window["rings"] == full["rings"]
    assert "PG111" in {c for c, _, _ in wdiag} and wdiag == fdiag


def test_carried_loop_body_keeps_its_previous_iteration(tmp_path: Path) -> None:
    """A loop body whose TaskId is carried keeps the previous iteration's tasks alive: ring 2
    holds 2 tasks per iteration, 4 with the retained iteration (by hand; a regression: the
    retained figure was once summed outside the scope chain and stayed 2)."""
    spec = tmp_path / "ret.pgl"
    spec.write_text("""
tensor x : f32[16, 64] external
kernel k aiv (a : inout f32[16, 64])
entry e {
  at first { call k(x) }
  for L in 0..3 carry c = first then t {
    at t deps(c) { call k(x) }
    at u { call k(x) }
  }
}
""", encoding="utf-8")
    for full in (False, True):
        f, _ = facts(spec, full)
        ring2 = next(r for r in f["rings"] if r["ring"] == 2)  # type: ignore[attr-defined]
        assert (ring2["peak_tasks"], ring2["peak_tasks_with_carry"]) == (2, 4)


NESTED = """
tensor x : f32[16, 64] external
kernel k aiv (a : inout f32[16, 64])
entry e {
  at first { call k(x) }
  for O in 0..OUTER carry c = first then t {
    for L in 0..4 {
      at t deps(c) { call k(x) }
    }
  }
}
"""


@pytest.mark.parametrize(("outer", "windowed"), [(1, {1}), (2, set()), (3, {0})])
def test_loop_inside_a_loop_is_expanded_in_full(tmp_path: Path, outer: int, windowed: set[int]) -> None:
    """A windowed loop inside a loop of several iterations (differential seed 8119): the last
    inner `t` of outer iteration O feeds all 4 inner `t`s of O + 1 (the carry c), which the
    window's two inner copies do not weigh: its fanout was counted as 2 (2 outer iterations) or 3 (3) entries where --full has 4.
    Inside a one-iteration loop the inner loop is still windowed."""
    spec = tmp_path / "nested.pgl"
    spec.write_text(NESTED.replace("OUTER", str(outer)), encoding="utf-8")
    assert windowed_loops(spec) == windowed
    full = assert_same(spec)
    # by hand, ring 3 (the inner body scope at depth 3, one t per instance): the inout k(x) chain gives each t
    # one TensorMap edge to the next t; the last t of an outer iteration feeds the 4 t's of the next
    # through c, the edge to the first of them merged with its TensorMap edge (simpler dedups per
    # producer per submission, docs/upstream.md §2.7): 4 entries, else 1
    ring3 = next(r for r in full["rings"] if r["ring"] == 3)  # type: ignore[attr-defined]
    assert ring3["peak_dep_pool"] == (4 if outer > 1 else 1)


def test_critical_path_jump_waits_for_still_tasks_with_growing_inputs(tmp_path: Path) -> None:
    """The window's critical path skips the passes of a layer loop once it is steady. By hand
    (costs k 5, k10 10, big 100): t_L = t_(L-1) + 5 from first = 5, so t_L = 5 (L + 2); w costs
    100 with no input; z_L = 10 + max(t_(L-1), 100) sits at 110 until t passes 100 (L = 20), then
    grows, z_39 = 10 + t_38 = 210. A jump taken while z is still (passes 2 and 3 move only t,
    by 5) would keep z at 110 and report t_39 = 205."""
    spec = tmp_path / "jump.pgl"
    spec.write_text("""
tensor x : f32[16, 64] external
tensor z2 : f32[40, 16, 64] external
tensor w2 : f32[40, 16, 64] external
kernel k aiv (a : inout f32[16, 64])
kernel k10 aiv (a : inout f32[16, 64])
kernel big aic (a : inout f32[16, 64])
cost k = 5
cost k10 = 10
cost big = 100
entry e {
  manual scope {
    at first { call k(x) }
    for L in 0..40 carry c = first then t {
      at w { call big(w2[L, :, :]) }
      at z deps(c, w) { call k10(z2[L, :, :]) }
      at t deps(c) { call k(x) }
    }
  }
}
""", encoding="utf-8")
    assert windowed_loops(spec) == {0}
    window, _ = facts(spec, False)
    full, _ = facts(spec, True)
    assert window["critical_path"]["length_us"] == full["critical_path"]["length_us"] == 210  # type: ignore[index]


def test_carry_init_read_after_the_loop_expands_it(tmp_path: Path) -> None:
    """Found by an adversarial review: `p`, after the loop, reads h0, the INIT of the tensor carry
    `cur`; only iteration 0's `a` writes h0 (through `cur`), so by hand the critical path is
    pre (5) + a@L=0 (5) + p (10000) = 10010 (alloc tasks cost 0). The window let a@L=0's edge
    into p stand for every iteration and reported a@L=39 (400) + 10000 = 10400; such a loop is
    now expanded in full."""
    spec = tmp_path / "init_after.pgl"
    spec.write_text("""
tensor y : f32[16, 64] external
kernel fill aiv (a : out f32[16, 64])
kernel bump aiv (a : inout f32[16, 64])
kernel copy aiv (a : in f32[16, 64], b : inout f32[16, 64])
kernel rd aiv (a : in f32[16, 64])
kernel huge aiv (a : in f32[16, 64])
cost bump = 5
cost copy = 5
cost huge = 10000
entry e {
  tensor h0 : f32[16, 64]
  at pre { call fill(h0) }
  for L in 0..40 carry cur = h0 then h, c = pre then a {
    tensor h : f32[16, 64]
    at a { call bump(cur) }
    at b { call copy(cur, h) }
    at cc deps(c) { call rd(y) }
  }
  at p { call huge(h0) }
}
""", encoding="utf-8")
    assert windowed_loops(spec) == set()
    full = assert_same(spec)
    assert full["critical_path"]["length_us"] == 10010  # type: ignore[index]
