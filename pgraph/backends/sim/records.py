"""The simulator's own input records: plain tasks and scopes, no planner or IR types.

`pgraph.backends.sim.graph_input` builds these from a Plan; the scheduler model, the cost
model, the trace writer and the analysis read nothing else. Tests build them by hand.
"""

from __future__ import annotations

import enum

import attrs

from pgraph import records


class Shape(enum.StrEnum):
    """simpler `PTO2ResourceShape` plus the two kernel-less kinds the orchestrator submits.

    AIC: one AIC core per block; AIV: one AIV core per block; MIX: one cluster per block
    (1 AIC + 2 AIV); DUMMY: dependency-only, completed inline by a scheduler thread;
    ALLOC: `alloc_tensors`, completed at submit (docs/upstream.md §2.4).
    """

    AIC = "aic"
    AIV = "aiv"
    MIX = "mix"
    DUMMY = "dummy"
    ALLOC = "alloc"


#: Edge provenances that also carry DEP_RETAIN (explicit deps are WAIT|RETAIN; a creator edge
#: is WAIT|RETAIN; a TensorMap modifier edge is WAIT only; simpler §3.2).
RETAIN_PROVENANCE = frozenset({"explicit", "carried", "creator"})


@records.value
@attrs.frozen(repr=False, eq=False)
class Producer:
    """One WAIT edge into a task: the producer's record id and the edge's provenance set."""

    task: int
    provenance: tuple[str, ...]

    @property
    def retain(self) -> bool:
        """True when the edge also pins the producer's slot until the consumer finishes (DEP_RETAIN)."""
        return any(p in RETAIN_PROVENANCE for p in self.provenance)


@records.value
@attrs.frozen(repr=False, eq=False)
class TaskRecord:
    """One submitted task in submit order.

    - `id`: index in submit order (0..n-1); `local` the per-ring local id (for `rXtY` names).
    - `shape`, `blocks` (SPMD block count; ALLOC: alloc tasks it stands for, window slots;
      DUMMY: 0), `sync_start`, `early` (allow_early_resolve on this task, i.e. its consumers
      may be staged early), `early_candidate` (the planner's eligibility of this task itself:
      every direct WAIT producer flagged; the EarlyStatus fact of pgraph.plan.early_dispatch).
    - `ring`, `scope` (scope-instance id; see ScopeRecord), `layer` (layer-loop iteration or None).
    - `producers`: direct WAIT edges, deduplicated.
    - `bytes_per_block` (HBM bytes a block moves, from its declared regions), `flops_per_block`
      (cube FLOPs, 2*M*N*K of the matmul shapes), `vector_ops_per_block` (elements a vector
      kernel touches), `fixed_us` (a per-block duration from a `cost` line or a calibration;
      None: use the roofline), `cost_source` (what set the duration), `weight_bytes_per_block`
      (bytes of the matmul weight operand, for the weight-streaming bound).
    - `heap_bytes` (ALLOC: packed heap of its tensors), `kernel`, `func_ids`, `name`, `dispatch`.
    """

    id: int
    name: str
    dispatch: str
    kernel: str | None
    shape: Shape
    blocks: int
    ring: int
    scope: int
    producers: tuple[Producer, ...] = ()
    early: bool = False
    early_candidate: bool = False
    sync_start: bool = False
    layer: int | None = None
    local: int = 0
    func_ids: tuple[int, ...] = ()
    bytes_per_block: float = 0.0
    flops_per_block: float = 0.0
    vector_ops_per_block: float = 0.0
    weight_bytes_per_block: float = 0.0
    fixed_us: float | None = None
    cost_source: str = "roofline"
    heap_bytes: int = 0

    @property
    def slots(self) -> int:
        """Task-window slots the task takes: one, or the alloc tasks an ALLOC record stands for."""
        return max(self.blocks, 1) if self.shape is Shape.ALLOC else 1

    @property
    def runs_on_cores(self) -> bool:
        """True for AIC, AIV and MIX tasks (dummies and allocs never reach an AICore)."""
        return self.shape in (Shape.AIC, Shape.AIV, Shape.MIX)


@records.value
@attrs.frozen(repr=False, eq=False)
class ScopeRecord:
    """One runtime scope instance (`PTO2_SCOPE`): its ring, parent and when it closes.

    `close_after` is the id of the last task submitted inside it (nested scopes included);
    the orchestrator runs `scope_end` right after submitting that task. A task is CONSUMED
    only after its scope has closed (simpler §4.2).
    """

    id: int
    ring: int
    parent: int | None
    close_after: int
    label: str = ""


@records.value
@attrs.frozen(repr=False, eq=False)
class SimGraph:
    """What one simulation runs: tasks in submit order, scope instances, the layer count."""

    tasks: tuple[TaskRecord, ...]
    scopes: tuple[ScopeRecord, ...]
    layers: int = 0
    source: str = ""

    def consumers(self) -> list[list[int]]:
        """`out[p]` = ids of the tasks that have a WAIT edge from `p`, in submit order."""
        out: list[list[int]] = [[] for _ in self.tasks]
        for t in self.tasks:
            for pr in t.producers:
                out[pr.task].append(t.id)
        return out

    def validate(self) -> None:
        """Ids dense and in order, producers submitted earlier, scopes known (ValueError otherwise)."""
        for i, t in enumerate(self.tasks):
            if t.id != i:
                raise ValueError(f"task {t.name}: id {t.id} is not its position {i}")
            for pr in t.producers:
                if not 0 <= pr.task < i:
                    raise ValueError(f"task {t.name}: producer {pr.task} is not submitted before it")
            if not 0 <= t.scope < len(self.scopes):
                raise ValueError(f"task {t.name}: unknown scope {t.scope}")
            if t.runs_on_cores and t.blocks < 1:
                raise ValueError(f"task {t.name}: a core task needs at least one block")
        for i, s in enumerate(self.scopes):
            if s.id != i:
                raise ValueError(f"scope {s.label}: id {s.id} is not its position {i}")
