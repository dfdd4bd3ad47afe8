"""Expand the symbolic Program into an instance graph (networkx), only as far as needed.

A loop whose iterations are provably identical (no index space or dep depends on its
variable, `Loop.identical`) is expanded for its first two iterations only: iteration
`lo` stands for itself and iteration `lo+1` stands for the remaining `hi-lo-1`, carrying
that count as its `weight`. Carried edges from iteration `lo` into `lo+1` are exactly the
edges every later iteration receives from its predecessor, so per-iteration counts and
whole-program totals follow without expanding 40 layers. `full=True` expands everything.

Edges carry a provenance set: 'explicit' (declared deps), 'carried' (through a loop
carry), 'inferred' (the runtime TensorMap in an auto scope: reads of an overlapping region
written earlier, InOut writes after an earlier writer; simpler `compute_task_fanin`),
'creator' (an auto-scope task using a buffer of an alloc task).
"""

from __future__ import annotations

import itertools
import math

from pgraph.diagnostics import DiagnosticBag
from pgraph.ir import program as ir
from pgraph.ir.expand_deps import DepResolution
from pgraph.ir.expr import Compiled, EvalError, compile_expr
from pgraph.ir.instances import ArgBox, Box, BufferKey, Instance, InstanceGraph, axis_values, boxes_overlap, overlap
from pgraph.source import Span

__all__ = ["MAX_EXPANSION_WORK", "Expander", "boxes_overlap", "expand", "overlap"]

#: Most work one expansion may take: region evaluations (expanded tasks x blocks x (1 + args +
#: access items)) plus the dep tiles each task scans. The HEAD decode spec needs 28,488 (window)
#: and 379,174 (full=True, 40 layers); a bound mutated to 10**6 would otherwise run for minutes
#: and take gigabytes (about 10 us and 10 KB per unit), so PG031 stops it first.
MAX_EXPANSION_WORK = 1_000_000


class Expander(DepResolution):
    """Builds an InstanceGraph; diagnostics (bounds, deps, cycles) go to the bag."""

    def __init__(self, program: ir.Program, bag: DiagnosticBag, full: bool = False) -> None:
        self.p = program
        self.bag = bag
        self.g = InstanceGraph(program, full)
        self.full = full
        self.loops = {lp.id: lp for lp in program.loops}
        self.scope_loops = self._scope_loops()
        self.g.scope_loops = self.scope_loops
        self.carry_loop = {c.name: lp for lp in program.loops for c in lp.carries}
        self.tile_maps: dict[str, dict[tuple[int, ...], tuple[str, tuple[int, ...]]]] = {}
        self.compiled: dict[int, Compiled] = {}
        self.alloc_of: dict[tuple[int, tuple[int, ...], tuple[int, ...]], int] = {}
        self.alloc_groups: dict[tuple[int, tuple[int, ...]], list[ir.Tensor]] = {}
        for t in program.tensors.values():
            if t.storage == "alloc" and t.scope is not None:
                self.alloc_groups.setdefault((t.scope, t.loops), []).append(t)
        self.reported: set[tuple[str, int, int]] = set()
        self.scope_chains: dict[int, set[int]] = {}
        self.forward: list[tuple[int, int, object]] = []

    def _scope_loops(self) -> dict[int, tuple[int, ...]]:
        body_of = {lp.body_scope: lp.id for lp in self.p.loops if lp.body_scope is not None}
        out: dict[int, tuple[int, ...]] = {}
        for s in self.p.scopes:
            parent = out[s.parent] if s.parent is not None else ()
            out[s.id] = (*parent, body_of[s.id]) if s.id in body_of else parent
        return out

    def iterations(self, lid: int) -> list[tuple[int, int]]:
        """(iteration value, weight) pairs expanded for loop `lid`."""
        lp = self.loops[lid]
        a = lp.axis
        if self.full or not lp.identical or a.size <= 2:
            return [(v, 1) for v in range(a.lo, a.hi)]
        return [(a.lo, 1), (a.lo + 1, a.size - 1)]

    def last_iteration(self, lid: int) -> int | None:
        its = self.iterations(lid)
        return its[-1][0] if its else None

    def iteration_count(self, lid: int) -> int:
        """How many iterations of loop `lid` get expanded (a window: 2, plus the last one's bounds check)."""
        lp = self.loops[lid]
        if self.full or not lp.identical or lp.axis.size <= 2:
            return lp.axis.size
        return 3

    def dispatch_work(self, d: ir.Dispatch) -> int:
        """Upper estimate of the region evaluations and dep-tile scans that expanding `d` takes."""
        tasks = math.prod(self.iteration_count(lid) for lid in d.loops) * d.task_count
        items = sum(math.prod(max(it.hi - it.lo, 0) for it in acc.items) for acc in d.accesses)
        tiles = 0
        for dep in d.deps:
            carry = self.p.carries.get(dep.target) if dep.kind == "carry" else None
            names = (carry.init, carry.next) if carry else (dep.target,)
            tiles += max((math.prod(a.size for a in self.p.tilesets[n].axes) for n in names if n in self.p.tilesets),
                         default=1)
        return tasks * (max(d.block_count, 1) * (1 + len(d.args) + items) + tiles)

    def too_large(self) -> bool:
        """PG031 when the expansion would exceed MAX_EXPANSION_WORK (checked before expanding anything)."""
        work = {d.name: self.dispatch_work(d) for d in self.p.dispatches}
        total = sum(work.values())
        if total <= MAX_EXPANSION_WORK:
            return False
        worst = max(self.p.dispatches, key=lambda d: work[d.name])
        self.bag.add("PG031", f"expanding this program takes about {total:,} region evaluations, more than the "
                     f"{MAX_EXPANSION_WORK:,} pgraph enumerates; '{worst.name}' alone takes {work[worst.name]:,} "
                     f"({worst.task_count:,} task(s) x {max(worst.block_count, 1):,} block(s) per iteration)",
                     worst.span, hint="check the index ranges and loop bounds and the constants they use; "
                     "the Qwen3-14B decode program needs about 380,000 even fully expanded")
        return True

    # ---- driver ----
    def run(self) -> InstanceGraph:
        if self.too_large():
            return self.g
        self.g.loop_weights = {lp.id: dict(self.iterations(lp.id)) for lp in self.p.loops}
        self.expand_seq(list(self.p.dispatches), 0, (), 1)
        self.resolve_deps()
        self.infer_edges()
        self.check_bounds_extra()
        self.check_cycles()
        return self.g

    def expand_seq(self, dispatches: list[ir.Dispatch], depth: int, iters: tuple[int, ...], weight: int) -> None:
        i = 0
        while i < len(dispatches):
            d = dispatches[i]
            if len(d.loops) > depth:
                lid = d.loops[depth]
                j = i
                while j < len(dispatches) and len(dispatches[j].loops) > depth and dispatches[j].loops[depth] == lid:
                    j += 1
                for value, w in self.iterations(lid):
                    self.expand_seq(dispatches[i:j], depth + 1, (*iters, value), weight * w)
                i = j
            elif d.interleave is not None:
                j = i
                while j < len(dispatches) and dispatches[j].interleave == d.interleave:
                    j += 1
                for group in ir.interleave_groups(dispatches[i:j]):
                    for index in axis_values(group[0].task_axes):
                        for member in group:
                            self.emit(member, iters, weight, index)
                i = j
            else:
                self.emit(d, iters, weight)
                i += 1

    def env_for(self, d: ir.Dispatch, iters: tuple[int, ...]) -> dict[str, int]:
        return {self.loops[lid].axis.var: v for lid, v in zip(d.loops, iters)}

    def open_allocs(self, d: ir.Dispatch, iters_by_loop: dict[int, int]) -> None:
        """Emit the alloc tasks a task needs first: one per (heap scope, loop iteration) group.

        Allocations are hoisted to the top of their scope (pypto EmitBatchedAllocTensors); a
        tensor declared in an `unscoped` or manual-scope loop is allocated once per iteration
        in the enclosing scope. A group of n tensors is ceil(n / alloc_batch) alloc tasks,
        counted here as one instance with `blocks` = that task count.
        """
        chain = self.scope_chains.get(d.scope)
        if chain is None:
            chain = self.scope_chains[d.scope] = set(self.p.ancestors(d.scope))
        for (sid, loops), tensors in self.alloc_groups.items():
            if sid not in chain or any(lid not in iters_by_loop for lid in loops):
                continue
            key = (sid, loops, tuple(iters_by_loop[lid] for lid in loops))
            if key in self.alloc_of:
                continue
            node = len(self.g.instances)
            label = f"alloc@scope{sid}" + _iters_label(self.p, loops, key[2])
            tasks = -(-len(tensors) // self.p.target.get("alloc_batch", 16))
            w = 1
            for lid in loops:
                w *= self.g.loop_weights[lid].get(iters_by_loop[lid], 1)
            self.g.instances.append(Instance(node, f"alloc@scope{sid}", "alloc", key[2], (), w, sid, tasks, label,
                                             loops))
            self.g.alloc_info[node] = (sid, loops, tuple(tensors))
            self.g.graph.add_node(node)
            self.alloc_of[key] = node

    def emit(self, d: ir.Dispatch, iters: tuple[int, ...], weight: int, only: tuple[int, ...] | None = None) -> None:
        """Emit the tasks of `d` in iteration `iters` (all its task indices, or just `only`)."""
        if d.kind == "spmd" and d.block_count == 0:
            return  # an empty grid or wave submits nothing (e.g. N_OUT_DIRECT_BLOCKS = 0)
        iters_by_loop = dict(zip(d.loops, iters))
        self.open_allocs(d, iters_by_loop)
        env0 = self.env_for(d, iters)
        for index in (axis_values(d.task_axes) if only is None else [only]):
            node = len(self.g.instances)
            env = dict(env0)
            env.update({a.var: v for a, v in zip(d.task_axes, index)})
            label = d.name + _index_label(d.task_axes, index) + _iters_label(self.p, d.loops, iters)
            inst = Instance(node, d.name, d.kind, iters, index, weight, d.scope, d.block_count, label, d.loops)
            self.g.instances.append(inst)
            self.g.by_key[(d.name, iters, index)] = node
            self.g.graph.add_node(node)
            if d.kind != "dummy":
                self.g.args[node] = self.task_args(d, env, iters_by_loop, label)

    # ---- regions ----
    def compiled_expr(self, expr: object) -> Compiled:
        key = id(expr)
        f = self.compiled.get(key)
        if f is None:
            f = compile_expr(expr)  # type: ignore[arg-type]
            self.compiled[key] = f
        return f

    def buffer(self, name: str, iters_by_loop: dict[int, int]) -> tuple[str, BufferKey] | None:
        """Resolve a tensor or carry alias to (tensor name, buffer instance key)."""
        carry = self.p.carries.get(name)
        if carry is not None and carry.kind == "tensor":
            lp = self.carry_loop[name]
            value = iters_by_loop.get(lp.id)
            if value is None:
                last = self.last_iteration(lp.id)
                if last is None:
                    return self.buffer(carry.init, iters_by_loop)
                return self.buffer(carry.next, {**iters_by_loop, lp.id: last})
            if value == lp.axis.lo:
                return self.buffer(carry.init, iters_by_loop)
            return self.buffer(carry.next, {**iters_by_loop, lp.id: value - 1})
        t = self.p.tensors[name]
        root = self.p.tensors[t.base] if t.base else t
        if root.storage == "external":
            return name, (root.name, ())
        its = []
        for lid in root.loops:
            v = iters_by_loop.get(lid)
            its.append(v if v is not None else (self.last_iteration(lid) or 0))
        return name, (root.name, tuple(its))

    def interval(self, kind: str, a: object, b: object, env: dict[str, int]) -> tuple[int, int]:
        """[lo, hi) of a slice or tile selection: 'index' a, 'extent' a +: b, 'range' a:b (or a..b)."""
        lo = self.compiled_expr(a)(env)
        if kind == "index":
            return lo, lo + 1
        if kind == "extent":
            return lo, lo + self.compiled_expr(b)(env)
        return lo, self.compiled_expr(b)(env)

    def region_box(self, region: ir.RegionRef, shape: tuple[int, ...], env: dict[str, int], where: str) -> Box | None:
        if region.dims is None:
            return tuple((0, n) for n in shape)
        box = []
        for dim, n in zip(region.dims, shape):
            if dim.kind == "all":
                box.append((0, n))
                continue
            lo, hi = self.interval(dim.kind, dim.a, dim.b, env)
            if hi < lo:
                self.report_once("PG006", region.span, f"{where}: slice {lo}..{hi} of '{region.tensor}' has a negative extent")
                return None
            if lo < 0 or hi > n:
                self.report_once(
                    "PG007", region.span,
                    f"{where}: '{region.tensor}' is indexed {lo}..{hi} in a dimension of size {n}",
                    hint="check the tile constants and the index expressions",
                )
                return None
            box.append((lo, hi))
        return tuple(box)

    def eval_error(self, where: str, e: EvalError) -> None:
        """PG018 for an expression that fails to evaluate, once per source position (not per instance)."""
        self.report_once("PG018", e.span, f"{where}: {e.message}")

    def report_once(self, code: str, span: Span, message: str, hint: str | None = None) -> None:
        """Add a diagnostic once per (code, source position), however many instances hit it."""
        key = (code, span.line, span.col)
        if key in self.reported:
            return
        self.reported.add(key)
        self.bag.add(code, message, span, hint=hint)

    def task_args(self, d: ir.Dispatch, env: dict[str, int], iters_by_loop: dict[int, int], label: str) -> list[ArgBox]:
        """Per-block accesses (kept for the rules/executor) and task-level argument boxes."""
        blocks: list[dict[str, list[tuple[str, BufferKey, Box, bool]]]] = []
        bounds: dict[int, list[tuple[int, int]]] = {}
        # buffers depend on the loop iteration only, not on the block: resolve them once per task
        acc_bufs = [self.buffer(acc.region.tensor, iters_by_loop) for acc in d.accesses]
        arg_bufs = {i: self.buffer(arg.region.tensor, iters_by_loop)
                    for i, arg in enumerate(d.args) if arg.region is not None}
        for bidx in axis_values(d.block_axes) if d.block_axes else [()]:
            benv = dict(env)
            benv.update({a.var: v for a, v in zip(d.block_axes, bidx)})
            where = label + _index_label(d.block_axes, bidx)
            acc_out: dict[str, list[tuple[str, BufferKey, Box, bool]]] = {"read": [], "write": [], "atomic": []}
            try:
                for acc, resolved in zip(d.accesses, acc_bufs):
                    self.block_access(acc, benv, iters_by_loop, where, acc_out, resolved)
                for i, arg in enumerate(d.args):
                    if arg.region is None:
                        continue
                    resolved = arg_bufs[i]
                    assert resolved is not None
                    tname = resolved[0]
                    box = self.region_box(arg.region, self.p.tensors[tname].shape, benv, where)
                    if box is None:
                        continue
                    prev = bounds.get(i)
                    bounds[i] = list(box) if prev is None else [
                        (min(p[0], b[0]), max(p[1], b[1])) for p, b in zip(prev, box)]
            except EvalError as e:
                self.eval_error(where, e)
            blocks.append(acc_out)
        self.g.blocks[len(self.g.instances) - 1] = blocks
        out = []
        for i, arg in enumerate(d.args):
            if arg.region is None or i not in bounds:
                continue
            resolved = arg_bufs[i]
            assert resolved is not None
            out.append(ArgBox(arg.param, resolved[0], resolved[1], tuple(bounds[i]), arg.region.indirect is not None))
        return out

    def block_access(self, acc: ir.Access, env: dict[str, int], iters_by_loop: dict[int, int], where: str,
                     out: dict[str, list[tuple[str, BufferKey, Box, bool]]],
                     resolved: tuple[str, BufferKey] | None = None) -> None:
        """Append the boxes of one access clause (every item-loop value) of one block to `out`.

        `resolved` is the clause's buffer when the caller already has it (it depends on
        `iters_by_loop` only).
        """
        if resolved is None:
            resolved = self.buffer(acc.region.tensor, iters_by_loop)
        assert resolved is not None
        tname, key = resolved
        shape = self.p.tensors[tname].shape
        item_sets = itertools.product(*(range(it.lo, it.hi) for it in acc.items))
        for values in item_sets:
            ienv = dict(env)
            ienv.update({it.var: v for it, v in zip(acc.items, values)})
            box = self.region_box(acc.region, shape, ienv, where)
            if box is not None:
                out[acc.kind].append((tname, key, box, acc.region.indirect is not None))

    def check_bounds_extra(self) -> None:
        """Window expansion skips the last iteration: check its regions' bounds too."""
        if self.full:
            return
        for lp in self.p.loops:
            its = self.iterations(lp.id)
            last = lp.axis.hi - 1
            if not its or its[-1][0] == last:
                continue
            for d in self.p.dispatches:
                if lp.id not in d.loops or d.kind == "dummy":
                    continue
                iters_by_loop = {lid: self.iterations(lid)[0][0] for lid in d.loops if self.iterations(lid)}
                iters_by_loop[lp.id] = last
                if len(iters_by_loop) != len(d.loops):
                    continue
                env = {self.loops[lid].axis.var: v for lid, v in iters_by_loop.items()}
                for index in axis_values(d.task_axes):
                    tenv = dict(env)
                    tenv.update({a.var: v for a, v in zip(d.task_axes, index)})
                    for bidx in axis_values(d.block_axes) if d.block_axes else [()]:
                        benv = dict(tenv)
                        benv.update({a.var: v for a, v in zip(d.block_axes, bidx)})
                        where = d.name + _index_label(d.task_axes, index) + f"@{lp.axis.var}={last}"
                        for acc in d.accesses:
                            try:
                                self.block_access(acc, benv, iters_by_loop, where, {"read": [], "write": [], "atomic": []})
                            except EvalError as e:
                                self.eval_error(where, e)

def _index_label(axes: tuple[ir.IAxis, ...], index: tuple[int, ...]) -> str:
    if not axes:
        return ""
    return "[" + ",".join(f"{a.var}={v}" for a, v in zip(axes, index)) + "]"


def _iters_label(p: ir.Program, loops: tuple[int, ...], iters: tuple[int, ...]) -> str:
    if not loops:
        return ""
    return "@" + ",".join(f"{p.loops[lid].axis.var}={v}" for lid, v in zip(loops, iters))


def expand(program: ir.Program, bag: DiagnosticBag, full: bool = False) -> InstanceGraph:
    """Build the instance graph of `program` (window expansion unless `full`)."""
    return Expander(program, bag, full).run()
