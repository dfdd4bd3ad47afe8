"""The kinds of things pgraph talks about, as enums (one per axis of variation).

Every enum is a `StrEnum`: a member is its keyword or JSON spelling (`TaskKind.SPMD == "spmd"`,
`f"{Core.MIX}"` is `mix`), so reports, dumps and the JSON plan keep the words of the language
and the runtime. Code compares members, never string literals, and dispatches on them with
`match` whose fallback calls `unhandled`, which raises an internal error naming the kind it
was not written for (a new kind can never be dropped silently).
"""

from __future__ import annotations

import enum
from typing import NoReturn


class InternalError(Exception):
    """A bug in pgraph, not in the user's spec: the CLI reports it with exit code 3."""


def unhandled(what: object) -> NoReturn:
    """The fallback arm of an exhaustive `match`: raise InternalError naming `what`'s kind."""
    kind = what.__class__.__name__
    raise InternalError(f"unhandled {kind}: {what!r}")


class TaskKind(enum.StrEnum):
    """What a declaration or an instance is: the task keywords, plus the runtime's alloc task.

    `tiles` is a tile set declaration only; each of its waves lowers to an `at`, `spmd` or
    `parallel` dispatch. `alloc` is an instance kind only (simpler: `alloc_tensors` submits a
    hidden kernel-less task that owns heap buffers).
    """

    AT = "at"
    SPMD = "spmd"
    PARALLEL = "parallel"
    DUMMY = "dummy"
    TILES = "tiles"
    ALLOC = "alloc"


class Core(enum.StrEnum):
    """The core shape a kernel runs on (simpler PTO2ResourceShape): MIX is 1 AIC + 2 AIV lanes."""

    AIC = "aic"
    AIV = "aiv"
    MIX = "mix"


class Direction(enum.StrEnum):
    """A kernel parameter's direction; SCALAR marks a scalar parameter.

    simpler tags: in -> INPUT, out -> OUTPUT_EXISTING, inout and atomic_add -> INOUT.
    """

    IN = "in"
    OUT = "out"
    INOUT = "inout"
    ATOMIC_ADD = "atomic_add"
    SCALAR = "scalar"


class AccessKind(enum.StrEnum):
    """How a task touches a region: read, write, or atomic add (split-K accumulation)."""

    READ = "read"
    WRITE = "write"
    ATOMIC = "atomic"


class ScopeMode(enum.StrEnum):
    """PTO2ScopeMode: AUTO infers edges through the TensorMap, MANUAL keeps explicit deps only."""

    AUTO = "auto"
    MANUAL = "manual"


class ScopeKind(enum.StrEnum):
    """Where a runtime scope comes from: the entry body, a scope block, or a loop body."""

    ENTRY = "entry"
    BLOCK = "scope"
    LOOP = "loop"


class NodeKind(enum.StrEnum):
    """A node of the entry's program-order tree (`ir.Node`)."""

    SCOPE = "scope"        # a runtime scope: the entry, a scope block, one loop body per iteration
    LOOP = "loop"          # a scope-level `for` loop
    DISPATCH = "dispatch"  # a task declaration or a wave
    ALLOC = "alloc"        # an allocation site: one `alloc_tensors` batch of a group


class Storage(enum.StrEnum):
    """Where a tensor's memory comes from: an orchestration argument, a scope's heap, another tensor."""

    EXTERNAL = "external"
    ALLOC = "alloc"
    VIEW = "view"


class CarryKind(enum.StrEnum):
    """A loop-carried value: a TaskId slot or a tensor alias."""

    TASK = "task"
    TENSOR = "tensor"


class DimKind(enum.StrEnum):
    """One axis of a region or of a dep's tile selection: `:`, `a`, `a:b` / `a..b`, `a +: n`."""

    ALL = "all"
    INDEX = "index"
    RANGE = "range"
    EXTENT = "extent"


class DepKind(enum.StrEnum):
    """A dep on logical tiles of a tile set, or through a TaskId loop carry."""

    TILES = "tiles"
    CARRY = "carry"


class Provenance(enum.StrEnum):
    """Why an edge exists: a declared dep, a loop carry, the TensorMap, or an alloc task's buffer.

    simpler `compute_task_fanin`: explicit deps, creator edges (owner_task_id), modifier lookups.
    """

    EXPLICIT = "explicit"
    CARRIED = "carried"
    INFERRED = "inferred"
    CREATOR = "creator"


#: Provenances of declared edges (counted as dep entries).
DECLARED = frozenset({Provenance.EXPLICIT, Provenance.CARRIED})
#: Provenances whose edges the runtime waits on (every edge carries DEP_WAIT).
WAIT = frozenset({Provenance.EXPLICIT, Provenance.CARRIED, Provenance.INFERRED, Provenance.CREATOR})


class _ProvenanceFlags(dict[frozenset[Provenance], tuple[bool, bool, bool]]):
    """provenance set -> (declared, waited on, inferred), each distinct set classified once."""

    def __missing__(self, prov: frozenset[Provenance]) -> tuple[bool, bool, bool]:
        flags = self[prov] = (bool(prov & DECLARED), not prov.isdisjoint(WAIT), Provenance.INFERRED in prov)
        return flags


#: An edge's provenance set is one of a handful of shared objects (`instances._provenance_set`),
#: so the passes over a --full prefill's 1.5 million edges look its flags up here instead of
#: intersecting sets per edge: `PROVENANCE_FLAGS[prov]` is (declared, waited on, inferred).
PROVENANCE_FLAGS = _ProvenanceFlags()

#: The accesses a parameter direction implies when the task states none.
DIRECTION_ACCESSES: dict[Direction, tuple[AccessKind, ...]] = {
    Direction.IN: (AccessKind.READ,),
    Direction.OUT: (AccessKind.WRITE,),
    Direction.INOUT: (AccessKind.READ, AccessKind.WRITE),
    Direction.ATOMIC_ADD: (AccessKind.ATOMIC,),
    Direction.SCALAR: (),
}


class Flag(enum.StrEnum):
    """A task flag: `early` (simpler `set_allow_early_resolve`), `sync_start` (`set_require_sync_start`)."""

    EARLY = "early"
    SYNC_START = "sync_start"


#: The figures a `budget` statement may bound (pgraph.plan.figures computes them, `pgraph
#: stats` prints them): name -> (what it counts, unit). `sim_us` is checked by `pgraph sim`.
BUDGET_FIGURES: dict[str, tuple[str, str]] = {
    "submits_per_layer": ("submit_task calls of one layer (compute tasks and dummies)", "tasks"),
    "submits": ("submit_task calls of the whole program (compute tasks and dummies)", "tasks"),
    "tasks_per_layer": ("compute tasks of one layer", "tasks"),
    "blocks_per_layer": ("SPMD blocks of one layer", "blocks"),
    "edges_per_layer": ("edges into the tasks of one layer (explicit, carried and tensormap)", "edges"),
    "edges": ("edges of the whole program (explicit, carried and tensormap)", "edges"),
    "creator_edges": ("creator edges (alloc task -> its buffers' users) of the whole program", "edges"),
    "ring3_live_tasks": ("peak live tasks on ring 3 (open scopes, previous carried iteration included)", "tasks"),
    "critical_path": ("the longest path of the whole program", "cost units"),
    "critical_path_per_layer": ("what one more layer adds to the longest path", "cost units"),
    "sim_us": ("simulated makespan of the whole program (`pgraph sim`, default timing)", "us"),
}
