"""Machine-applicable fixes: the source edits that carry out a mechanical hint.

Each helper returns the `Edit` that makes one change the hints propose: add a dep to a task,
declare a `taskids` in a scope, drop a flag, write another number. The planner attaches them
to diagnostics (`Diagnostic.fix`); tests/unit/test_fixes.py applies every corpus fix and
checks that the diagnostic is gone.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING

import attrs

from pgraph.diagnostics import Edit, Fix
from pgraph.ir.instances import Instance
from pgraph.ir.program import DepSel, Dispatch, IAxis, Program, Scope, TileSet
from pgraph.ir.queries import Evaluator, instance_env
from pgraph.kinds import DepKind, DimKind

if TYPE_CHECKING:
    from pgraph.plan.base import Plan


def add_dep(ts: TileSet, producer: str) -> Edit | None:
    """Add `producer` to the deps of tile set `ts` (to its last `deps(...)`, or a new clause)."""
    if ts.deps_span is not None:
        end = ts.deps_span.end_col - 1  # the closing ')'
        line = ts.deps_span.file.line(ts.deps_span.end_line)
        empty = line[:end - 1].rstrip().endswith("(")  # `deps()` or `deps( )`: no entry to follow
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


# ---- the race fix: widen a dep slice to the missing tiles ------------------------------------------

#: Characters of operators that bind looser than `+`/`-` (or group): a text holding one is put in
#: parentheses before a term is added to it.
_LOOSE = re.compile(r"[<>=!?&|(]")


def shift_text(text: str, delta: int) -> str:
    """The source text of the expression `text` plus `delta`, written as a person would: a
    trailing `+ k`/`- k` absorbs it (`CAST_TILES - 1` plus 1 is `CAST_TILES`), a number changes,
    anything else gets `+ delta`."""
    text = text.strip()
    if delta == 0:
        return text
    if re.fullmatch(r"-?\d+", text):
        return str(int(text) + delta)
    m = re.fullmatch(r"(.*?\S)\s*([+-])\s*(\d+)", text)
    if m and not _LOOSE.search(m.group(1)):
        off = (int(m.group(3)) if m.group(2) == "+" else -int(m.group(3))) + delta
        return m.group(1) if off == 0 else f"{m.group(1)} {'+' if off > 0 else '-'} {abs(off)}"
    base = f"({text})" if _LOOSE.search(text) else text
    return f"{base} {'+' if delta > 0 else '-'} {abs(delta)}"


def _sel_parts(sel: DepSel) -> list[tuple[int, int, str]] | None:
    """(start column, end column, text) of the expressions of a one-line `a +: n` or `a..b`
    selection, or of `a`; None when the selection spans lines or its separator is not found."""
    s = sel.span
    if s.line != s.end_line:
        return None
    text = s.file.line(s.line)[s.col - 1:s.end_col - 1]
    sep = {DimKind.EXTENT: "+:", DimKind.RANGE: ".."}.get(sel.kind)
    if sep is None:
        return [(s.col, s.end_col, text)]
    at = text.find(sep)
    if at < 0 or text.find(sep, at + 1) >= 0:
        return None
    out = []
    for lo, hi in ((0, at), (at + len(sep), len(text))):
        part = text[lo:hi]
        left = len(part) - len(part.lstrip())
        out.append((s.col + lo + left, s.col + lo + len(part.rstrip()), part.strip()))
    return out


def _tiles_of(p: Program, inst: Instance, axis: IAxis) -> range | None:
    """The tiles (on the tile set's one axis) the task `inst` computes: its task index on that
    axis, or the whole block axis of an SPMD wave; None when neither names the axis."""
    d = p.dispatch(inst.dispatch)
    for a, v in zip(d.task_axes, inst.index):
        if a.var == axis.var:
            return range(v, v + 1)
    for a in d.block_axes:
        if a.var == axis.var:
            return range(a.lo, a.hi)
    return None


#: consumer x producer task pairs past which `widen_selection` does not look (the hint then adds a dep)
WIDEN_LIMIT = 1_000_000


def widen_selection(plan: Plan, consumer: Dispatch, producer: str,
                    pairs: Sequence[tuple[Instance, Instance]]) -> tuple[Fix, str] | None:
    """The fix of a race between tasks of tile set `producer` and tasks of `consumer` that a dep
    slice one or more tiles short leaves unordered: the slice of the consumer's one dep on
    `producer` widened (at its start and/or end, by the same number of tiles for every task of
    the consumer) to take in exactly the producer tasks it misses, and no other. Returns the
    fix and the new selection's text, or None when no such widening exists (the dep has no
    slice, the tile set has more than one axis, the tasks race across loop iterations, the
    widened slice would reach past the axis or select a task nobody races with).

    `pairs`: (producer instance, consumer instance) of every race between the two."""
    p = plan.program
    deps = [d for d in consumer.deps if d.target == producer and d.kind is DepKind.TILES]
    ts = p.tilesets.get(producer)
    if len(deps) != 1 or deps[0].sels is None or ts is None or len(ts.axes) != 1:
        return None
    dep, axis = deps[0], ts.axes[0]
    sel = dep.sels[0] if dep.sels else None
    if sel is None or sel.kind is DimKind.ALL:
        return None

    def common(a: Instance, b: Instance) -> bool:  # the same iteration of every loop around both
        ia, ib = dict(zip(a.loops, a.iters)), dict(zip(b.loops, b.iters))
        return set(ia) <= set(ib) and all(ib[lid] == v for lid, v in ia.items())

    missing: dict[int, set[int]] = defaultdict(set)
    for x, y in pairs:
        if not common(x, y):
            return None
        missing[y.id].add(x.id)
    producers = [i for i in plan.graph.instances if i.dispatch in ts.dispatches]
    tiles = {i.id: _tiles_of(p, i, axis) for i in producers}
    if any(r is None or not len(r) for r in tiles.values()):
        return None
    ev = Evaluator()
    consumers = [i for i in plan.graph.instances if i.dispatch == consumer.name]
    if len(consumers) * len(producers) > WIDEN_LIMIT:
        return None
    now: dict[int, range] = {}
    k = m = 0
    for b in consumers:
        r = ev.selection(dep.sels, ts.axes, instance_env(p, consumer, b.iters, b.index))[0]
        if not len(r):
            return None
        now[b.id] = r
        for aid in missing.get(b.id, ()):
            t = tiles[aid]
            assert t is not None
            if t.stop <= r.start:
                k = max(k, r.start - t.stop + 1)
            elif t.start >= r.stop:
                m = max(m, t.start - r.stop + 1)
    if not k and not m:
        return None
    for b in consumers:
        r = now[b.id]
        wide = range(r.start - k, r.stop + m)
        if wide.start < axis.lo or wide.stop > axis.hi:
            return None

        def hit(rng: range, b: Instance = b) -> set[int]:
            return {a.id for a in producers if common(a, b) and max(tiles[a.id].start, rng.start)  # type: ignore[union-attr]
                    < min(tiles[a.id].stop, rng.stop)}  # type: ignore[union-attr]
        if hit(wide) - hit(r) != missing.get(b.id, set()):
            return None
    parts = _sel_parts(sel)
    if parts is None:
        return None
    span = sel.span
    if sel.kind is DimKind.INDEX:
        (c0, c1, a_text), = parts
        new = [(c0, c1, f"{shift_text(a_text, -k)} +: {1 + k + m}")]
    else:
        (a0, a1, a_text), (b0, b1, b_text) = parts
        grow = k + m if sel.kind is DimKind.EXTENT else m
        new = [(a0, a1, shift_text(a_text, -k)), (b0, b1, shift_text(b_text, grow))]
    edits = tuple(Edit(attrs.evolve(span, col=c0, end_col=c1), text)
                  for (c0, c1, text), (_, _, old) in zip(new, parts) if text != old)
    if sel.kind is DimKind.INDEX:
        shown = new[0][2]
    else:
        shown = f"{new[0][2]} {'+:' if sel.kind is DimKind.EXTENT else '..'} {new[1][2]}"
    return Fix(edits), shown


def submitted_before(plan: Plan, producer: str, consumer: Dispatch) -> bool:
    """Whether every task of tile set `producer` is submitted before each task of `consumer` in
    the same iteration of the loops around both: then `deps(producer)` on the consumer names
    tasks that exist when it is submitted (an `interleave` can submit some producer tiles after
    a consumer; the dep would then be on a later task, PG032)."""
    p = plan.program
    ts = p.tilesets.get(producer)
    if ts is None:
        return False
    shared = [lid for lid in consumer.loops if all(lid in p.dispatch(d).loops for d in ts.dispatches)]
    last: dict[tuple[int, ...], int] = {}
    for i in plan.graph.instances:
        if i.dispatch in ts.dispatches:
            at = dict(zip(i.loops, i.iters))
            key = tuple(at.get(lid, -1) for lid in shared)
            last[key] = max(last.get(key, -1), i.id)
    for i in plan.graph.instances:
        if i.dispatch == consumer.name:
            at = dict(zip(i.loops, i.iters))
            if last.get(tuple(at.get(lid, -1) for lid in shared), -1) > i.id:
                return False
    return True
