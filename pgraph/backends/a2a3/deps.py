"""The deps array of one task: `PTO2TaskId <params>_deps[K]`, one append per dep entry.

The array has one slot per entry the appends can produce (the largest count over every loop
and task index value); each append is guarded by `is_valid()` unless the id is a local known
to be valid, and by the selection's non-emptiness when its size is not a constant. Entries the
planner merges (`ir.dep_dedup_key`) are appended once.
"""

from __future__ import annotations

from contextlib import ExitStack
from typing import NamedTuple

from pgraph.expr import Expr, Name, Num, compile_expr, free_vars
from pgraph.ir import program as ir
from pgraph.ir.bounds import slice_bounds
from pgraph.ir.queries import axis_values
from pgraph.kinds import DepKind, DimKind, TaskKind

from .cexpr import Interval, simplify
from .context import Context, printer
from .layout import SlotKind, axis_range, is_single, tile_index
from .regions import env_space
from .writer import Writer


class DepItem(NamedTuple):
    """One dep entry source: a single TaskId, or a loop over TaskId-array slots."""

    ref: str
    valid: bool
    loops: tuple[tuple[str, Expr, Expr], ...] = ()
    cond: str | None = None


def deps_lines(ctx: Context, d: ir.Dispatch, pr: str, ranges: dict[str, Interval]) -> list[str]:
    """The deps array of `d`'s task, its appends and `set_dependencies` (nothing without entries;
    a dummy whose deps all select nothing gets a zero count for its guarded submit)."""
    items = dep_items(ctx, d, ranges)
    if not items:
        return [f"uint32_t {pr}_deps_count = 0;"] if d.kind is TaskKind.DUMMY else []
    cap = dep_capacity(ctx, d, items)
    arr, cnt = f"{pr}_deps", f"{pr}_deps_count"
    w = Writer()
    w.line(f"PTO2TaskId {arr}[{max(cap, 1)}];")
    w.line(f"uint32_t {cnt} = 0;")
    for it in items:
        append = f"{arr}[{cnt}++] = {it.ref};"
        guard = [] if it.valid else [f"{it.ref}.is_valid()"]
        if it.cond:
            guard.insert(0, it.cond)
        with ExitStack() as loops:
            for v, lo, hi in it.loops:
                pr_ = printer(ctx, {**ranges, **{x: Interval(None, None) for x, _, _ in it.loops}},
                              identity=[x for x, _, _ in it.loops])
                loops.enter_context(w.block(f"for (int64_t {v} = {pr_(lo)}; {v} < {pr_(hi)}; ++{v})"))
            w.line(f"if ({' && '.join(guard)}) {append}" if guard else append)
    w.line(f"{pr}.set_dependencies({arr}, {cnt});")
    return w.lines


def dep_items(ctx: Context, d: ir.Dispatch, ranges: dict[str, Interval]) -> list[DepItem]:
    """The entry sources of `d`'s deps in order, merged entries once, empty selections dropped."""
    items: list[DepItem] = []
    seen: set[tuple[str, str]] = set()  # merged entries: the planner counts them the same way
    for j, dep in enumerate(d.deps):
        key = ir.dep_dedup_key(ctx.p, dep)
        if key is not None and key in seen:
            continue
        if dep.kind is DepKind.CARRY:
            st = ctx.carry_store[dep.target]
            if st.size == 1:
                assert key is not None
                seen.add(key)
                items.append(DepItem(f"{st.cname}[0]", False))
                continue
            (slot,) = ctx.names.dep_loops[(d.name, j)]
            items.append(DepItem(f"{st.cname}[{slot}]", False, ((slot, Num(0, dep.span), Num(st.size, dep.span)),)))
            continue
        ts = ctx.p.tilesets[dep.target]
        st = ctx.storage[dep.target]
        if not is_single(ts):
            items.append(array_item(ctx, dep, ts, st.cname, ranges, ctx.names.dep_loops[(d.name, j)]))
            continue
        cond = single_condition(ctx, dep, ranges)
        if cond == "0":
            continue
        if key is not None:
            seen.add(key)
        items.append(DepItem(st.cname if st.kind is SlotKind.LOCAL else f"{st.cname}[0]", st.valid, cond=cond))
    return items


def single_condition(ctx: Context, dep: ir.DepRef, ranges: dict[str, Interval]) -> str | None:
    """C++ condition that a selection on a single-task tile set is non-empty (None: always; "0": never)."""
    conds = []
    for sel, axis in zip(dep.sels or (), ctx.p.tilesets[dep.target].axes):
        if sel.kind is DimKind.ALL:
            continue  # the whole axis: the TaskId of the tile set, whatever its size
        size = simplify(slice_bounds(sel.kind, sel.a, sel.b, (axis.lo, axis.hi), sel.span).size)
        if isinstance(size, Num):
            if size.value <= 0:
                return "0"
            continue
        conds.append(f"{printer(ctx, ranges)(size)} > 0")
    return " && ".join(conds) if conds else None


def array_item(ctx: Context, dep: ir.DepRef, ts: ir.TileSet, cname: str, ranges: dict[str, Interval],
               names: tuple[str, ...]) -> DepItem:
    """A selection of a TaskId array: one loop (variables `names`) per non-index dimension."""
    sels = dep.sels or tuple(ir.DepSel(DimKind.ALL, None, None, dep.span) for _ in ts.axes)
    coords: list[Expr] = []
    loops: list[tuple[str, Expr, Expr]] = []
    inner = dict(ranges)
    free = iter(names)
    for sel, a in zip(sels, ts.axes, strict=True):
        if sel.kind is DimKind.INDEX:
            assert sel.a is not None
            coords.append(sel.a)
            continue
        lo, hi, _ = slice_bounds(sel.kind, sel.a, sel.b, (a.lo, a.hi), dep.span)
        v = next(free)
        inner[v] = axis_range(a)
        loops.append((v, simplify(lo), simplify(hi)))
        coords.append(Name(v, dep.span))
    index = printer(ctx, inner, identity=[v for v, _, _ in loops])(tile_index(ts, coords))
    return DepItem(f"{cname}[{index}]", False, tuple(loops))


def dep_capacity(ctx: Context, d: ir.Dispatch, items: list[DepItem]) -> int:
    """Largest number of entries the appends can produce over every loop/task index value."""
    fixed = sum(1 for it in items if not it.loops)
    looped = [it for it in items if it.loops]
    if not looped:
        return fixed
    bounds = [[(compile_expr(lo), compile_expr(hi)) for _, lo, hi in it.loops] for it in looped]
    used = set().union(*(free_vars(e) for it in looped for _, lo, hi in it.loops for e in (lo, hi)))
    # the counts depend only on the axes the bounds use: enumerate those, not every index
    space = env_space(ctx.p, d)
    if any(a.size == 0 for a in space):
        return fixed   # no index value at all (as the full enumeration would find)
    axes = tuple(a for a in space if a.var in used)
    best = 0
    for combo in axis_values(axes):
        env = {a.var: v for a, v in zip(axes, combo, strict=True)}
        total = 0
        for loops in bounds:
            count = 1
            for flo, fhi in loops:
                count *= max(fhi(env) - flo(env), 0)
            total += count
        best = max(best, total)
    return fixed + best
