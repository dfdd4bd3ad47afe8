"""The one adapter between the planner and the simulator: a Plan becomes plain TaskRecords.

Every import of the Plan, its facts and the IR used by `pgraph sim` is in this module; the
scheduler model, cost model, analysis and trace writer see only `pgraph.backends.sim.records`.
The Plan is expanded in full (every layer: the simulator runs each task once; the sim target
says `needs_full`, so `pgraph sim` plans with `full=True`). Like every backend it reads the
planner's facts, never its functions, and no other backend.

What each record field is taken from:

- shape: the kernel's core (aic/aiv/mix), `dummy`, or `alloc` (an alloc instance stands for
  ceil(tensors / alloc_batch) alloc tasks: `blocks`, task-window slots);
- early flag and early-dispatch eligibility: the planner's `EarlyStatus` fact (`flagged`, and
  the state by `classify`: the same rule the planner reports; 'candidate' means eligible);
- producers: the instance graph's WAIT edges (explicit, carried, inferred, creator);
- ring and scope instance: the task's scope (ring = min(depth, 3)) and the loop iterations
  that make separate instances of it; a scope instance closes after its last task;
- func ids: first use in submit order, as `pgraph.backends.simpler.FuncIds` assigns (the ids
  of the a2a3 build's kernel_config.py);
- bytes per block: the declared per-block regions (box volume x dtype size). A box that
  several blocks of one task declare (a whole-tensor argument of every block) is shared
  among them. An index-addressed (indirect) region is read as its whole bounding box (a
  gather may touch all of it: for the paged KV cache, every sequence at MAX_SEQ); an
  indirect write (a scatter) moves at most one row per entry of its smallest index tensor
  (the KV append writes one row per slot_mapping entry), never more than the box;
- cube FLOPs per block: 2*M*N*K when an AIC task's first block reads regions [M, K] and
  [K, N] and writes or accumulates into one of [M, N] (the [K, N] operand's bytes are the
  block's weight bytes; the kernels take whole tensors, so the declared regions, not the
  parameters, give the tile); vector work: the elements an AIV kernel's block touches;
- kernel: the one the task runs (a `kernels` table's member for its index), so each of the
  five residual_rms_cast slices has its own func id and calibration row;
- serialised writers: the tasks of a `parallel` dispatch that the planner reports as
  falsely serialised (PG103, the `FalseSerializations` fact: the runtime gives them WAW edges)
  each wait on the previous task of the same loop iteration (an 'inferred' edge);
- fixed per-block cost: a `cost KERNEL = N` line, or a shape line `cost aic|aiv|mix = N`
  whose value differs from the planner's default table (pgraph.ir.limits.DEFAULT_COSTS).
"""

from __future__ import annotations

from collections import defaultdict

from pgraph.backends.simpler import FuncIds
from pgraph.ir.cost_model import block_work, fixed_block_us
from pgraph.ir.instances import Instance
from pgraph.ir.limits import heap_bytes
from pgraph.ir.queries import instance_env, kernel_at
from pgraph.kinds import WAIT, InternalError, TaskKind
from pgraph.plan.base import Plan
from pgraph.plan.early_dispatch import EarlyState, EarlyStatus
from pgraph.plan.races import FalseSerializations

from .records import Producer, ScopeRecord, Shape, SimGraph, TaskRecord

SHAPE_OF_CORE = {"aic": Shape.AIC, "aiv": Shape.AIV, "mix": Shape.MIX}


class _Converter:
    def __init__(self, plan: Plan, source: str) -> None:
        self.plan = plan
        self.p = plan.program
        self.g = plan.graph
        self.source = source
        self.align = self.p.target.get("output_align", 1024)
        self.func_ids = FuncIds(self.p)
        self.scope_ids: dict[tuple[int, tuple[int, ...]], int] = {}
        self.scope_rows: list[dict[str, object]] = []
        self.local: dict[int, int] = defaultdict(int)
        self.matmul: dict[str, tuple[float, float] | None] = {}   # per dispatch (its first block's tile)
        self.serial = set(plan.get(FalseSerializations).dispatches)
        early = plan.get(EarlyStatus)
        self.early_status, self.flagged = early.status, early.flagged
        self.last_writer: dict[tuple[str, tuple[int, ...]], int] = {}

    # ---- scopes ----
    def scope_chain(self, inst: Instance) -> list[int]:
        """Scope-instance ids of `inst`'s scope and its ancestors, innermost first."""
        by_loop = dict(zip(inst.loops, inst.iters))
        chain = []
        for sid in self.p.ancestors(inst.scope):
            key = (sid, tuple(by_loop.get(lid, 0) for lid in self.g.scope_loops.get(sid, ())))
            sc = self.scope_ids.get(key)
            if sc is None:
                sc = self.scope_ids[key] = len(self.scope_rows)
                s = self.p.scopes[sid]
                label = f"scope{sid}" + ("@" + ",".join(map(str, key[1])) if key[1] else "")
                self.scope_rows.append({"ring": s.ring, "sid": sid, "key": key, "label": label, "close": inst.id})
            chain.append(sc)
        for a, b in zip(chain, chain[1:]):
            self.scope_rows[a]["parent"] = b
        for sc in chain:
            self.scope_rows[sc]["close"] = inst.id
        return chain

    # ---- records ----
    def record(self, inst: Instance) -> TaskRecord:
        p, g = self.p, self.g
        chain = self.scope_chain(inst)
        scope = chain[0]
        ring = int(self.scope_rows[scope]["ring"])  # type: ignore[call-overload]
        local = self.local[ring]
        layer = None
        if self.plan.layer_loop is not None and self.plan.layer_loop in inst.loops:
            layer = inst.iters[inst.loops.index(self.plan.layer_loop)]
        prods = []
        for u in sorted(g.graph.predecessors(inst.id)):
            prov = g.graph.edges[u, inst.id].prov
            if prov & WAIT:
                prods.append(Producer(u, tuple(sorted(prov & WAIT))))
        if inst.dispatch in self.serial:
            key = (inst.dispatch, inst.iters)
            prev = self.last_writer.get(key)
            self.last_writer[key] = inst.id
            if prev is not None and all(pr.task != prev for pr in prods):
                prods.append(Producer(prev, ("inferred",)))
                prods.sort(key=lambda pr: pr.task)
        if inst.kind is TaskKind.ALLOC:
            tensors = g.alloc_info[inst.id][2]
            self.local[ring] += max(inst.blocks, 1)
            return TaskRecord(inst.id, inst.label, inst.dispatch, None, Shape.ALLOC, inst.blocks, ring, scope,
                              tuple(prods), early=True, layer=layer, local=local,
                              heap_bytes=sum(heap_bytes(t.nbytes, self.align) for t in tensors))
        self.local[ring] += 1
        d = p.dispatch(inst.dispatch)
        state, _ = self.early_status[inst.id]
        common = {"producers": tuple(prods), "early": self.flagged[inst.id], "early_candidate": state is EarlyState.CANDIDATE,
                  "layer": layer, "local": local}
        if inst.kind is TaskKind.DUMMY:
            return TaskRecord(inst.id, inst.label, inst.dispatch, None, Shape.DUMMY, 0, ring, scope, **common)  # type: ignore[arg-type]
        name = kernel_at(p, d, instance_env(p, d, inst.iters, inst.index))
        kernel = p.kernels[name] if name else None
        shape = SHAPE_OF_CORE[kernel.core] if kernel else Shape.AIV
        work = block_work(p, g, inst, kernel, self.matmul)
        fixed, source = fixed_block_us(p, kernel)
        return TaskRecord(inst.id, inst.label, inst.dispatch, kernel.name if kernel else None, shape, inst.blocks,
                          ring, scope, sync_start=d.sync_start,
                          func_ids=self.func_ids.ids(kernel.name) if kernel else (),
                          bytes_per_block=work.bytes, flops_per_block=work.flops,
                          vector_ops_per_block=work.vector_ops, weight_bytes_per_block=work.weight_bytes, fixed_us=fixed, cost_source=source, **common)  # type: ignore[arg-type]

    def run(self) -> SimGraph:
        tasks = []
        for inst in self.g.instances:
            if inst.weight != 1:
                raise InternalError(f"{inst.label} stands for {inst.weight} tasks: the simulator needs a full expansion")
            tasks.append(self.record(inst))
        scopes = tuple(ScopeRecord(i, int(row["ring"]), row.get("parent"), int(row["close"]), str(row["label"]))  # type: ignore[arg-type, call-overload]
                       for i, row in enumerate(self.scope_rows))
        lid = self.plan.layer_loop
        layers = self.p.loops[lid].axis.size if lid is not None else 0
        graph = SimGraph(tuple(tasks), scopes, layers, self.source)
        graph.validate()
        return graph


def graph_from_plan(plan: Plan, source: str = "") -> SimGraph:
    """The simulator's records of a fully expanded Plan (InternalError if a loop is window-expanded)."""
    return _Converter(plan, source).run()
