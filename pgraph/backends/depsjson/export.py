"""The planned instance graph as simpler's deps.json (see `model` for the format).

What the recording of the generated orchestration (`pgraph build --target a2a3`) would hold:

- task ids: per-ring counters over the submit order, alloc tasks included (each `alloc_tensors`
  call of a group of at most `alloc_batch` buffers takes one id), raw = (ring << 32) | local;
  the ring is the scope's (simpler `current_ring_id() = min(depth, 3)`);
- tasks[]: compute tasks and dummies (a dummy dropped by its `deps_count > 0` guard is absent;
  alloc tasks are absent, as dep_gen records neither); kernel ids are the func ids of the build's
  kernel_config.py (mix: {aic, aiv, aiv}); a dummy runs no block and carries no flag;
- args: the kernel argument views, row-major strides of the tensor they are declared on;
- buffers: external tensor k (orchestration argument order) at 2^48 + k * 2^40, alloc outputs
  carved from 2^32 upward, each rounded up to 1024 B plus a 1024 B gap, never reused: the
  addresses of the recording driver (tests/cpp/driver_main.cpp); a device capture has other
  addresses (the diff matches tensors by use, not by address); version 0;
- edges: one explicit record per declared dep entry (duplicates kept), one creator record per
  argument of an AUTO-scope task whose buffer an alloc task made, one tensormap record per live
  overlapping TensorMap entry (simpler `check_overlap`: L1 flat ranges, L2 per-dimension boxes
  when dtype, rank and strides agree), replayed over the AUTO-scope tasks. Explicit records
  come in producer submit order per consumer (the runtime's is the C++ append order).

The replay is checked against the planner's edges: every creator or inferred edge of the
instance graph has a record and every record an edge (an InternalError otherwise).
"""

from __future__ import annotations

import math
from collections import defaultdict

import attrs

from pgraph import records
from pgraph.backends.depsjson.model import (
    DepsArg,
    DepsEdge,
    DepsGraph,
    DepsTask,
    DepsTensor,
    Region,
    fnv1a_tensor_id,
    render,
)
from pgraph.backends.simpler import DTYPES, FuncIds
from pgraph.backends.target import BuildInfo, require_full
from pgraph.ir.instances import Instance, created_by
from pgraph.ir.program import manual_dep
from pgraph.ir.queries import instance_env, kernel_at
from pgraph.kinds import DECLARED, Core, InternalError, Provenance, ScopeMode, Storage, TaskKind
from pgraph.plan.base import Plan
from pgraph.source import Span

__all__ = ["TARGET", "DepsJsonTarget", "SpecSide", "TaskNote", "export"]

TAG = {"in": "INPUT", "out": "OUTPUT_EXISTING", "inout": "INOUT", "atomic_add": "INOUT"}
EXTERNAL_BASE, EXTERNAL_STEP = 1 << 48, 1 << 40
HEAP_BASE, HEAP_ALIGN = 1 << 32, 1024  # PTO2_PACKED_OUTPUT_ALIGN


@records.value
@attrs.frozen(repr=False, eq=False)
class TaskNote:
    """What the spec says about one task id: its label (`gate_proj.late[n=6,k=0]@L=1`), the
    declaration's span, the dispatch and phase names, the layer (None outside the layer loop)."""

    label: str
    span: Span
    dispatch: str
    phase: str | None
    layer: int | None
    alloc: bool = False
    kernel: str | None = None


@records.value
@attrs.frozen(repr=False, eq=False)
class SpecSide:
    """A spec's deps.json with its spans: notes per task id (alloc tasks included) and the span
    of the dep that declares each explicit (pred, succ) pair."""

    graph: DepsGraph
    notes: dict[int, TaskNote]
    edge_spans: dict[tuple[int, int], Span]
    layers: int


def _row_major(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(math.prod(shape[i + 1:]) for i in range(len(shape)))


def _extent(r: Region) -> int:
    return 1 + sum((s - 1) * st for s, st in zip(r.shape, r.strides, strict=True)) if all(r.shape) else 0


def _is_row_major(r: Region) -> bool:
    if not r.strides or r.strides[-1] != 1:
        return False
    return all(a >= b and a % b == 0 for a, b in zip(r.strides, r.strides[1:]))


def _dim_offset(r: Region, d: int) -> int:
    rest = r.start_offset if d == 0 else r.start_offset % r.strides[d - 1]
    return rest // r.strides[d]


def check_overlap(new: Region, entry: Region) -> str | None:
    """simpler `check_overlap` for one version: None (no overlap), 'covered' (`new` contains
    `entry`) or 'other'."""
    a0, b0 = new.start_offset, entry.start_offset
    if a0 + _extent(new) <= b0 or b0 + _extent(entry) <= a0:
        return None
    same = (new.dtype == entry.dtype and len(new.shape) == len(entry.shape) and new.strides == entry.strides
            and _is_row_major(new) and _is_row_major(entry))
    if not same:
        return "other"
    covered = True
    for d in range(len(new.shape)):
        ilo, elo = _dim_offset(new, d), _dim_offset(entry, d)
        ihi, ehi = ilo + new.shape[d], elo + entry.shape[d]
        if ihi <= elo or ehi <= ilo:
            return None
        covered = covered and ilo <= elo and ehi <= ihi
    return "covered" if covered else "other"


def _layer(plan: Plan, inst: Instance) -> int | None:
    lid = plan.layer_loop
    if lid is None or lid not in inst.loops:
        return None
    return inst.iters[inst.loops.index(lid)]


def export(plan: Plan) -> SpecSide:
    """The deps.json of `plan` (planned with `--full`: every loop iteration) and its spans.

    Raises InternalError for a windowed plan (`TARGET.needs_full`) and when the TensorMap
    replay and the planner's edges disagree (a pgraph bug)."""
    require_full(TARGET, plan)
    program, g = plan.program, plan.graph
    fids = FuncIds(program)
    batch = int(program.target["alloc_batch"])
    # buffers: address, dtype, numel
    addr: dict[tuple[str, tuple[int, ...]], int] = {}
    externals = sorted((t for t in program.tensors.values() if t.storage is Storage.EXTERNAL),
                       key=lambda t: t.arg_index or 0)
    for k, t in enumerate(externals):
        addr[(t.name, ())] = EXTERNAL_BASE + k * EXTERNAL_STEP
    heap = HEAP_BASE
    next_local = [0, 0, 0, 0]
    ids: dict[int, list[int]] = {}          # instance -> task id(s) (an alloc instance: one per call)
    creator_of: dict[tuple[str, tuple[int, ...]], int] = {}  # buffer -> alloc call task id
    notes: dict[int, TaskNote] = {}
    tasks: list[DepsTask] = []
    task_inst: dict[int, Instance] = {}
    made = created_by(program, g.instances, g.args)  # `created` buffers: OUTPUT at their creator's submit
    for inst in g.instances:
        scope = program.scopes[inst.scope]
        ring = min(scope.depth, 3)
        d = None if inst.kind is TaskKind.ALLOC else program.dispatch(inst.dispatch)
        calls = max(inst.blocks, 1) if inst.kind is TaskKind.ALLOC else 1
        ids[inst.id] = []
        for _ in range(calls):
            ids[inst.id].append((ring << 32) | next_local[ring])
            next_local[ring] += 1
        if inst.kind is TaskKind.ALLOC:
            group = g.alloc_info[inst.id][2]
            for j, t in enumerate(group):
                key = (t.name, inst.iters)
                addr[key] = heap
                heap += -(-t.nbytes // HEAP_ALIGN) * HEAP_ALIGN + HEAP_ALIGN
                creator_of[key] = ids[inst.id][j // batch]
            for tid in ids[inst.id]:
                notes[tid] = TaskNote(inst.label, scope.span, inst.dispatch, None, _layer(plan, inst), alloc=True)
            continue
        assert d is not None
        tid = ids[inst.id][0]
        task_inst[tid] = inst
        if inst.kind is TaskKind.DUMMY:
            notes[tid] = TaskNote(inst.label, d.span, d.name, d.phase, _layer(plan, inst))
            tasks.append(DepsTask(tid, str(scope.mode), False, (-1, -1, -1), inst.blocks, ()))
            continue
        kname = kernel_at(program, d, instance_env(program, d, inst.iters, inst.index))
        if kname is None:
            raise InternalError(f"task {inst.label} has no kernel")
        notes[tid] = TaskNote(inst.label, d.span, d.name, d.phase, _layer(plan, inst), kernel=kname)
        fid = fids.ids(kname)
        core = program.kernels[kname].core
        kernel_ids = ((fid[0], fid[1], fid[1]) if core is Core.MIX else (fid[0], -1, -1) if core is Core.AIC
                      else (-1, fid[0], -1))
        args = []
        for j, box in enumerate(g.args.get(inst.id, [])):
            tensor = program.tensors[box.tensor]
            strides = _row_major(tensor.shape)
            offset = sum(lo * s for (lo, _), s in zip(box.box, strides, strict=True))
            tag = TAG[str(box.param.direction)]
            if made.get(box.buffer) == inst.id and box.buffer not in addr:  # the runtime carves it at this submit
                addr[box.buffer] = heap
                heap += -(-tensor.nbytes // HEAP_ALIGN) * HEAP_ALIGN + HEAP_ALIGN
                creator_of[box.buffer] = tid
                tag = "OUTPUT"
            if box.buffer not in addr:
                raise InternalError(f"task {inst.label}: no address for buffer {box.buffer}")
            region = Region(DTYPES[tensor.dtype].spelling, tuple(hi - lo for lo, hi in box.box), offset, strides)
            args.append(DepsArg(j, tag, fnv1a_tensor_id(addr[box.buffer], 0), region))
        tasks.append(DepsTask(tid, str(scope.mode), d.early, kernel_ids, inst.blocks, tuple(args)))
    graph, spans = _edges(plan, tasks, task_inst, ids, addr, creator_of)
    # tensors in first-use order
    by_id: dict[int, DepsTensor] = {}
    root_of = {fnv1a_tensor_id(a, 0): key for key, a in addr.items()}
    for task in tasks:
        for a in task.args:
            if a.tensor_id not in by_id:
                key = root_of[a.tensor_id]
                root = program.tensors[key[0]]
                by_id[a.tensor_id] = DepsTensor(a.tensor_id, addr[key], 0, DTYPES[root.dtype].spelling, root.numel)
    lid = plan.layer_loop
    layers = program.loops[lid].axis.size if lid is not None else 0
    return SpecSide(DepsGraph(tuple(tasks), tuple(by_id.values()), graph), notes, spans, layers)


def _edges(plan: Plan, tasks: list[DepsTask], task_inst: dict[int, Instance], ids: dict[int, list[int]],
           addr: dict[tuple[str, tuple[int, ...]], int],
           creator_of: dict[tuple[str, tuple[int, ...]], int]) -> tuple[tuple[DepsEdge, ...], dict[tuple[int, int], Span]]:
    g = plan.graph
    out: list[DepsEdge] = []
    spans: dict[tuple[int, int], Span] = {}
    want: dict[str, set[tuple[int, int]]] = {"creator": set(), "tensormap": set()}
    for u, v, data in g.edges():
        prov = data.prov
        if Provenance.CREATOR in prov:
            want["creator"].add((u, v))
        if Provenance.INFERRED in prov:
            want["tensormap"].add((u, v))
    got: dict[str, set[tuple[int, int]]] = {"creator": set(), "tensormap": set()}
    inst_of = {tid: inst_id for inst_id, tids in ids.items() for tid in tids}
    entries: dict[int, list[tuple[int, Region]]] = defaultdict(list)  # buffer address -> live entries
    for t in tasks:
        inst = task_inst[t.task_id]
        preds = sorted(((u, data) for u, data in g.pred[inst.id].items() if data.prov & DECLARED),
                       key=lambda ud: ids[ud[0]][0] if ud[0] in ids else -1)
        for u, data in preds:
            for _ in range(max(int(data.entries), 1)):
                out.append(DepsEdge(ids[u][0], t.task_id, -1, "explicit", ("wait", "retain")))
            if data.span is not None:
                spans[(ids[u][0], t.task_id)] = data.span
        if t.scope != ScopeMode.AUTO:
            continue
        register = []
        boxes = g.args.get(inst.id, [])
        for a, box in zip(t.args, boxes, strict=True):
            owner = creator_of.get(box.buffer)
            if owner is not None and owner != t.task_id:  # a creating OUTPUT has no creator edge
                out.append(DepsEdge(owner, t.task_id, a.idx, "creator", ("wait", "retain"), a.tensor_id, a.region))
                got["creator"].add((inst_of[owner], inst.id))
            if manual_dep(plan.program, box.buffer[0]):
                continue  # `manual_dep`: the creator edge only, no TensorMap lookup or insert
            base = addr[box.buffer]
            if a.type in ("INPUT", "INOUT"):
                keep = []
                for producer, region in entries[base]:
                    o = check_overlap(a.region, region)
                    if o is not None and producer != t.task_id:
                        out.append(DepsEdge(producer, t.task_id, a.idx, "tensormap", ("wait",), a.tensor_id, a.region,
                                            o, region))
                        got["tensormap"].add((inst_of[producer], inst.id))
                    if o == "covered" and a.type == "INOUT":
                        continue
                    keep.append((producer, region))
                entries[base] = keep
            if a.type in ("INOUT", "OUTPUT_EXISTING"):
                register.append((base, a.region))
        for base, region in register:
            entries[base].append((t.task_id, region))
    for kind in ("creator", "tensormap"):
        if got[kind] != want[kind]:
            diff = sorted(got[kind] ^ want[kind])[:3]
            labels = [(g.instances[u].label, g.instances[v].label) for u, v in diff]
            raise InternalError(f"deps.json export: the {kind} edges of the TensorMap replay differ from the "
                                f"planner's, e.g. {labels}")
    return tuple(out), spans


@records.value
@attrs.frozen(repr=False, eq=False)
class DepsJsonTarget:
    """The deps-json emitter: `pgraph export --deps-json OUT` (which also prints the counts of
    `export(plan)`'s graph) and `pgraph build --target deps-json` (the file as `deps.json`)."""

    name: str = "deps-json"
    description: str = "simpler's deps.json of the planned instance graph, every task (deps.json)"
    needs_full: bool = True  # deps.json lists every task of every loop iteration

    def emit(self, plan: Plan, info: BuildInfo) -> dict[str, str]:
        """{'deps.json': the text of `export(plan)`} (InternalError for a windowed plan)."""
        return {"deps.json": render(export(plan).graph)}


TARGET = DepsJsonTarget()
