"""Machine-applicable fixes: the source edits that carry out a mechanical hint.

Each helper returns the `Edit` that makes one change the hints propose: add a dep to a task,
declare a `taskids` in a scope, drop a flag, write another number. The planner attaches them
to diagnostics (`Diagnostic.fix`); tests/unit/test_fixes.py applies every corpus fix and
checks that the diagnostic is gone.
"""

from __future__ import annotations

from pgraph.diagnostics import Edit, Fix
from pgraph.ir.program import Scope, TileSet


def add_dep(ts: TileSet, producer: str) -> Edit | None:
    """Add `producer` to the deps of tile set `ts` (to its last `deps(...)`, or a new clause)."""
    if ts.deps_span is not None:
        end = ts.deps_span.end_col - 1  # the closing ')'
        empty = ts.deps_span.file.line(ts.deps_span.end_line)[end - 2] == "("
        return Edit.insert(ts.deps_span, ts.deps_span.end_line, end, producer if empty else f", {producer}")
    if ts.body_span is not None:
        return Edit.insert(ts.body_span, ts.body_span.line, ts.body_span.col, f"deps({producer}) ")
    if ts.decl_span is not None:
        return Edit.insert(ts.decl_span, ts.decl_span.end_line, ts.decl_span.end_col, f" deps({producer})")
    return None


def declare_taskids(scope: Scope, name: str) -> Edit | None:
    """Declare `taskids name` at the top of `scope`'s body."""
    if scope.block_span is None:
        return None
    return Edit.insert(scope.block_span, scope.block_span.line, scope.block_span.col + 1, f" taskids {name}")


def fix(*edits: Edit | None) -> Fix | None:
    """A Fix of the edits, or None when any is missing (no partial fixes)."""
    if not edits or any(e is None for e in edits):
        return None
    return Fix(tuple(e for e in edits if e is not None))
