"""`entry NAME unscoped`: the body runs in the executor's root scope (depth 0, ring 0).

simpler (docs/upstream.md §2.1, §5.1): the executor opens a root scope at depth 0 around the
entry; `current_ring_id() = min(depth, 3)`, so a task submitted there is on ring 0, and the first
`PTO2_SCOPE()` inside it is depth 1, ring 1. pypto's generated entry opens its own outermost
scope (depth 1). The expected depths and rings below follow from those two rules by hand.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from pgraph.pipeline import Options, plan_program
from tests.conftest import ROOT

SPEC = """\
const N = 64
tensor a : f32[N] external
tensor c : f32[N] external
kernel add aiv (x : in f32[N], y : out f32[N])
kernel bump aiv (x : inout f32[N])
entry e{mark} {{
  tensor t : f32[N]
  at first {{ call add(a, t) }}
  auto scope {{
    at second {{ call add(t, c) }}
  }}
  for i in 0..2 {{
    at third {{ call bump(c) }}
  }}
}}
"""


def _plan(tmp_path: Path, unscoped: bool):  # type: ignore[no-untyped-def]
    path = tmp_path / ("u.pgl" if unscoped else "s.pgl")
    path.write_text(SPEC.format(mark=" unscoped" if unscoped else ""), encoding="utf-8")
    plan, bag = plan_program(path, Options())
    assert plan is not None and not bag.has_errors, [d.message for d in bag.items]
    return path, plan


def _placement(plan) -> dict[str, tuple[int, int]]:  # type: ignore[no-untyped-def]
    """(depth, ring) of each dispatch's scope."""
    p = plan.program
    return {d.name: (p.scopes[d.scope].depth, p.scopes[d.scope].ring) for d in p.dispatches}


def test_unscoped_entry_is_the_root_scope(tmp_path: Path) -> None:
    _, plan = _plan(tmp_path, unscoped=True)
    assert _placement(plan) == {"first": (0, 0), "second": (1, 1), "third": (1, 1)}


def test_scoped_entry_is_one_deeper(tmp_path: Path) -> None:
    _, plan = _plan(tmp_path, unscoped=False)
    assert _placement(plan) == {"first": (1, 1), "second": (2, 2), "third": (2, 2)}


def test_unscoped_entry_builds_without_an_entry_scope(tmp_path: Path) -> None:
    """The body's first statement follows the external tensors directly: no PTO2_SCOPE() opens
    before the first submit, and the C++ has one PTO2_SCOPE() per nested scope / loop body."""
    path, _ = _plan(tmp_path, unscoped=True)
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "pgraph", "build", str(path), "--target", "a2a3", "-o", str(out)],
                          cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    cpp = next(out.rglob("*.cpp")).read_text(encoding="utf-8")
    body = cpp[cpp.index("aicpu_orchestration_entry("):]
    assert body.index("rt_submit_aiv_task") < body.index("PTO2_SCOPE()")
    assert body.count("PTO2_SCOPE()") == 2  # the auto scope and the loop body


def test_unscoped_survives_fmt_and_unparse(tmp_path: Path) -> None:
    path, _ = _plan(tmp_path, unscoped=True)
    for argv in (["fmt", "--check", str(path)], ["check", str(path), "--emit", "ast"]):
        proc = subprocess.run([sys.executable, "-m", "pgraph", *argv], cwd=ROOT, capture_output=True, text=True)
        assert proc.returncode == 0, (argv, proc.stdout, proc.stderr)
    ast_text = subprocess.run([sys.executable, "-m", "pgraph", "check", str(path), "--emit", "ast"], cwd=ROOT,
                              capture_output=True, text=True).stdout
    assert "entry eunscoped" not in ast_text and "entry e unscoped {" in ast_text
