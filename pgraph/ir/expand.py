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
from collections.abc import Iterator, Mapping, Sequence

import attrs
import networkx as nx

from pgraph.diagnostics import DiagnosticBag, Note
from pgraph.ir import program as ir
from pgraph.ir.expr import Compiled, EvalError, compile_expr

Box = tuple[tuple[int, int], ...]
#: Most work one expansion may take: region evaluations (expanded tasks x blocks x (1 + args +
#: access items)) plus the dep tiles each task scans. The HEAD decode spec needs 28,488 (window)
#: and 379,174 (full=True, 40 layers); a bound mutated to 10**6 would otherwise run for minutes
#: and take gigabytes (about 10 us and 10 KB per unit), so PG031 stops it first.
MAX_EXPANSION_WORK = 1_000_000
BufferKey = tuple[str, tuple[int, ...]]


@attrs.frozen
class Instance:
    """One submitted task (or alloc task): dispatch, loop iterations, task index, weight."""

    id: int
    dispatch: str
    kind: str
    iters: tuple[int, ...]
    index: tuple[int, ...]
    weight: int
    scope: int
    blocks: int
    label: str


@attrs.frozen
class ArgBox:
    """A task-level kernel argument: buffer, bounding box in the region tensor's coordinates."""

    param: ir.Param
    tensor: str
    buffer: BufferKey
    box: Box
    indirect: bool


class InstanceGraph:
    """Instances in submission order and the DiGraph of their edges."""

    def __init__(self, program: ir.Program, full: bool) -> None:
        self.program = program
        self.full = full
        self.instances: list[Instance] = []
        self.by_key: dict[tuple[str, tuple[int, ...], tuple[int, ...]], int] = {}
        self.graph: nx.DiGraph = nx.DiGraph()
        self.args: dict[int, list[ArgBox]] = {}
        self.blocks: dict[int, list[dict[str, list[tuple[str, BufferKey, Box, bool]]]]] = {}
        self.loop_weights: dict[int, dict[int, int]] = {}
        self.alloc_info: dict[int, tuple[int, tuple[int, ...], tuple[ir.Tensor, ...]]] = {}
        #: scope id -> the loops whose iterations make separate instances of that scope
        self.scope_loops: dict[int, tuple[int, ...]] = {}

    def add_edge(self, src: int, dst: int, prov: str, span: object = None) -> None:
        """Record one edge entry; repeated explicit/carried entries of a pair are duplicates."""
        counted = 1 if prov in ("explicit", "carried") else 0
        data = self.graph.get_edge_data(src, dst)
        if data is None:
            self.graph.add_edge(src, dst, prov={prov}, entries=counted, span=span)
        else:
            data["prov"].add(prov)
            data["entries"] += counted
            if data.get("span") is None:
                data["span"] = span

    def instance(self, node: int) -> Instance:
        """The instance with id `node`."""
        return self.instances[node]


def _axis_values(axes: tuple[ir.IAxis, ...]) -> Iterator[tuple[int, ...]]:
    return itertools.product(*(range(a.lo, a.hi) for a in axes))


class Expander:
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
                    for index in _axis_values(group[0].task_axes):
                        for member in group:
                            self.emit(member, iters, weight, index)
                i = j
            else:
                self.emit(d, iters, weight)
                i += 1

    def env_for(self, d: ir.Dispatch, iters: tuple[int, ...]) -> dict[str, int]:
        return {self.loops[lid].axis.var: v for lid, v in zip(d.loops, iters)}

    def open_allocs(self, d: ir.Dispatch, iters_by_loop: dict[int, int], weight: int) -> None:
        """Emit the alloc tasks a task needs first: one per (heap scope, loop iteration) group.

        Allocations are hoisted to the top of their scope (pypto EmitBatchedAllocTensors); a
        tensor declared in an `unscoped` or manual-scope loop is allocated once per iteration
        in the enclosing scope. A group of n tensors is ceil(n / alloc_batch) alloc tasks,
        counted here as one instance with `blocks` = that task count.
        """
        chain = set(self.p.ancestors(d.scope))
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
                w *= dict(self.iterations(lid)).get(iters_by_loop[lid], 1)
            self.g.instances.append(Instance(node, f"alloc@scope{sid}", "alloc", key[2], (), w, sid, tasks, label))
            self.g.alloc_info[node] = (sid, loops, tuple(tensors))
            self.g.graph.add_node(node)
            self.alloc_of[key] = node

    def emit(self, d: ir.Dispatch, iters: tuple[int, ...], weight: int, only: tuple[int, ...] | None = None) -> None:
        """Emit the tasks of `d` in iteration `iters` (all its task indices, or just `only`)."""
        if d.kind == "spmd" and d.block_count == 0:
            return  # an empty grid or wave submits nothing (e.g. N_OUT_DIRECT_BLOCKS = 0)
        iters_by_loop = dict(zip(d.loops, iters))
        self.open_allocs(d, iters_by_loop, weight)
        env0 = self.env_for(d, iters)
        for index in (_axis_values(d.task_axes) if only is None else [only]):
            node = len(self.g.instances)
            env = dict(env0)
            env.update({a.var: v for a, v in zip(d.task_axes, index)})
            label = d.name + _index_label(d.task_axes, index) + _iters_label(self.p, d.loops, iters)
            inst = Instance(node, d.name, d.kind, iters, index, weight, d.scope, d.block_count, label)
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
                self.report_once("PG006", region, f"{where}: slice {lo}..{hi} of '{region.tensor}' has a negative extent")
                return None
            if lo < 0 or hi > n:
                self.report_once(
                    "PG007", region,
                    f"{where}: '{region.tensor}' is indexed {lo}..{hi} in a dimension of size {n}",
                    hint="check the tile constants and the index expressions",
                )
                return None
            box.append((lo, hi))
        return tuple(box)

    def eval_error(self, where: str, e: EvalError) -> None:
        """PG018 for an expression that fails to evaluate, once per source position (not per instance)."""
        key = ("PG018", e.span.line, e.span.col)
        if key in self.reported:
            return
        self.reported.add(key)
        self.bag.add("PG018", f"{where}: {e.message}", e.span)

    def report_once(self, code: str, region: ir.RegionRef, message: str, hint: str | None = None) -> None:
        key = (code, region.span.line, region.span.col)
        if key in self.reported:
            return
        self.reported.add(key)
        self.bag.add(code, message, region.span, hint=hint)

    def task_args(self, d: ir.Dispatch, env: dict[str, int], iters_by_loop: dict[int, int], label: str) -> list[ArgBox]:
        """Per-block accesses (kept for the rules/executor) and task-level argument boxes."""
        blocks: list[dict[str, list[tuple[str, BufferKey, Box, bool]]]] = []
        bounds: dict[int, list[tuple[int, int]]] = {}
        for bidx in _axis_values(d.block_axes) if d.block_axes else [()]:
            benv = dict(env)
            benv.update({a.var: v for a, v in zip(d.block_axes, bidx)})
            where = label + _index_label(d.block_axes, bidx)
            acc_out: dict[str, list[tuple[str, BufferKey, Box, bool]]] = {"read": [], "write": [], "atomic": []}
            try:
                for acc in d.accesses:
                    self.block_access(acc, benv, iters_by_loop, where, acc_out)
                for i, arg in enumerate(d.args):
                    if arg.region is None:
                        continue
                    resolved = self.buffer(arg.region.tensor, iters_by_loop)
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
            resolved = self.buffer(arg.region.tensor, iters_by_loop)
            assert resolved is not None
            out.append(ArgBox(arg.param, resolved[0], resolved[1], tuple(bounds[i]), arg.region.indirect is not None))
        return out

    def block_access(self, acc: ir.Access, env: dict[str, int], iters_by_loop: dict[int, int], where: str,
                     out: dict[str, list[tuple[str, BufferKey, Box, bool]]]) -> None:
        resolved = self.buffer(acc.region.tensor, iters_by_loop)
        assert resolved is not None
        tname, key = resolved
        shape = self.p.tensors[tname].shape
        item_sets = _axis_values(tuple(ir.IAxis(it.var, it.lo, it.hi, acc.span) for it in acc.items))
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
                for index in _axis_values(d.task_axes):
                    tenv = dict(env)
                    tenv.update({a.var: v for a, v in zip(d.task_axes, index)})
                    for bidx in _axis_values(d.block_axes) if d.block_axes else [()]:
                        benv = dict(tenv)
                        benv.update({a.var: v for a, v in zip(d.block_axes, bidx)})
                        where = d.name + _index_label(d.task_axes, index) + f"@{lp.axis.var}={last}"
                        for acc in d.accesses:
                            try:
                                self.block_access(acc, benv, iters_by_loop, where, {"read": [], "write": [], "atomic": []})
                            except EvalError as e:
                                self.eval_error(where, e)

    # ---- deps ----
    def tile_map(self, name: str) -> dict[tuple[int, ...], tuple[str, tuple[int, ...]]]:
        cached = self.tile_maps.get(name)
        if cached is not None:
            return cached
        ts = self.p.tilesets[name]
        out: dict[tuple[int, ...], tuple[str, tuple[int, ...]]] = {}
        for dname in ts.dispatches:
            d = self.p.dispatch(dname)
            pos = {a.var: i for i, a in enumerate(ts.axes)}
            task_pos = [pos[a.var] for a in d.task_axes]
            box = {a.var: a for a in (*d.task_axes, *d.block_axes)}
            for coord in _axis_values(tuple(box[a.var] for a in ts.axes)):
                out[coord] = (dname, tuple(coord[i] for i in task_pos))
        self.tile_maps[name] = out
        return out

    def select_tiles(self, d: ir.Dispatch, dep: ir.DepRef, ts: ir.TileSet, env: dict[str, int]) -> list[tuple[int, ...]] | None:
        if dep.sels is None:
            return list(_axis_values(ts.axes))
        if len(dep.sels) != len(ts.axes):
            self.bag.add("PG020", f"'{ts.name}' has {len(ts.axes)} tile ind{'ex' if len(ts.axes) == 1 else 'ices'} "
                         f"but the dep selects {len(dep.sels)}", dep.span, [Note(f"'{ts.name}' declared here", ts.span)])
            return None
        ranges = []
        for sel, axis in zip(dep.sels, ts.axes):
            if sel.kind == "all":
                ranges.append(range(axis.lo, axis.hi))
                continue
            lo, hi = self.interval(sel.kind, sel.a, sel.b, env)
            if hi > lo and (lo < axis.lo or hi > axis.hi):
                self.bag.add("PG026", f"'{d.name}' selects {ts.name} tiles {axis.var} in {lo}..{hi}, outside "
                             f"{axis.lo}..{axis.hi}", sel.span, [Note(f"'{ts.name}' declared here", ts.span)],
                             hint="a dep names logical tiles of the tile space; check the index arithmetic")
                return None
            ranges.append(range(lo, max(lo, hi)))
        return list(itertools.product(*ranges))

    def producer_iters(self, producer: ir.Dispatch, consumer_iters: dict[int, int]) -> tuple[int, ...] | None:
        out = []
        for lid in producer.loops:
            v = consumer_iters.get(lid)
            if v is None:
                v = self.last_iteration(lid)
                if v is None:
                    return None
            out.append(v)
        return tuple(out)

    def resolve_deps(self) -> None:
        for inst in list(self.g.instances):
            if inst.kind == "alloc":
                continue
            d = self.p.dispatch(inst.dispatch)
            iters_by_loop = dict(zip(d.loops, inst.iters))
            env = self.env_for(d, inst.iters)
            env.update({a.var: v for a, v in zip(d.task_axes, inst.index)})
            for dep in d.deps:
                try:
                    self.resolve_dep(inst, d, dep, iters_by_loop, env)
                except EvalError as e:
                    self.eval_error(inst.label, e)

    def resolve_dep(self, inst: Instance, d: ir.Dispatch, dep: ir.DepRef, iters_by_loop: dict[int, int],
                    env: dict[str, int]) -> None:
        prov = "explicit"
        target = dep.target
        iters = dict(iters_by_loop)
        if dep.kind == "carry":
            carry = self.p.carries[dep.target]
            lp = self.carry_loop[dep.target]
            value = iters_by_loop.get(lp.id)
            prov = "carried"
            if value is None:  # after the loop (as a tensor carry): NEXT of the last iteration, INIT if none ran
                last = self.last_iteration(lp.id)
                value = lp.axis.lo if last is None else last + 1
            if value == lp.axis.lo:
                target = carry.init
                iters.pop(lp.id, None)
            else:
                target = carry.next
                iters[lp.id] = value - 1
        ts = self.p.tilesets[target]
        tiles = self.select_tiles(d, dep, ts, env) if dep.kind == "tiles" else list(_axis_values(ts.axes))
        if tiles is None:
            return
        if not tiles:
            key = ("PG015", dep.span.line, dep.span.col)
            if key not in self.reported:
                self.reported.add(key)
                self.bag.add("PG015", f"'{d.name}' depends on an empty set of '{ts.name}' tiles", dep.span,
                             hint="an empty range is legal but orders nothing; check the bounds")
            return
        tmap = self.tile_map(target)
        # One dep entry per selected tile of a tile array (parallel, dummy, tiles: the
        # reference's TaskId arrays with one slot per tile); one entry per task for an
        # `at` or `spmd` declaration and for a carry (a single TaskId).
        per_task = dep.kind == "carry" or ts.kind in ("at", "spmd")
        seen: set[int] = set()
        for coord in tiles:
            dname, index = tmap[coord]
            producer = self.p.dispatch(dname)
            piters = self.producer_iters(producer, iters)
            if piters is None:
                continue
            node = self.g.by_key.get((dname, piters, index))
            if node is None or (per_task and node in seen):
                continue
            seen.add(node)
            if node > inst.id:
                self.forward.append((node, inst.id, dep.span))
            self.g.add_edge(node, inst.id, prov, dep.span)

    # ---- TensorMap inference in auto scopes ----
    def infer_edges(self) -> None:
        entries: dict[BufferKey, list[tuple[Box, int, str]]] = {}
        for inst in self.g.instances:
            if inst.kind in ("alloc", "dummy"):
                continue
            if self.p.scopes[inst.scope].mode == "manual":
                continue
            d = self.p.dispatch(inst.dispatch)
            iters_by_loop = dict(zip(d.loops, inst.iters))
            register = []
            for arg in self.g.args.get(inst.id, []):
                alloc = self.alloc_node(arg.buffer, iters_by_loop)
                if alloc is not None:
                    self.g.add_edge(alloc, inst.id, "creator")
                direction = arg.param.direction
                live = entries.get(arg.buffer, [])
                if direction in ("in", "inout", "atomic_add"):
                    keep = []
                    for box, producer, tname in live:
                        if producer != inst.id and _overlap(box, tname, arg.box, arg.tensor, self.p):
                            self.g.add_edge(producer, inst.id, "inferred")
                            if direction != "in" and tname == arg.tensor and _covers(arg.box, box):
                                continue
                        keep.append((box, producer, tname))
                    entries[arg.buffer] = keep
                if direction in ("out", "inout", "atomic_add"):
                    register.append((arg.buffer, arg.box, arg.tensor))
            for buf, box, tname in register:
                entries.setdefault(buf, []).append((box, inst.id, tname))

    def alloc_node(self, buffer: BufferKey, iters_by_loop: dict[int, int]) -> int | None:
        t = self.p.tensors[buffer[0]]
        if t.storage != "alloc" or t.scope is None:
            return None
        return self.alloc_of.get((t.scope, t.loops, buffer[1]))

    # ---- cycles ----
    def check_cycles(self) -> None:
        if nx.is_directed_acyclic_graph(self.g.graph):  # linear; find_cycle is slow on big DAGs
            self.check_forward()
            return
        try:
            cycle = nx.find_cycle(self.g.graph)
        except nx.NetworkXNoCycle:
            return
        # Start at an edge whose producer is submitted after its consumer (every cycle has
        # one): that dep names a future task, so it is the one to report.
        back = next((i for i, (u, v) in enumerate(cycle) if u > v), 0)
        cycle = cycle[back:] + cycle[:back]
        names = [self.g.instances[u].label for u, _ in cycle]
        first = self.g.graph.edges[cycle[0]]
        notes = []
        for u, v in cycle:
            span = self.g.graph.edges[u, v].get("span")
            notes.append(Note(f"{self.g.instances[v].label} waits on {self.g.instances[u].label}", span))  # type: ignore[arg-type]
        self.bag.add("PG013", "dependency cycle: " + " -> ".join([*names, names[0]]), first.get("span"), notes,
                     hint="remove one of the deps in the cycle; a task cannot wait on its own consumers")


    def check_forward(self) -> None:
        """PG032: a dep on a task submitted later in program order (its TaskId does not exist yet)."""
        done: set[tuple[str, str]] = set()
        for producer, consumer, span in self.forward:
            ip, ic = self.g.instances[producer], self.g.instances[consumer]
            key = (ip.dispatch, ic.dispatch)
            if key in done:
                continue
            done.add(key)
            dp, dc = self.p.dispatch(ip.dispatch), self.p.dispatch(ic.dispatch)
            hint = ("tasks are submitted in program order and a TaskId exists only once its task is submitted "
                    "(a dep on a later task is dropped as invalid); move the producer before the consumer")
            same_block = dp.interleave is not None and dp.interleave == dc.interleave
            if same_block and not _same_group(dp, dc):
                hint = (f"'{dp.name}' and '{dc.name}' are in one `interleave` block but in different groups, "
                        "which are submitted in the order of their first member; declare the producer's group "
                        "first, or take it out of the block")
            elif same_block:
                hint = ("both are in one `interleave` block, which submits index by index: a task may depend on "
                        "earlier indices, or on the same index of an earlier member; depend on an earlier index, "
                        "or take the producer out of the block")
            self.bag.add(
                "PG032",
                f"'{ic.label}' depends on '{ip.label}', which is submitted after it",
                span,  # type: ignore[arg-type]
                [Note(f"'{ip.dispatch}' is declared here", dp.span)],
                hint=hint,
            )


def _same_group(a: ir.Dispatch, b: ir.Dispatch) -> bool:
    """True when two dispatches of one `interleave` block are in one round-robin group."""
    return ir.interleave_key(a) == ir.interleave_key(b)


def boxes_overlap(a: Sequence[tuple[int, int]], ta: str, b: Sequence[tuple[int, int]], tb: str,
                  tensors: Mapping[str, ir.Tensor]) -> bool:
    """Overlap of two boxes of one buffer: per dimension for one tensor name, else flat intervals
    (views of one buffer with other shapes are compared as the runtime's L1 test does)."""
    if ta == tb:
        return all(x[0] < y[1] and y[0] < x[1] for x, y in zip(a, b))
    fa, fb = _flat(a, tensors[ta].shape), _flat(b, tensors[tb].shape)
    return fa[0] < fb[1] and fb[0] < fa[1]


def _overlap(a: Box, ta: str, b: Box, tb: str, p: ir.Program) -> bool:
    return boxes_overlap(a, ta, b, tb, p.tensors)


def _flat(box: Sequence[tuple[int, int]], shape: tuple[int, ...]) -> tuple[int, int]:
    """Flat element bounding interval of a box in a row-major tensor (the runtime's L1 test)."""
    strides = [math.prod(shape[i + 1:]) for i in range(len(shape))]
    lo = sum(b[0] * s for b, s in zip(box, strides))
    hi = sum((b[1] - 1) * s for b, s in zip(box, strides)) + 1
    return lo, hi


def _covers(outer: Box, inner: Box) -> bool:
    return all(o[0] <= i[0] and i[1] <= o[1] for o, i in zip(outer, inner))


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
