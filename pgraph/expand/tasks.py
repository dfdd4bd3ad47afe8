"""The instances of the instance graph: every task and alloc task in submission order, with its boxes.

Functions of the expansion's state (`ExpansionState`), adding what they make to the
`GraphBuilder`: the program tree is walked in submission order (`expand_tree`; an
`interleave` block round-robins its dispatches), each dispatch gives one instance per task
index and expanded loop iteration (`emit`) with its task-level argument boxes and per-block
accesses (`task_args`), each allocation group one alloc instance at its site (`emit_alloc`).
Regions are evaluated by their compiled functions where the state allows (`pgraph.expand.compiled`)
and by the Evaluator otherwise or when a compiled function cannot answer; what cannot be
evaluated becomes an issue of the state. `check_last_iterations` evaluates the regions of the
iteration a window skips.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from pgraph.expand.builder import GraphBuilder
from pgraph.expand.compiled import BoxFn
from pgraph.expand.state import ExpansionState, index_label, iters_label
from pgraph.ir import program as ir
from pgraph.ir.instances import ArgBox, BlockAccess, BlockAccesses, empty_accesses
from pgraph.ir.queries import Box, BufferKey, axis_values
from pgraph.kinds import NodeKind, TaskKind, unhandled

#: per access (kind, region, compiled box, shape, indirect, items) and per tensor argument
#: (index, argument, compiled box, shape) of one dispatch on one set of tensor names, and the
#: one-block plan (`_simple_args`) or None (`static_shape`)
_Static = tuple[list[Any], list[Any], Any]
#: (accesses, args, simple) of one dispatch in one loop iteration, resolved and compiled
#: (`task_shape`); `simple` is the one-block plan of `_simple_args`, or None
_TaskShape = tuple[list[Any], list[Any], Any]


class _Where:
    """The `where` of a block's issues (`label[b=3]`), formatted only when an issue needs it."""

    __slots__ = ("axes", "bidx", "label")

    def __init__(self, label: str, axes: tuple[ir.IAxis, ...], bidx: tuple[int, ...]) -> None:
        self.label, self.axes, self.bidx = label, axes, bidx

    def __call__(self) -> str:
        return self.label + index_label(self.axes, self.bidx)


# ---- the tree walk ----
def expand_tree(st: ExpansionState, b: GraphBuilder, node: ir.Node, iters: tuple[int, ...], weight: int) -> None:
    """Add the tasks and allocations under `node` in submission order; `iters` are the values
    of the enclosing loops (outermost first), `weight` the real copies they stand for."""
    match node.kind:
        case NodeKind.SCOPE:
            expand_children(st, b, node.children, iters, weight)
        case NodeKind.LOOP:
            assert isinstance(node.ident, int)
            for value, w in st.iterations(node.ident):
                expand_children(st, b, node.children, (*iters, value), weight * w)
        case NodeKind.DISPATCH:
            assert isinstance(node.ident, str)
            emit(st, b, st.p.dispatch(node.ident), iters, weight)
        case NodeKind.ALLOC:
            emit_alloc(st, b, node.ident, iters)  # type: ignore[arg-type]
        case _:
            unhandled(node.kind)


def expand_children(st: ExpansionState, b: GraphBuilder, children: tuple[ir.Node, ...], iters: tuple[int, ...],
                    weight: int) -> None:
    """Children in order; an `interleave` block's dispatches (consecutive) round-robin."""
    p = st.p
    i = 0
    while i < len(children):
        c = children[i]
        d = p.dispatch(c.ident) if c.kind is NodeKind.DISPATCH else None  # type: ignore[arg-type]
        if d is None or d.interleave is None:
            expand_tree(st, b, c, iters, weight)
            i += 1
            continue
        j = i
        members = []
        while j < len(children) and children[j].kind is NodeKind.DISPATCH:
            dj = p.dispatch(children[j].ident)  # type: ignore[arg-type]
            if dj.interleave != d.interleave:
                break
            members.append(dj)
            j += 1
        for group in ir.interleave_groups(members):
            for index in axis_values(group[0].task_axes):
                for member in group:
                    emit(st, b, member, iters, weight, index)
        i = j


def emit_alloc(st: ExpansionState, b: GraphBuilder, key: ir.AllocKey, iters: tuple[int, ...]) -> None:
    """One alloc instance for allocation group `key` at its site: the group's n tensors are
    ceil(n / alloc_batch) `alloc_tensors` calls, counted as one instance with `blocks` = that
    call count (pypto EmitBatchedAllocTensors: docs/upstream.md §6.4). Sites are
    where the C++ allocates: the top of the heap scope (per iteration of a loop body), the
    top of an `unscoped` loop body per iteration, just before a manual scope for its buffers."""
    _sid, group, loops = key
    tensors = st.alloc_groups.get(key)
    if not tensors:
        return
    by_loop = dict(zip(st.site_loops[key], iters))
    values = tuple(by_loop[lid] for lid in loops)
    w = 1
    for lid in loops:
        w *= st.window.weight(lid, by_loop[lid])
    calls = -(-len(tensors) // st.p.target["alloc_batch"])
    b.add_alloc(key, tuple(tensors), values, w, calls, f"alloc@scope{group}" + iters_label(st.p, loops, values))


def emit(st: ExpansionState, b: GraphBuilder, d: ir.Dispatch, iters: tuple[int, ...], weight: int,
         only: tuple[int, ...] | None = None) -> None:
    """Add the tasks of `d` in iteration `iters` (all its task indices, or just `only`)."""
    if d.kind is TaskKind.SPMD and d.block_count == 0:
        return  # an empty grid or wave submits nothing (e.g. N_OUT_DIRECT_BLOCKS = 0)
    env0 = {st.loops[lid].axis.var: v for lid, v in zip(d.loops, iters)}
    shape = task_shape(st, d, iters) if d.kind is not TaskKind.DUMMY else None
    suffix = iters_label(st.p, d.loops, iters)
    head = d.name + ("[" + ",".join(f"{a.var}={{}}" for a in d.task_axes) + "]" if d.task_axes else "")
    task_vars = [a.var for a in d.task_axes]
    for index in (axis_values(d.task_axes) if only is None else [only]):
        env = dict(env0)
        for var, v in zip(task_vars, index):
            env[var] = v
        label = head.format(*index) + suffix  # = d.name + index_label(d.task_axes, index) + suffix
        node = b.add_task(d, iters, index, weight, label)
        if shape is not None:
            args, blocks = task_args(st, d, env, label, shape)
            b.set_accesses(node, args, blocks)


# ---- what a task evaluates ----
def task_shape(st: ExpansionState, d: ir.Dispatch, iters: tuple[int, ...]) -> _TaskShape:
    """What every task of `d` in iteration `iters` of its loops evaluates: resolved buffers,
    compiled regions.

    The buffers depend on the loop iteration (`_buffers`, kept per (loop nest, iteration) under
    the state's memo); the rest (shapes, compiled regions, the one-block plan) on the dispatch
    and its tensor names only (`static_shape`, kept per (dispatch, names))."""
    plans = st.dispatch_plans
    touched = plans.get(id(d))  # (the program keeps its dispatches alive)
    if touched is None:
        touched = [acc.region.tensor for acc in d.accesses]
        touched += [arg.region.tensor for arg in d.args if arg.region is not None]
        if st.memo:
            plans[id(d)] = touched
    resolved = _buffers(st, d, touched, iters)
    key = (id(d), tuple(r[0] for r in resolved))
    static = plans.get(key)
    if static is None:
        static = static_shape(st, d, key[1])
        if st.memo:
            plans[key] = static
    acc_static, arg_static, simple_static = static
    n = len(acc_static)
    accesses = [(kind, region, fn, shape, tname, bkey, indirect, items)
                for (kind, region, fn, shape, indirect, items), (tname, bkey) in zip(acc_static, resolved)]
    args = [(i, arg, fn, shape, tname, bkey)
            for (i, arg, fn, shape), (tname, bkey) in zip(arg_static, resolved[n:])]
    simple = None
    if simple_static is not None:
        fns, acc_slots, arg_slots, work = simple_static
        simple = (fns,
                  [(kind, slot, tname, bkey, indirect)
                   for (kind, slot, indirect), (tname, bkey) in zip(acc_slots, resolved)],
                  [(slot, param, tname, bkey, indirect)
                   for (slot, param, indirect), (tname, bkey) in zip(arg_slots, resolved[n:])],
                  work)
    return accesses, args, simple


def _buffers(st: ExpansionState, d: ir.Dispatch, names: list[str], iters: tuple[int, ...]
             ) -> list[tuple[str, BufferKey]]:
    """`ExpansionState.buffer` of each of `names` for `d` at iteration `iters` of its loops, kept
    per (loop nest, iteration) and name under the memo (the answer depends on the values of
    the nest's loops only, and the window)."""
    iters_by_loop = dict(zip(d.loops, iters))
    if not st.memo:
        return [st.buffer(t, iters_by_loop) for t in names]
    plans = st.dispatch_plans
    at = plans.get((d.loops, iters, None))
    if at is None:
        at = plans[(d.loops, iters, None)] = {}
    out = []
    for t in names:
        r = at.get(t)
        if r is None:
            r = at[t] = st.buffer(t, iters_by_loop)
        out.append(r)
    return out


def static_shape(st: ExpansionState, d: ir.Dispatch, names: tuple[str, ...]) -> _Static:
    """`task_shape` without the buffer keys: per access (kind, region, compiled box, shape,
    indirect, items), per tensor argument (index, argument, compiled box, shape), and for a
    task without items whose regions all compiled, each distinct region once by slot
    (`_simple_args`)."""
    fast = st.fast(d)
    tensors = st.p.tensors
    acc_static = []
    for acc, tname in zip(d.accesses, names):
        shape = tensors[tname].shape
        items = [(it.var, range(it.lo, it.hi)) for it in acc.items]
        acc_static.append((acc.kind, acc.region, st.box_function(acc.region, shape, fast), shape,
                           acc.region.indirect is not None, items))
    arg_static = []
    with_region = [(i, arg) for i, arg in enumerate(d.args) if arg.region is not None]
    for (i, arg), tname in zip(with_region, names[len(acc_static):]):
        assert arg.region is not None  # (with_region)
        shape = tensors[tname].shape
        arg_static.append((i, arg, st.box_function(arg.region, shape, fast), shape))
    simple_static = None
    if all(a[2] is not None and not a[5] for a in acc_static) and all(a[2] is not None for a in arg_static):
        simple_static = _simple_plan(acc_static, arg_static)
    return acc_static, arg_static, simple_static


def _simple_plan(acc_static: list[Any], arg_static: list[Any]) -> Any:
    """The plan of `_simple_args` for accesses without items whose regions all compiled: each
    distinct region once per block, by slot; (functions, access slots, argument slots, work)."""
    slots: dict[int, int] = {}
    fns: list[Any] = []
    acc_slots = []
    for kind, region, fn, _shape, indirect, _items in acc_static:
        slot = slots.setdefault(id(region), len(fns))
        if slot == len(fns):
            fns.append(fn)
        acc_slots.append((kind, slot, indirect))
    arg_slots = []
    for _i, arg, fn, _shape in arg_static:
        ref = arg.region
        assert ref is not None  # (with_region)
        slot = slots.setdefault(id(ref), len(fns))
        if slot == len(fns):
            fns.append(fn)
        arg_slots.append((slot, arg.param, ref.indirect is not None))
    return fns, acc_slots, arg_slots, 1 + len(acc_slots) + len(arg_slots)


def task_args(st: ExpansionState, d: ir.Dispatch, env: dict[str, int], label: str, shape: _TaskShape
              ) -> tuple[list[ArgBox], list[BlockAccesses]]:
    """(task-level argument boxes, per-block accesses) of one task (the accesses are kept for
    the rules and the executor).

    Within one block a region is evaluated once (a parameter's default accesses share the
    argument's region); `env` gets the block and item variables in place. Regions all compiled
    and without items take `_simple_args` or `_blocked_args`, which answer the same or None.
    """
    _accesses, _args, simple = shape
    if simple is not None:
        got = _simple_args(st, simple, env) if not d.block_axes else _blocked_args(st, simple, d.block_axes, env)
        if got is not None:
            return got
    return _general_args(st, d, env, label, shape)


def _general_args(st: ExpansionState, d: ir.Dispatch, env: dict[str, int], label: str, shape: _TaskShape
                  ) -> tuple[list[ArgBox], list[BlockAccesses]]:
    """`task_args` region by region (the compiled function, else the Evaluator recording issues)."""
    accesses, args, _simple = shape
    blocks: list[BlockAccesses] = []
    bounds: dict[int, list[tuple[int, int]]] = {}
    block_axes = d.block_axes
    work = 0
    for bidx in axis_values(block_axes) if block_axes else [()]:
        work += 1
        for a, v in zip(block_axes, bidx):
            env[a.var] = v
        memo: dict[int, Box | None] = {}
        where = _Where(label, block_axes, bidx)
        work += _block_accesses(st, accesses, env, memo, where, acc_out := empty_accesses())
        for i, arg, fn, tshape, _tname, _key in args:
            work += 1
            rid = id(arg.region)
            if rid in memo:
                box = memo[rid]
            else:
                box = memo[rid] = eval_box(st, arg.region, fn, tshape, env, where)
            if box is None:
                continue
            prev = bounds.get(i)
            bounds[i] = list(box) if prev is None else [
                (min(p[0], b[0]), max(p[1], b[1])) for p, b in zip(prev, box)]
        blocks.append(acc_out)
    st.work += work
    out_args = []
    for i, arg, _fn, _tshape, tname, key in args:
        if i in bounds:
            out_args.append(ArgBox(arg.param, tname, key, tuple(bounds[i]), arg.region.indirect is not None))
    return out_args, blocks


def _block_accesses(st: ExpansionState, accesses: list[Any], env: dict[str, int], memo: dict[int, Box | None],
                    where: _Where, acc_out: BlockAccesses) -> int:
    """The accesses of one block into `acc_out` (regions without items once, through `memo`);
    the work done."""
    work = 0
    for kind, region, fn, tshape, tname, key, indirect, items in accesses:
        out = acc_out[kind]
        if not items:
            work += 1
            rid = id(region)
            if rid in memo:
                box = memo[rid]
            else:
                box = memo[rid] = eval_box(st, region, fn, tshape, env, where)
            if box is not None:
                out.append(BlockAccess(tname, key, box, indirect))
            continue
        for values in itertools.product(*(r for _, r in items)):
            work += 1
            for (var, _), v in zip(items, values):
                env[var] = v
            box = eval_box(st, region, fn, tshape, env, where)
            if box is not None:
                out.append(BlockAccess(tname, key, box, indirect))
        for var, _ in items:
            env.pop(var, None)
    return work


def _simple_args(st: ExpansionState, simple: Any, env: dict[str, int]
                 ) -> tuple[list[ArgBox], list[BlockAccesses]] | None:
    """`task_args` of a one-block task whose regions are all compiled and have no items: the
    same accesses, boxes and work count; None when a region function fails (the general path
    then evaluates it exactly and records the issue)."""
    fns, acc_plan, arg_plan, work = simple
    try:
        boxes = [fn(env) for fn in fns]
    except Exception:  # noqa: BLE001 - task_args' general path decides
        return None
    acc_out = empty_accesses()
    for kind, slot, tname, key, indirect in acc_plan:
        box = boxes[slot]
        if box is not None:
            acc_out[kind].append(BlockAccess(tname, key, box, indirect))
    st.work += work
    out = []
    for slot, param, tname, key, indirect in arg_plan:
        box = boxes[slot]
        if box is not None:
            out.append(ArgBox(param, tname, key, tuple(box), indirect))
    return out, [acc_out]


def _blocked_args(st: ExpansionState, simple: Any, block_axes: tuple[ir.IAxis, ...], env: dict[str, int]
                  ) -> tuple[list[ArgBox], list[BlockAccesses]] | None:
    """`task_args` of an SPMD task whose regions are all compiled and have no items: per
    block each distinct region once, the same accesses, argument bounding boxes over the
    blocks and work count; None when a region function fails in some block (the general
    path then evaluates the task exactly and records the issue)."""
    fns, acc_plan, arg_plan, work = simple
    block_vars = [a.var for a in block_axes]
    blocks: list[BlockAccesses] = []
    bounds: list[list[tuple[int, int]] | None] = [None] * len(arg_plan)
    try:
        for bidx in axis_values(block_axes):
            for var, v in zip(block_vars, bidx):
                env[var] = v
            boxes = [fn(env) for fn in fns]
            acc_out = empty_accesses()
            for kind, slot, tname, key, indirect in acc_plan:
                acc_out[kind].append(BlockAccess(tname, key, boxes[slot], indirect))
            blocks.append(acc_out)
            for j, (slot, _param, _tname, _key, _indirect) in enumerate(arg_plan):
                box = boxes[slot]
                prev = bounds[j]
                bounds[j] = list(box) if prev is None else [
                    (p0 if p0 < b0 else b0, p1 if p1 > b1 else b1) for (p0, p1), (b0, b1) in zip(prev, box)]
    except Exception:  # noqa: BLE001 - task_args' general path decides
        return None
    st.work += work * len(blocks)
    return ([ArgBox(param, tname, key, tuple(b), indirect)
             for b, (_slot, param, tname, key, indirect) in zip(bounds, arg_plan) if b is not None], blocks)


def eval_box(st: ExpansionState, region: ir.RegionRef, fn: BoxFn | None, shape: tuple[int, ...],
             env: dict[str, int], where: Callable[[], str]) -> Box | None:
    """The box of `region` at `env`: the compiled fast path, else the Evaluator (recording issues)."""
    if fn is not None:
        try:
            return fn(env)
        except Exception:  # noqa: BLE001 - any failure: the Evaluator gives the exact answer or issue
            pass
    return st.region_box(region, shape, env, where())


# ---- the iteration a window skips ----
def check_last_iterations(st: ExpansionState) -> None:
    """Window expansion skips the last iteration of a windowed loop: evaluate its regions too
    (each dispatch of the loop at its last iteration, the other loops at their first)."""
    if st.full:
        return
    for lp in st.p.loops:
        its = st.iterations(lp.id)
        last = lp.axis.hi - 1
        if not its or its[-1][0] == last:
            continue
        for d in st.p.dispatches:
            if lp.id not in d.loops or d.kind is TaskKind.DUMMY:
                continue
            iters_by_loop = {lid: st.iterations(lid)[0][0] for lid in d.loops if st.iterations(lid)}
            iters_by_loop[lp.id] = last
            if len(iters_by_loop) == len(d.loops):
                _check_at(st, d, iters_by_loop, f"@{lp.axis.var}={last}")


def _check_at(st: ExpansionState, d: ir.Dispatch, iters_by_loop: dict[int, int], tail: str) -> None:
    """Evaluate the accesses of every task and block of `d` at loop iterations `iters_by_loop`
    (issues recorded as at `label` + `tail`)."""
    env = {st.loops[lid].axis.var: v for lid, v in iters_by_loop.items()}
    fast = st.fast(d)
    checks = []
    for acc in d.accesses:
        tname, _key = st.buffer(acc.region.tensor, iters_by_loop)
        shape = st.p.tensors[tname].shape
        checks.append((acc.region, st.box_function(acc.region, shape, fast), shape,
                       [(it.var, range(it.lo, it.hi)) for it in acc.items]))
    for index in axis_values(d.task_axes):
        for a, v in zip(d.task_axes, index):
            env[a.var] = v

        def where(index: tuple[int, ...] = index) -> str:
            return d.name + index_label(d.task_axes, index) + tail

        for bidx in axis_values(d.block_axes) if d.block_axes else [()]:
            for a, v in zip(d.block_axes, bidx):
                env[a.var] = v
            for region, fn, shape, items in checks:
                for values in itertools.product(*(r for _, r in items)):
                    st.work += 1
                    for (var, _), v in zip(items, values):
                        env[var] = v
                    eval_box(st, region, fn, shape, env, where)
                for var, _ in items:
                    env.pop(var, None)


__all__ = ["BufferKey", "check_last_iterations", "emit", "emit_alloc", "expand_tree", "task_args"]
