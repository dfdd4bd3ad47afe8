"""Expand the symbolic Program into an instance graph (networkx), only as far as needed.

A loop whose iterations are provably identical (`pgraph.expand.window`) is expanded for its
first two iterations only: iteration `lo` stands for itself and iteration `lo+1` stands for
the remaining `hi-lo-1`, carrying that count as its `weight`. Carried edges from iteration
`lo` into `lo+1` are exactly the edges every later iteration receives from its predecessor,
so per-iteration counts and whole-program totals follow without expanding 40 layers.
`full=True` expands everything.

Edges carry a provenance set (`pgraph.kinds.Provenance`): EXPLICIT (declared deps),
CARRIED (through a loop carry), INFERRED (the runtime TensorMap in an auto scope: reads of
an overlapping region written earlier, InOut writes after an earlier writer; simpler
`compute_task_fanin`), CREATOR (an auto-scope task using a buffer of an alloc task).
The expander reports nothing: what it cannot evaluate becomes an issue record of the graph
(`InstanceGraph.issues`), reported by `pgraph.plan.expansion_issues`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from pgraph.expand import edges
from pgraph.expand.compiled import BoxFn, region_function, safe_values
from pgraph.expand.window import make_window
from pgraph.expr import EvalError
from pgraph.ir import program as ir
from pgraph.ir.instances import (
    ArgBox,
    BlockAccess,
    BlockAccesses,
    EvalIssue,
    Instance,
    InstanceGraph,
    Issue,
    RegionIssue,
    empty_accesses,
)
from pgraph.ir.queries import Box, BufferKey, Evaluator, RegionError, Window, axis_values, resolve_buffer
from pgraph.kinds import NodeKind, Storage, TaskKind, unhandled
from pgraph.source import Span

#: (accesses, args, simple) of one dispatch in one loop iteration, resolved and compiled
#: (Expander.task_shape); `simple` is the one-block plan of `Expander._simple_args`, or None
_TaskShape = tuple[list[Any], list[Any], Any]


class _Where:
    """The `where` of a block's issues (`label[b=3]`), formatted only when an issue needs it."""

    __slots__ = ("axes", "bidx", "label")

    def __init__(self, label: str, axes: tuple[ir.IAxis, ...], bidx: tuple[int, ...]) -> None:
        self.label, self.axes, self.bidx = label, axes, bidx

    def __call__(self) -> str:
        return self.label + index_label(self.axes, self.bidx)


class Expander:
    """Builds the InstanceGraph of one program under one window (every iteration, or two)."""

    def __init__(self, program: ir.Program, full: bool = False, window: Window | None = None) -> None:
        self.p = program
        self.g = InstanceGraph(program, full)
        self.full = full
        self.window = window or make_window(program, full)
        self.ev = Evaluator()
        self.loops = {lp.id: lp for lp in program.loops}
        self.scope_loops = scope_loops(program)
        self.g.scope_loops = self.scope_loops
        self.alloc_of: dict[tuple[int, int, tuple[int, ...], tuple[int, ...]], int] = {}
        self.alloc_groups: dict[ir.AllocKey, list[ir.Tensor]] = {}
        for t in program.tensors.values():
            if t.storage is Storage.ALLOC and t.scope is not None:
                self.alloc_groups.setdefault(ir.alloc_key(program, t), []).append(t)
        self._site_loops: dict[ir.AllocKey, tuple[int, ...]] = {}
        self.tile_maps: dict[str, edges.TileMap] = {}
        self.nested_loops: dict[int, set[int]] = {lp.id: set() for lp in program.loops}
        self._find_sites(program.tree, ())
        self.reported: set[tuple[str, str, int, int]] = set()
        #: work done, in the units of `pgraph.expand.work` (blocks, regions evaluated, dep tiles scanned)
        self.work = 0
        self.fast_dispatch: dict[str, bool] = {}
        self.box_functions: dict[tuple[int, tuple[int, ...]], tuple[ir.RegionRef, BoxFn | None]] = {}
        self._static_shapes: dict[tuple[int, tuple[str, ...]], Any] = {}  # `task_shape`'s per dispatch part
        self._touched_names: dict[int, list[str]] = {}
        # (loops, iteration) -> tensor name -> (tensor, buffer key): `resolve_buffer` depends on
        # the values of the loops of the nest only (and the window's last iterations)
        self._resolved: dict[tuple[tuple[int, ...], tuple[int, ...]], dict[str, tuple[str, BufferKey]]] = {}

    def drop_unsubmitted_dummies(self) -> None:
        """Remove every dep-carrying dummy none of whose deps reached a task: the generated code
        submits it only when some dep id is valid (pypto EmitDummyTask: `if (deps_count > 0)`), so
        it is never submitted and its id stays invalid, which its consumers skip. In submission
        order, so a dummy fed only by dropped dummies goes too. Instances are renumbered."""
        g = self.g
        gone: set[int] = set()
        for inst in g.instances:
            if inst.kind is not TaskKind.DUMMY or not self.p.dispatch(inst.dispatch).deps:
                continue
            if not any(u not in gone for u in g.pred[inst.id]):
                gone.add(inst.id)
        if not gone:
            return
        g.dropped = [(g.instances[i].dispatch, g.instances[i].label) for i in sorted(gone)]
        keep = [inst for inst in g.instances if inst.id not in gone]
        new_id = {inst.id: i for i, inst in enumerate(keep)}
        g.instances = [attrs.evolve(inst, id=new_id[inst.id]) for inst in keep]
        g.succ = {new_id[u]: {new_id[v]: d for v, d in adj.items() if v in new_id}
                  for u, adj in g.succ.items() if u in new_id}
        g.pred = {new_id[v]: {new_id[u]: d for u, d in adj.items() if u in new_id}
                  for v, adj in g.pred.items() if v in new_id}
        g._nx = None
        g.by_key = {k: new_id[v] for k, v in g.by_key.items() if v in new_id}
        g.args = {new_id[k]: v for k, v in g.args.items() if k in new_id}
        g.blocks = {new_id[k]: v for k, v in g.blocks.items() if k in new_id}
        g.alloc_info = {new_id[k]: v for k, v in g.alloc_info.items()}
        self.alloc_of = {k: new_id[v] for k, v in self.alloc_of.items()}

    def _find_sites(self, node: ir.Node, loops: tuple[int, ...]) -> None:
        if node.kind is NodeKind.ALLOC:
            self._site_loops[node.ident] = loops  # type: ignore[index]
        inner = (*loops, node.ident) if node.kind is NodeKind.LOOP else loops
        if node.kind is NodeKind.LOOP:
            for outer in loops:
                self.nested_loops[outer].add(node.ident)  # type: ignore[arg-type]
        for c in node.children:
            self._find_sites(c, inner)  # type: ignore[arg-type]

    def iterations(self, lid: int) -> Sequence[tuple[int, int]]:
        """(iteration value, weight) pairs expanded for loop `lid`."""
        return self.window.iterations[lid]

    def last_iteration(self, lid: int) -> int | None:
        """The last expanded iteration of loop `lid` (None: no iteration)."""
        return self.window.last(lid)

    # ---- driver ----
    def run(self) -> InstanceGraph:
        """Expand every dispatch, resolve deps, infer TensorMap edges; returns the graph."""
        self.g.loop_weights = {lid: dict(its) for lid, its in self.window.iterations.items()}
        self.g.windowed = frozenset(lid for lid, its in self.window.iterations.items() if any(w > 1 for _, w in its))
        self.expand_tree(self.p.tree, (), 1)
        edges.resolve_deps(self)
        self.drop_unsubmitted_dummies()
        edges.infer_edges(self)
        self.check_last_iterations()
        return self.g

    def expand_tree(self, node: ir.Node, iters: tuple[int, ...], weight: int) -> None:
        """Emit the tasks and allocations under `node` in submission order; `iters` are the
        values of the enclosing loops (outermost first), `weight` the real copies they stand for."""
        match node.kind:
            case NodeKind.SCOPE:
                self.expand_children(node.children, iters, weight)
            case NodeKind.LOOP:
                assert isinstance(node.ident, int)
                for value, w in self.iterations(node.ident):
                    self.expand_children(node.children, (*iters, value), weight * w)
            case NodeKind.DISPATCH:
                assert isinstance(node.ident, str)
                self.emit(self.p.dispatch(node.ident), iters, weight)
            case NodeKind.ALLOC:
                self.emit_alloc(node.ident, iters)  # type: ignore[arg-type]
            case _:
                unhandled(node.kind)

    def expand_children(self, children: tuple[ir.Node, ...], iters: tuple[int, ...], weight: int) -> None:
        """Children in order; an `interleave` block's dispatches (consecutive) round-robin."""
        i = 0
        while i < len(children):
            c = children[i]
            d = self.p.dispatch(c.ident) if c.kind is NodeKind.DISPATCH else None  # type: ignore[arg-type]
            if d is None or d.interleave is None:
                self.expand_tree(c, iters, weight)
                i += 1
                continue
            j = i
            members = []
            while j < len(children) and children[j].kind is NodeKind.DISPATCH:
                dj = self.p.dispatch(children[j].ident)  # type: ignore[arg-type]
                if dj.interleave != d.interleave:
                    break
                members.append(dj)
                j += 1
            for group in ir.interleave_groups(members):
                for index in axis_values(group[0].task_axes):
                    for member in group:
                        self.emit(member, iters, weight, index)
            i = j

    def env_for(self, d: ir.Dispatch, iters: tuple[int, ...]) -> dict[str, int]:
        """The loop variables of `d` at loop iterations `iters`."""
        return {self.loops[lid].axis.var: v for lid, v in zip(d.loops, iters)}

    def emit_alloc(self, key: ir.AllocKey, iters: tuple[int, ...]) -> None:
        """One alloc instance for allocation group `key` at its site: the group's n tensors are
        ceil(n / alloc_batch) `alloc_tensors` calls, counted as one instance with `blocks` = that
        call count (pypto EmitBatchedAllocTensors: runtime_and_orchestration.md §2.2). Sites are
        where the C++ allocates: the top of the heap scope (per iteration of a loop body), the
        top of an `unscoped` loop body per iteration, just before a manual scope for its buffers."""
        sid, group, loops = key
        tensors = self.alloc_groups.get(key)
        if not tensors:
            return
        by_loop = dict(zip(self.site_loops(key), iters))
        values = tuple(by_loop[lid] for lid in loops)
        node = len(self.g.instances)
        label = f"alloc@scope{group}" + iters_label(self.p, loops, values)
        tasks = -(-len(tensors) // self.p.target["alloc_batch"])
        w = 1
        for lid in loops:
            w *= self.g.loop_weight(lid, by_loop[lid])
        self.g.instances.append(Instance(node, f"alloc@scope{group}", TaskKind.ALLOC, values, (), w, sid, tasks,
                                         label, loops))
        self.g.alloc_info[node] = (sid, loops, tuple(tensors))
        self.g.add_node(node)
        self.alloc_of[(sid, group, loops, values)] = node

    def site_loops(self, key: ir.AllocKey) -> tuple[int, ...]:
        """The loops enclosing an allocation site, outermost first (the tree walk's `iters`)."""
        return self._site_loops[key]

    def emit(self, d: ir.Dispatch, iters: tuple[int, ...], weight: int, only: tuple[int, ...] | None = None) -> None:
        """Emit the tasks of `d` in iteration `iters` (all its task indices, or just `only`)."""
        if d.kind is TaskKind.SPMD and d.block_count == 0:
            return  # an empty grid or wave submits nothing (e.g. N_OUT_DIRECT_BLOCKS = 0)
        iters_by_loop = dict(zip(d.loops, iters))
        env0 = self.env_for(d, iters)
        shape = self.task_shape(d, iters, iters_by_loop) if d.kind is not TaskKind.DUMMY else None
        suffix = iters_label(self.p, d.loops, iters)
        head = d.name + ("[" + ",".join(f"{a.var}={{}}" for a in d.task_axes) + "]" if d.task_axes else "")
        task_vars = [a.var for a in d.task_axes]
        for index in (axis_values(d.task_axes) if only is None else [only]):
            node = len(self.g.instances)
            env = dict(env0)
            for var, v in zip(task_vars, index):
                env[var] = v
            label = head.format(*index) + suffix  # = d.name + index_label(d.task_axes, index) + suffix
            inst = Instance(node, d.name, d.kind, iters, index, weight, d.scope, d.block_count, label, d.loops)
            self.g.instances.append(inst)
            self.g.by_key[(d.name, iters, index)] = node
            self.g.add_node(node)
            if shape is not None:
                self.g.args[node] = self.task_args(d, env, label, shape)

    # ---- regions ----
    def buffer(self, name: str, iters_by_loop: dict[int, int]) -> tuple[str, BufferKey]:
        """Resolve a tensor or carry alias to (tensor name, buffer instance key) under this window."""
        return resolve_buffer(self.p, name, iters_by_loop, self.last_iteration)

    def issue(self, issue: Issue, key: tuple[str, Span]) -> None:
        """Record an issue once per (kind, source position), however many instances hit it."""
        k = (key[0], key[1].filename, key[1].line, key[1].col)
        if k in self.reported:
            return
        self.reported.add(k)
        self.g.issues.append(issue)

    def region_box(self, region: ir.RegionRef, shape: tuple[int, ...], env: dict[str, int], where: str) -> Box | None:
        """The box of `region` at `env`, or None (an issue recorded) when it is malformed there."""
        try:
            return self.ev.region_box(region, shape, env)
        except RegionError as e:
            self.issue(RegionIssue(e.kind, region.span, where, region.tensor, e.lo, e.hi, e.size),
                       (e.kind, region.span))
        except EvalError as e:
            self.eval_issue(where, e)
        return None

    def eval_issue(self, where: str, e: EvalError) -> None:
        """An expression that fails to evaluate, once per source position (not per instance)."""
        self.issue(EvalIssue(e.span, where, e.message), ("eval", e.span))

    def task_shape(self, d: ir.Dispatch, iters: tuple[int, ...], iters_by_loop: dict[int, int]) -> _TaskShape:
        """What every task of `d` in iteration `iters` of its loops evaluates: resolved buffers,
        compiled regions.

        Only the buffers depend on the iteration, and they are resolved once per tensor name
        and iteration of a loop nest; the rest (shapes, compiled regions, the one-block plan) is
        made once per dispatch and tensor names (`_static_shape`)."""
        at = self._resolved.get((d.loops, iters))
        if at is None:
            at = self._resolved[(d.loops, iters)] = {}
        resolved = []
        for t in self._touched(d):
            r = at.get(t)
            if r is None:
                r = at[t] = self.buffer(t, iters_by_loop)
            resolved.append(r)
        names = tuple(r[0] for r in resolved)
        key = (id(d), names)  # (the program keeps its dispatches alive)
        static = self._static_shapes.get(key)
        if static is None:
            static = self._static_shapes[key] = self._static_shape(d, names)
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

    def _touched(self, d: ir.Dispatch) -> list[str]:
        """The tensor names `d` resolves per iteration: its accesses', then its tensor arguments'."""
        got = self._touched_names.get(id(d))
        if got is None:
            got = [acc.region.tensor for acc in d.accesses]
            got += [arg.region.tensor for arg in d.args if arg.region is not None]
            self._touched_names[id(d)] = got
        return got

    def _static_shape(self, d: ir.Dispatch, names: tuple[str, ...]) -> Any:
        """`task_shape` without the buffer keys: per access (kind, region, compiled box, shape,
        indirect, items), per tensor argument (index, argument, compiled box, shape), and for a
        task without items whose regions all compiled, each distinct region once by slot
        (`_simple_args`)."""
        fast = self.fast(d)
        tensors = self.p.tensors
        acc_static = []
        for acc, tname in zip(d.accesses, names):
            shape = tensors[tname].shape
            items = [(it.var, range(it.lo, it.hi)) for it in acc.items]
            acc_static.append((acc.kind, acc.region, self.box_function(acc.region, shape, fast), shape,
                               acc.region.indirect is not None, items))
        arg_static = []
        with_region = [(i, arg) for i, arg in enumerate(d.args) if arg.region is not None]
        for (i, arg), tname in zip(with_region, names[len(acc_static):]):
            assert arg.region is not None  # (with_region)
            shape = tensors[tname].shape
            arg_static.append((i, arg, self.box_function(arg.region, shape, fast), shape))
        simple_static = None
        if all(a[2] is not None and not a[5] for a in acc_static) and all(a[2] is not None for a in arg_static):
            # no items, every region compiled: each distinct region once per block, by slot
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
            simple_static = (fns, acc_slots, arg_slots, 1 + len(acc_slots) + len(arg_slots))
        return acc_static, arg_static, simple_static

    def fast(self, d: ir.Dispatch) -> bool:
        """True when `d`'s index values are small enough for the compiled fast path (pgraph.expand.compiled)."""
        fast = self.fast_dispatch.get(d.name)
        if fast is None:
            ranges = [(a.lo, a.hi) for a in (*d.task_axes, *d.block_axes)]
            ranges += [(it.lo, it.hi) for acc in d.accesses for it in acc.items]
            ranges += [(self.loops[lid].axis.lo, self.loops[lid].axis.hi) for lid in d.loops]
            fast = self.fast_dispatch[d.name] = safe_values(ranges)
        return fast

    def box_function(self, region: ir.RegionRef, shape: tuple[int, ...], fast: bool) -> BoxFn | None:
        """The compiled box function of `region` on `shape` (None: the Evaluator only)."""
        if not fast:
            return None
        k = (id(region), shape)
        if k not in self.box_functions:
            self.box_functions[k] = (region, region_function(region, shape))  # the region is kept alive
        return self.box_functions[k][1]

    def task_args(self, d: ir.Dispatch, env: dict[str, int], label: str, shape: _TaskShape) -> list[ArgBox]:
        """Per-block accesses (kept for the rules/executor) and task-level argument boxes.

        Within one block a region is evaluated once (a parameter's default accesses share the
        argument's region); `env` gets the block and item variables in place. (The hot loop of
        a --full expansion: `eval_box` is inlined for regions without items.)
        """
        accesses, args, simple = shape
        if simple is not None:
            got = self._simple_args(simple, env) if not d.block_axes else self._blocked_args(simple, d.block_axes, env)
            if got is not None:
                return got
        blocks: list[BlockAccesses] = []
        bounds: dict[int, list[tuple[int, int]]] = {}
        block_axes = d.block_axes
        work = 0
        region_box = self.region_box
        for bidx in axis_values(block_axes) if block_axes else [()]:
            work += 1
            for a, v in zip(block_axes, bidx):
                env[a.var] = v
            memo: dict[int, Box | None] = {}
            where = _Where(label, block_axes, bidx)
            acc_out = empty_accesses()
            for kind, region, fn, tshape, tname, key, indirect, items in accesses:
                out = acc_out[kind]
                if not items:
                    work += 1
                    rid = id(region)
                    if rid in memo:
                        box = memo[rid]
                    else:
                        if fn is not None:
                            try:
                                box = fn(env)
                            except Exception:  # noqa: BLE001 - the Evaluator gives the exact answer or issue
                                box = region_box(region, tshape, env, where())
                        else:
                            box = region_box(region, tshape, env, where())
                        memo[rid] = box
                    if box is not None:
                        out.append(BlockAccess(tname, key, box, indirect))
                    continue
                for values in itertools.product(*(r for _, r in items)):
                    work += 1
                    for (var, _), v in zip(items, values):
                        env[var] = v
                    box = self.eval_box(region, fn, tshape, env, where)
                    if box is not None:
                        out.append(BlockAccess(tname, key, box, indirect))
                for var, _ in items:
                    env.pop(var, None)
            for i, arg, fn, tshape, _tname, _key in args:
                work += 1
                rid = id(arg.region)
                if rid in memo:
                    box = memo[rid]
                else:
                    box = memo[rid] = self.eval_box(arg.region, fn, tshape, env, where)
                if box is None:
                    continue
                prev = bounds.get(i)
                bounds[i] = list(box) if prev is None else [
                    (min(p[0], b[0]), max(p[1], b[1])) for p, b in zip(prev, box)]
            blocks.append(acc_out)
        self.work += work
        self.g.blocks[len(self.g.instances) - 1] = blocks
        out_args = []
        for i, arg, _fn, _tshape, tname, key in args:
            if i in bounds:
                out_args.append(ArgBox(arg.param, tname, key, tuple(bounds[i]), arg.region.indirect is not None))
        return out_args

    def _simple_args(self, simple: Any, env: dict[str, int]) -> list[ArgBox] | None:
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
        self.work += work
        self.g.blocks[len(self.g.instances) - 1] = [acc_out]
        out = []
        for slot, param, tname, key, indirect in arg_plan:
            box = boxes[slot]
            if box is not None:
                out.append(ArgBox(param, tname, key, tuple(box), indirect))
        return out

    def _blocked_args(self, simple: Any, block_axes: tuple[ir.IAxis, ...], env: dict[str, int]) -> list[ArgBox] | None:
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
        self.work += work * len(blocks)
        self.g.blocks[len(self.g.instances) - 1] = blocks
        return [ArgBox(param, tname, key, tuple(b), indirect)
                for b, (_slot, param, tname, key, indirect) in zip(bounds, arg_plan) if b is not None]

    def eval_box(self, region: ir.RegionRef, fn: BoxFn | None, shape: tuple[int, ...], env: dict[str, int],
                 where: Callable[[], str]) -> Box | None:
        """The box of `region` at `env`: the compiled fast path, else the Evaluator (recording issues)."""
        if fn is not None:
            try:
                return fn(env)
            except Exception:  # noqa: BLE001 - any failure: the Evaluator gives the exact answer or issue
                pass
        return self.region_box(region, shape, env, where())

    def check_last_iterations(self) -> None:
        """Window expansion skips the last iteration of a windowed loop: evaluate its regions too."""
        if self.full:
            return
        for lp in self.p.loops:
            its = self.iterations(lp.id)
            last = lp.axis.hi - 1
            if not its or its[-1][0] == last:
                continue
            for d in self.p.dispatches:
                if lp.id not in d.loops or d.kind is TaskKind.DUMMY:
                    continue
                iters_by_loop = {lid: self.iterations(lid)[0][0] for lid in d.loops if self.iterations(lid)}
                iters_by_loop[lp.id] = last
                if len(iters_by_loop) != len(d.loops):
                    continue
                env = {self.loops[lid].axis.var: v for lid, v in iters_by_loop.items()}
                fast = self.fast(d)
                checks = []
                for acc in d.accesses:
                    tname, _key = self.buffer(acc.region.tensor, iters_by_loop)
                    shape = self.p.tensors[tname].shape
                    checks.append((acc.region, self.box_function(acc.region, shape, fast), shape,
                                   [(it.var, range(it.lo, it.hi)) for it in acc.items]))
                for index in axis_values(d.task_axes):
                    for a, v in zip(d.task_axes, index):
                        env[a.var] = v

                    def where(index: tuple[int, ...] = index, d: ir.Dispatch = d, tail: str = f"@{lp.axis.var}={last}"
                              ) -> str:
                        return d.name + index_label(d.task_axes, index) + tail

                    for bidx in axis_values(d.block_axes) if d.block_axes else [()]:
                        for a, v in zip(d.block_axes, bidx):
                            env[a.var] = v
                        for region, fn, shape, items in checks:
                            for values in itertools.product(*(r for _, r in items)):
                                self.work += 1
                                for (var, _), v in zip(items, values):
                                    env[var] = v
                                self.eval_box(region, fn, shape, env, where)
                            for var, _ in items:
                                env.pop(var, None)


def scope_loops(p: ir.Program) -> dict[int, tuple[int, ...]]:
    """Scope id -> the loops whose iterations make separate instances of that scope."""
    body_of = {lp.body_scope: lp.id for lp in p.loops if lp.body_scope is not None}
    out: dict[int, tuple[int, ...]] = {}
    for s in p.scopes:
        parent = out[s.parent] if s.parent is not None else ()
        out[s.id] = (*parent, body_of[s.id]) if s.id in body_of else parent
    return out


def index_label(axes: tuple[ir.IAxis, ...], index: tuple[int, ...]) -> str:
    """`[n=3,k=1]` of a task or block index ('' without axes)."""
    if not axes:
        return ""
    return "[" + ",".join(f"{a.var}={v}" for a, v in zip(axes, index)) + "]"


def iters_label(p: ir.Program, loops: tuple[int, ...], iters: tuple[int, ...]) -> str:
    """`@L=2` of the loop iterations of an instance ('' outside loops)."""
    if not loops:
        return ""
    return "@" + ",".join(f"{p.loops[lid].axis.var}={v}" for lid, v in zip(loops, iters))


def expand(program: ir.Program, full: bool = False) -> InstanceGraph:
    """Build the instance graph of `program` (window expansion unless `full`)."""
    return Expander(program, full).run()
