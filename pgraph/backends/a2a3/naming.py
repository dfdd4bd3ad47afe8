"""The naming pass: builds the frozen `Context`, choosing every generated name in emission order.

A name the generated code introduces while it is written (an index variable, a
`TensorCreateInfo`, an argument view, a dep loop variable, an interleave temporary, the
numbers of `params_t<n>`, `alloc_<k>` and the phase-fence barriers) must not collide with any
name chosen before it, so it depends on what was written before. This pass walks the entry
through the same `order.block_items` as the emission and, per item, yields a request for each
name in the order the emission uses them; `plan_names` resolves them into `Names`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

import attrs

from pgraph.backends.simpler import FuncIds
from pgraph.ir import program as ir
from pgraph.kinds import CarryKind, DepKind, DimKind, NodeKind, Storage, TaskKind

from .context import Context, Names, env_ranges, function_names
from .layout import (
    Node,
    Path,
    SlotKind,
    alloc_ident,
    build_tree,
    is_single,
    local_name,
    param_part,
    plan_storage,
    unique,
)
from .layout import Storage as Slots
from .order import Alloc, Declare, Loop, Scope, Submit, block_items
from .regions import task_views


class Var(NamedTuple):
    """An index variable's C++ name (chosen at its first use)."""

    name: str


class Task(NamedTuple):
    """The next task number, for a submitted dispatch."""

    dispatch: str


class Barrier(NamedTuple):
    """The next phase-fence barrier number, for a dummy."""

    dispatch: str


class Batch(NamedTuple):
    """The next `alloc_<k>` number, for one `alloc_tensors` call of a site."""

    key: ir.AllocKey


class Ci(NamedTuple):
    """The `TensorCreateInfo` of an allocated tensor: `<tensor>_ci`, function-wide."""

    tensor: str


class View(NamedTuple):
    """The view a task passes to a parameter: `params_t<n>_<param>`, function-wide."""

    dispatch: str
    param: str


class Reserve(NamedTuple):
    """A function-wide name written without a choice (`<view>_shapes`)."""

    name: str


class Locals(NamedTuple):
    """Loop variables of one dep: each free of the function-wide names and of `vars`' C++ names."""

    key: tuple[str, int]
    wants: tuple[str, ...]
    vars: tuple[str, ...]


class Temps(NamedTuple):
    """`<lead variable>_loop` temporaries of an interleave member, free of every variable so far."""

    dispatch: str
    sources: tuple[str, ...]


Request = Var | Task | Barrier | Batch | Ci | View | Reserve | Locals | Temps


def build_context(program: ir.Program, header: list[str]) -> Context:
    """The emission context of `program` with the file's `header` comment lines."""
    taken: set[str] = set()
    tensor_c, scalar_c, dim_c = function_names(program, taken)
    storage, carry_store, loop_parent = plan_storage(program, taken)
    alloc_keys = {}
    for t in program.tensors.values():
        if t.storage is Storage.ALLOC and t.scope is not None:
            key = ir.alloc_key(program, t)
            alloc_keys[alloc_ident(key)] = key
    declared_at: dict[tuple[Path, tuple[str, object]], list[Slots]] = {}
    for st in [*(s for s in storage.values() if s.kind is SlotKind.ARRAY), *carry_store.values()]:
        declared_at.setdefault((st.home, st.before), []).append(st)
    views = {d.name: tuple(task_views(program, d)) for d in program.dispatches
             if d.kind is not TaskKind.DUMMY and not (d.kind is TaskKind.SPMD and d.block_count == 0)}
    ctx = Context(program, tuple(header), FuncIds(program), tensor_c, scalar_c, dim_c, frozenset(taken),
                  storage, carry_store, {k: tuple(v) for k, v in declared_at.items()}, loop_parent,
                  build_tree(program), alloc_keys, views)
    return attrs.evolve(ctx, names=plan_names(ctx))


def plan_names(ctx: Context) -> Names:
    """Resolve every name request of the entry, in emission order (the rules of `layout.unique`)."""
    taken = set(ctx.taken)   # function-wide names: grows with `_ci`, views and view shapes
    var: dict[str, str] = {}
    var_names: set[str] = set()
    counters = {"task": 0, "barrier": 0, "alloc": 0}
    task: dict[str, int] = {}
    barrier: dict[str, int] = {}
    alloc: dict[ir.AllocKey, int] = {}
    ci: dict[str, str] = {}
    view: dict[tuple[str, str], str] = {}
    dep_loops: dict[tuple[str, int], tuple[str, ...]] = {}
    temps: dict[str, dict[str, str]] = {}

    for r in _block(ctx, ctx.tree, ((NodeKind.SCOPE, 0),)):
        if isinstance(r, Var):
            if r.name not in var:
                var[r.name] = unique(r.name, taken | var_names)
                var_names.add(var[r.name])
        elif isinstance(r, Task | Barrier):
            kind, table = ("task", task) if isinstance(r, Task) else ("barrier", barrier)
            table[r.dispatch] = counters[kind]
            counters[kind] += 1
        elif isinstance(r, Batch):
            alloc.setdefault(r.key, counters["alloc"])
            counters["alloc"] += 1
        elif isinstance(r, Ci):
            ci[r.tensor] = unique(f"{ctx.tensor_c[r.tensor]}_ci", taken | var_names, derived=True)
            taken.add(ci[r.tensor])
        elif isinstance(r, View):
            got = unique(f"params_t{task[r.dispatch]}_{param_part(r.param)}", taken | var_names, generated=True)
            view[(r.dispatch, r.param)] = got
            taken.add(got)
        elif isinstance(r, Reserve):
            taken.add(r.name)
        elif isinstance(r, Locals):
            busy = {var[v] for v in r.vars}
            dep_loops[r.key] = tuple(local_name(want, taken, busy, spec=True) for want in r.wants)
        else:
            busy = set(var_names)
            temps[r.dispatch] = {v: local_name(f"{var[v]}_loop", taken, busy) for v in r.sources}
    return Names(var, task, barrier, alloc, ci, view, dep_loops, temps)


def _block(ctx: Context, node: Node, path: Path) -> Iterator[Request]:
    """The requests of one block (`order.block_items`), nested blocks included."""
    for item in block_items(ctx, node, path):
        if isinstance(item, Declare):
            for st in ctx.declared_at.get((path, item.before), ()):
                if st.kind is SlotKind.CARRY:
                    yield from _copy(ctx, ctx.p.carries[st.name].init)
        elif isinstance(item, Submit):
            yield from _group(ctx, item.group)
        elif isinstance(item, Alloc):
            yield from _alloc(ctx, item.key)
        elif isinstance(item, Scope):
            yield from _block(ctx, item.node, (*path, item.node.key))
        elif isinstance(item, Loop):
            yield from _loop(ctx, item.node, path)


def _loop(ctx: Context, node: Node, path: Path) -> Iterator[Request]:
    """A loop: its variable, its body, the copies of its TaskId carries."""
    lp = ctx.p.loops[node.num]
    yield Var(lp.axis.var)
    inner: Path = (*path, node.key)
    if lp.body_scope is None:
        yield from _block(ctx, node, inner)
    else:
        body = node.children[0]
        yield from _block(ctx, body, (*inner, body.key))
    for c in lp.carries:
        if c.kind is CarryKind.TASK and c.name in ctx.carry_store:
            yield from _copy(ctx, c.next)


def _copy(ctx: Context, tileset: str) -> Iterator[Request]:
    """A TaskId carry copied from a tile set of waves: their task loops."""
    ts = ctx.p.tilesets[tileset]
    if is_single(ts) or ts.kind is not TaskKind.TILES:
        return
    for d in map(ctx.p.dispatch, ts.dispatches):
        if not (d.kind is TaskKind.SPMD and d.block_count == 0):
            yield from (Var(a.var) for a in d.task_axes)


def _alloc(ctx: Context, key: ir.AllocKey) -> Iterator[Request]:
    """An allocation site: each buffer's `TensorCreateInfo`, each batch, each view's shapes."""
    p = ctx.p
    group = [t for t in p.tensors.values() if t.storage is Storage.ALLOC and t.scope is not None
             and ir.alloc_key(p, t) == key]
    tensors = [t for t in group if not t.created]
    batch = p.target["alloc_batch"]
    for i in range(0, len(tensors), batch):
        yield from (Ci(t.name) for t in tensors[i:i + batch])
        yield Batch(key)
    yield from (Ci(t.name) for t in group if t.created)  # made by their creator's submit
    roots = {t.name for t in group}
    for t in p.tensors.values():
        if t.storage is Storage.VIEW and t.base in roots:
            yield Reserve(f"{ctx.tensor_c[t.name]}_shapes")


def _group(ctx: Context, group: tuple[ir.Dispatch, ...]) -> Iterator[Request]:
    """A dispatch or an interleave group: the task loops, the aliases' temporaries, each task."""
    lead = group[0]
    if not lead.task_axes or len(group) == 1:
        for d in group:
            yield from (Var(a.var) for a in d.task_axes)
            yield from _task(ctx, d)
        return
    yield from (Var(a.var) for a in lead.task_axes)
    lead_vars = {a.var for a in lead.task_axes}
    for d in group:
        renamed = [(a, b) for a, b in zip(d.task_axes, lead.task_axes, strict=True) if a.var != b.var]
        yield from (Var(a.var) for a, _ in renamed)
        if any(a.var in lead_vars for a, _ in renamed):
            yield Temps(d.name, tuple(sorted({b.var for _, b in renamed})))
        yield from _task(ctx, d)


def _task(ctx: Context, d: ir.Dispatch) -> Iterator[Request]:
    """One task block: its number, argument views (and their block loops), deps and capture."""
    if d.kind is TaskKind.DUMMY:
        yield Barrier(d.name)
        if d.deps:
            yield from _deps(ctx, d)
    elif not (d.kind is TaskKind.SPMD and d.block_count == 0):
        yield Task(d.name)
        for v in ctx.views[d.name]:
            if not v.whole:
                yield View(d.name, v.param.name)
                if any(b.fallback for b in v.dims):
                    yield from (Var(a.var) for a in d.block_axes)
        yield from _deps(ctx, d)
    if d.tileset in ctx.storage:
        yield from _capture(ctx, d)


def _deps(ctx: Context, d: ir.Dispatch) -> Iterator[Request]:
    """The loop variables of the deps that loop over TaskId slots (a carry or a tile array)."""
    env = tuple(env_ranges(ctx.p, d))
    for j, dep in enumerate(d.deps):
        if dep.kind is DepKind.CARRY:
            if ctx.carry_store[dep.target].size != 1:
                yield Locals((d.name, j), ("slot",), env)
            continue
        ts = ctx.p.tilesets[dep.target]
        if not is_single(ts):
            sels = dep.sels or tuple(ir.DepSel(DimKind.ALL, None, None, dep.span) for _ in ts.axes)
            yield Locals((d.name, j), tuple(a.var for s, a in zip(sels, ts.axes, strict=True)
                                            if s.kind is not DimKind.INDEX), env)


def _capture(ctx: Context, d: ir.Dispatch) -> Iterator[Request]:
    """The block loops of a capture into a TaskId array (one slot per tile of the wave)."""
    if ctx.storage[d.tileset].kind is SlotKind.LOCAL or is_single(ctx.p.tilesets[d.tileset]):
        return
    blocks = {a.var for a in d.block_axes}
    yield from (Var(a.var) for a in ctx.p.tilesets[d.tileset].axes if a.var in blocks)
