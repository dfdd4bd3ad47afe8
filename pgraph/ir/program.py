"""The symbolic Program IR: tensors, kernels, scopes, loops, tile sets and dispatches.

Nothing here is expanded per block or per layer: a dispatch is one node with an index
space (task axes that make separate tasks, block axes that make SPMD blocks), and its
regions and deps are integer expressions (`pgraph.ir.expr`) of those indices and of the
enclosing loop variables. `pgraph.ir.expand` turns a Program into instances on demand.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import attrs

from pgraph.source import Span
from pgraph.syntax.ast import Expr

#: Bytes per element of every dtype the language knows.
DTYPE_BYTES: dict[str, int] = {
    "bf16": 2, "f16": 2, "f32": 4,
    "i8": 1, "i16": 2, "i32": 4, "i64": 8,
    "u8": 1, "u16": 2, "u32": 4, "u64": 8,
}


@attrs.frozen
class Tensor:
    """A tensor: `external` argument, `alloc` (heap of a scope) or `view` of another tensor.

    `shape` is in elements; `scope` is the scope whose ring heap holds an alloc tensor
    (after hoisting out of manual scopes, as pypto's EmitBatchedAllocTensors does);
    `declared_scope` is where the declaration stands.
    """

    name: str
    dtype: str
    shape: tuple[int, ...]
    storage: str
    span: Span
    scope: int | None = None
    declared_scope: int | None = None
    base: str | None = None
    arg_index: int | None = None
    loops: tuple[int, ...] = ()

    @property
    def numel(self) -> int:
        """Number of elements."""
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        """Size in bytes (elements x dtype size)."""
        return self.numel * DTYPE_BYTES[self.dtype]


@attrs.frozen
class ScalarArg:
    """An orchestration scalar argument (`orch_args.scalar(j)`)."""

    name: str
    dtype: str
    span: Span
    arg_index: int


@attrs.frozen
class Param:
    """A kernel parameter: direction in/out/inout/atomic_add, or 'scalar'; shape in elements."""

    name: str
    direction: str
    dtype: str
    shape: tuple[int, ...] | None
    span: Span

    @property
    def is_tensor(self) -> bool:
        """True for tensor parameters (everything but 'scalar')."""
        return self.direction != "scalar"


@attrs.frozen
class Kernel:
    """A kernel declaration. `core` is aic, aiv or mix (1 AIC + 2 AIV, two func ids)."""

    name: str
    core: str
    source: str | None
    params: tuple[Param, ...]
    extern: bool
    span: Span


@attrs.frozen
class Scope:
    """A runtime scope (PTO2_SCOPE). Depth 1 is the entry body; ring = min(depth, 3).

    `kind` is 'entry', 'scope' (auto/manual block) or 'loop' (a loop body, one scope
    per iteration). simpler: `current_ring_id() = min(scope_stack_top, 3)`.
    """

    id: int
    mode: str
    depth: int
    parent: int | None
    kind: str
    span: Span
    expected_ring: int | None = None
    loop: int | None = None
    taskids: tuple[str, ...] = ()

    @property
    def ring(self) -> int:
        """The heap ring this scope's tasks and allocations use."""
        return min(self.depth, 3)


@attrs.frozen
class Carry:
    """A loop-carried value: a TaskId slot ('task') or a tensor alias ('tensor')."""

    name: str
    kind: str
    init: str
    next: str
    span: Span


@attrs.frozen
class IAxis:
    """An index axis `var in lo..hi` with folded bounds (half-open)."""

    var: str
    lo: int
    hi: int
    span: Span

    @property
    def size(self) -> int:
        """Number of values (0 for an empty range)."""
        return max(self.hi - self.lo, 0)


@attrs.frozen
class Loop:
    """A scope-level `for` loop; `body_scope` is None when it sits inside a manual scope."""

    id: int
    axis: IAxis
    carries: tuple[Carry, ...]
    body_scope: int | None
    parent_scope: int
    span: Span
    identical: bool = True
    scoped: bool = True


@attrs.frozen
class Dim:
    """One region dimension: 'all', 'index' (a), 'range' (a:b) or 'extent' (a +: b)."""

    kind: str
    a: Expr | None
    b: Expr | None


@attrs.frozen
class RegionRef:
    """A region of a tensor (or carry alias): dims None means the whole tensor.

    `indirect` names the index tensors of an indirect access (None: direct); the dims
    then give its bounding box, which the planner treats as may-overlap.
    """

    tensor: str
    dims: tuple[Dim, ...] | None
    indirect: tuple[str, ...] | None
    span: Span


@attrs.frozen
class ItemAxis:
    """The inner index of a union region (`for it in 0..4 { ... }` in a task body)."""

    var: str
    lo: int
    hi: int


@attrs.frozen
class Access:
    """A per-block access: kind 'read', 'write' or 'atomic' (split-K atomic add)."""

    kind: str
    region: RegionRef
    items: tuple[ItemAxis, ...]
    span: Span


@attrs.frozen
class Arg:
    """A kernel argument bound to a parameter: a tensor region or a scalar expression."""

    param: Param
    region: RegionRef | None
    scalar: Expr | None
    span: Span


@attrs.frozen
class DepSel:
    """A dep's selection on one tile axis: 'all', 'index' (a), 'range' (a..b), 'extent' (a +: b)."""

    kind: str
    a: Expr | None
    b: Expr | None
    span: Span


@attrs.frozen
class DepRef:
    """A dep: on tiles of a tile set ('tiles') or through a loop carry ('carry')."""

    target: str
    kind: str
    sels: tuple[DepSel, ...] | None
    span: Span


@attrs.frozen
class Dispatch:
    """One dispatch declaration: a task (at), SPMD grid, parallel loop, dummy, or one wave.

    `task_axes` index separate tasks (TaskIds); `block_axes` index the SPMD blocks of each
    task. Regions, args and deps are expressions of those axes and of `loops`' variables.
    """

    name: str
    tileset: str
    wave: str | None
    kind: str
    task_axes: tuple[IAxis, ...]
    block_axes: tuple[IAxis, ...]
    accesses: tuple[Access, ...]
    kernel: str | None
    args: tuple[Arg, ...]
    early: bool
    sync_start: bool
    deps: tuple[DepRef, ...]
    scope: int
    phase: str | None
    order: int
    loops: tuple[int, ...]
    span: Span
    #: id of the `interleave` block it was declared in (submission round-robin), else None
    interleave: int | None = None

    @property
    def task_count(self) -> int:
        """Tasks per loop iteration (product of task-axis sizes)."""
        return math.prod(a.size for a in self.task_axes)

    @property
    def block_count(self) -> int:
        """SPMD blocks per task (1 for at, parallel and dummy tasks... 0 blocks for dummies)."""
        return 0 if self.kind == "dummy" else math.prod(a.size for a in self.block_axes)


@attrs.frozen
class TileSet:
    """The logical tiles a declaration computes; deps select tiles, not tasks.

    Each tile maps to exactly one dispatch (its wave) and task there.
    """

    name: str
    axes: tuple[IAxis, ...]
    dispatches: tuple[str, ...]
    scope: int
    kind: str
    span: Span


@attrs.frozen(slots=False)
class Program:
    """A lowered, name-resolved, constant-folded program (one entry)."""

    entry: str
    entry_span: Span
    consts: dict[str, int]
    tensors: dict[str, Tensor]
    scalars: dict[str, ScalarArg]
    kernels: dict[str, Kernel]
    scopes: tuple[Scope, ...]
    loops: tuple[Loop, ...]
    tilesets: dict[str, TileSet]
    dispatches: tuple[Dispatch, ...]
    phases: tuple[str, ...]
    carries: dict[str, Carry]
    target: dict[str, int] = attrs.field(factory=dict)
    costs: dict[str, int] = attrs.field(factory=dict)

    def dispatch(self, name: str) -> Dispatch:
        """The dispatch called `name` (KeyError if none)."""
        return self._by_name()[name]

    def _by_name(self) -> dict[str, Dispatch]:
        cache = self.__dict__.get("_dispatch_cache")
        if cache is None:
            cache = {d.name: d for d in self.dispatches}
            object.__setattr__(self, "_dispatch_cache", cache)
        return cache

    def ancestors(self, scope: int) -> list[int]:
        """`scope` and its enclosing scopes, innermost first."""
        return scope_chain(self.scopes, scope)


def scope_chain(scopes: Sequence[Scope], scope: int) -> list[int]:
    """`scope` and its enclosing scopes in `scopes` (indexed by id), innermost first."""
    out = []
    cur: int | None = scope
    while cur is not None:
        out.append(cur)
        cur = scopes[cur].parent
    return out


def interleave_groups(members: Sequence[Dispatch]) -> list[list[Dispatch]]:
    """Split the dispatches of one `interleave` block into round-robin groups.

    Dispatches whose task axes have the same ranges (lo, hi per axis, in order; names may
    differ) form a group, submitted index by index (row-major), each index in declaration
    order of the members. Groups come in the order of their first member. A dispatch with
    no task axis (one task: `at`, an all-block `spmd`, a plain `dummy`) or with a unique
    index space is a group of one, submitted where it is declared.
    """
    groups: dict[object, list[Dispatch]] = {}
    for d in members:
        groups.setdefault(interleave_key(d), []).append(d)
    return list(groups.values())


def interleave_key(d: Dispatch) -> object:
    """The round-robin group key of `d` in an `interleave` block: its task ranges, or its own name."""
    return tuple((a.lo, a.hi) for a in d.task_axes) if d.task_axes else ("single", d.name)
