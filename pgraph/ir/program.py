"""The symbolic Program IR: tensors, kernels, scopes, loops, tile sets and dispatches.

Data only: lowering builds it (names resolved, constants folded), the checks of
`pgraph.plan` read it, `pgraph.expand` turns it into instances, backends print it. Nothing
here is expanded per block or per layer: a dispatch is one node with an index space (task
axes that make separate tasks, block axes that make SPMD blocks), and its regions and deps
are integer expressions (`pgraph.expr`) of those indices and of the enclosing loop
variables. The IR keeps what the user wrote even where a check will reject it (a negative
range, a call with the wrong number of arguments), so every check can live in one place.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import attrs

from pgraph import records
from pgraph.expr import Expr, free_vars
from pgraph.ir.bounds import slice_bounds
from pgraph.kinds import (
    AccessKind,
    CarryKind,
    Core,
    DepKind,
    DimKind,
    Direction,
    Flag,
    NodeKind,
    ScopeKind,
    ScopeMode,
    Storage,
    TaskKind,
)
from pgraph.source import Span

#: Bytes per element of every dtype the language knows.
DTYPE_BYTES: dict[str, int] = {
    "bf16": 2, "f16": 2, "f32": 4,
    "i8": 1, "i16": 2, "i32": 4, "i64": 8,
    "u8": 1, "u16": 2, "u32": 4, "u64": 8,
}


@records.value
@attrs.frozen(repr=False, eq=False)
class Tensor:
    """A tensor: an `external` argument, an `alloc` (heap of a scope) or a `view` of another tensor.

    `shape` is in elements; `scope` is the scope whose ring heap holds an alloc tensor
    (after hoisting out of manual scopes, as pypto's EmitBatchedAllocTensors does);
    `declared_scope` is where the declaration stands (None: the top level). `base` is the
    root tensor of a view; `arg_index` the orchestration argument index of an external;
    `loops` the scope-level loops around an allocation (one buffer per iteration).
    """

    name: str
    dtype: str
    shape: tuple[int, ...]
    storage: Storage
    span: Span
    scope: int | None = None
    declared_scope: int | None = None
    base: str | None = None
    arg_index: int | None = None
    loops: tuple[int, ...] = ()
    #: where each dimension of the shape is written (for diagnostics)
    dim_spans: tuple[Span, ...] = attrs.field(default=(), eq=False)
    #: per dimension, True when it is read at run time (`runtime EXPR`; `shape` holds EXPR,
    #: the planning value); () when every dimension is a constant
    runtime: tuple[bool, ...] = ()
    #: `created`: an alloc tensor whose buffer its first writer's submit makes (simpler's
    #: add_output(TensorCreateInfo), OUTPUT): no alloc task, that task is its creator
    created: bool = False
    #: `manual_dep`: simpler TensorCreateInfo(..., manual_dep=true): the runtime's submit keeps
    #: the creator edge but does no TensorMap lookup or insert for the buffer (its views too)
    manual_dep: bool = False

    def is_runtime(self, axis: int) -> bool:
        """True when dimension `axis` is read from the orchestration tensor at run time."""
        return bool(self.runtime) and self.runtime[axis]

    @property
    def numel(self) -> int:
        """Number of elements."""
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        """Size in bytes (elements x dtype size)."""
        return self.numel * DTYPE_BYTES[self.dtype]

    @property
    def root(self) -> str:
        """The buffer this tensor's elements live in: its own name, or a view's base."""
        return self.base or self.name


@records.value
@attrs.frozen(repr=False, eq=False)
class ScalarArg:
    """An orchestration scalar argument (`orch_args.scalar(j)`)."""

    name: str
    dtype: str
    span: Span
    arg_index: int


@records.value
@attrs.frozen(repr=False, eq=False)
class Param:
    """A kernel parameter: a tensor direction or `SCALAR`; shape in elements (None: any)."""

    name: str
    direction: Direction
    dtype: str
    shape: tuple[int, ...] | None
    span: Span
    dim_spans: tuple[Span, ...] = attrs.field(default=(), eq=False)

    @property
    def is_tensor(self) -> bool:
        """True for tensor parameters (everything but SCALAR)."""
        return self.direction is not Direction.SCALAR


@records.value
@attrs.frozen(repr=False, eq=False)
class Kernel:
    """A kernel declaration. `core` is AIC, AIV or MIX (1 AIC + 2 AIV, two func ids).

    `alias_of` names the kernel whose body this one shares (`kernel B = A`: same core and
    parameters, its own name, func id and source; pypto outlines one function per call site,
    so byte-identical bodies still get separate fids); `includes` are the extra include
    directories of an extern kernel (kernel_config.py `extra_include_dirs`).
    """

    name: str
    core: Core
    source: str | None
    params: tuple[Param, ...]
    extern: bool
    span: Span
    alias_of: str | None = None
    includes: tuple[str, ...] = ()

    @property
    def body(self) -> str:
        """The kernel whose body this one runs: its own name, or the kernel it aliases."""
        return self.alias_of or self.name


@records.value
@attrs.frozen(repr=False, eq=False)
class KernelTable:
    """`kernels NAME = [A, B, ...]`: kernels a call selects per task (`call NAME[index](...)`)."""

    name: str
    members: tuple[str, ...]
    span: Span


@records.value
@attrs.frozen(repr=False, eq=False)
class Scope:
    """A runtime scope (PTO2_SCOPE). Depth 1 is the entry body (0 for an `unscoped` entry: the
    executor's root scope); ring = min(depth, 3).

    `kind` is ENTRY, BLOCK (an auto/manual scope block) or LOOP (a loop body, one scope per
    iteration). `expected_ring` is the ring the spec states (`scope ring N`), `interleave`
    the `interleave` block the scope was declared in (a PG035 error).
    simpler: `current_ring_id() = min(scope_stack_top, 3)`.
    """

    id: int
    mode: ScopeMode
    depth: int
    parent: int | None
    kind: ScopeKind
    span: Span
    expected_ring: int | None = None
    loop: int | None = None
    taskids: tuple[tuple[str, Span], ...] = ()
    interleave: int | None = None
    #: the `{ ... }` of the scope's body and where a stated ring is written (for fixes)
    block_span: Span | None = attrs.field(default=None, eq=False)
    ring_span: Span | None = attrs.field(default=None, eq=False)

    @property
    def ring(self) -> int:
        """The heap ring this scope's tasks and allocations use."""
        return min(self.depth, 3)


@records.value
@attrs.frozen(repr=False, eq=False)
class Carry:
    """A loop-carried value: a TaskId slot (TASK) or a tensor alias (TENSOR): `name = init then next`."""

    name: str
    kind: CarryKind
    init: str
    next: str
    span: Span


@records.value
@attrs.frozen(repr=False, eq=False)
class IAxis:
    """An index axis `var in lo..hi` with folded bounds (half-open; hi < lo is a PG006 error)."""

    var: str
    lo: int
    hi: int
    span: Span

    @property
    def size(self) -> int:
        """Number of values (0 for an empty or negative range)."""
        return max(self.hi - self.lo, 0)


@records.value
@attrs.frozen(repr=False, eq=False)
class Loop:
    """A scope-level `for` loop; `body_scope` is None when the body has no scope of its own
    (`unscoped`, or a loop inside a manual scope)."""

    id: int
    axis: IAxis
    carries: tuple[Carry, ...]
    body_scope: int | None
    parent_scope: int
    span: Span
    scoped: bool = True
    interleave: int | None = None


@records.value
@attrs.frozen(repr=False, eq=False)
class Dim:
    """One region dimension: ALL, INDEX (a), RANGE (a:b) or EXTENT (a +: b)."""

    kind: DimKind
    a: Expr | None
    b: Expr | None


@records.value
@attrs.frozen(repr=False, eq=False)
class RegionRef:
    """A region of a tensor (or tensor carry alias): `dims` None means the whole tensor.

    `indirect` names the index tensors of an indirect access (None: direct); the dims
    then give its bounding box, which the planner treats as may-overlap.
    """

    tensor: str
    dims: tuple[Dim, ...] | None
    indirect: tuple[str, ...] | None
    span: Span


@records.value
@attrs.frozen(repr=False, eq=False)
class ItemAxis:
    """The inner index of a union region (`for it in 0..4 { ... }` in a task body)."""

    var: str
    lo: int
    hi: int
    span: Span | None = attrs.field(default=None, eq=False)


@records.value
@attrs.frozen(repr=False, eq=False)
class Access:
    """A per-block access; `explicit` when written as a `reads`/`writes`/`atomic_add` clause,
    else implied by a kernel parameter's direction."""

    kind: AccessKind
    region: RegionRef
    items: tuple[ItemAxis, ...]
    span: Span
    explicit: bool = False


@records.value
@attrs.frozen(repr=False, eq=False)
class Arg:
    """A call argument bound (by position) to a kernel parameter: a tensor region or a scalar expression."""

    param: Param
    region: RegionRef | None
    scalar: Expr | None
    span: Span


@records.value
@attrs.frozen(repr=False, eq=False)
class CallSite:
    """The `call kernel(...)` of a task: the kernel, how many arguments were passed, where."""

    kernel: str
    arity: int
    span: Span


@records.value
@attrs.frozen(repr=False, eq=False)
class DepSel:
    """A dep's selection on one tile axis: ALL, INDEX (a), RANGE (a..b), EXTENT (a +: b)."""

    kind: DimKind
    a: Expr | None
    b: Expr | None
    span: Span


@records.value
@attrs.frozen(repr=False, eq=False)
class DepRef:
    """A dep: on tiles of a tile set (TILES) or through a TaskId loop carry (CARRY)."""

    target: str
    kind: DepKind
    sels: tuple[DepSel, ...] | None
    span: Span


@records.value
@attrs.frozen(repr=False, eq=False)
class Dispatch:
    """One dispatch declaration: a task (at), SPMD grid, parallel loop, dummy, or one wave.

    `task_axes` index separate tasks (TaskIds); `block_axes` index the SPMD blocks of each
    task. Regions, args and deps are expressions of those axes and of `loops`' variables.
    `wave_flags` are the flags written on the wave line (a `tiles` wave), `flags` the
    declaration's; `early`/`sync_start` are their union.
    """

    name: str
    tileset: str
    wave: str | None
    kind: TaskKind
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
    call: CallSite | None = None
    #: every flag of the declaration and of its wave line, with where it is written (for fixes)
    flag_spans: tuple[tuple[Flag, Span], ...] = attrs.field(default=(), eq=False)
    #: `call TABLE[index](...)`: the table and the index (an expression of loop and task
    #: indices); `kernel` is then the table's first member, whose signature every member shares
    kernel_table: str | None = None
    kernel_index: Expr | None = None
    #: tensors passed but neither read nor written (`untouched a, b`), with where each is named
    untouched: tuple[tuple[str, Span], ...] = ()

    @property
    def task_count(self) -> int:
        """Tasks per loop iteration (product of task-axis sizes)."""
        return math.prod(a.size for a in self.task_axes)

    @property
    def block_count(self) -> int:
        """SPMD blocks per task (1 for at and parallel tasks, 0 for dummies)."""
        return 0 if self.kind is TaskKind.DUMMY else math.prod(a.size for a in self.block_axes)


@records.value
@attrs.frozen(repr=False, eq=False)
class WaveDecl:
    """One `wave` line of a tile set as written: its name, the tile box it takes, where."""

    name: str
    box: tuple[IAxis, ...]
    span: Span


@records.value
@attrs.frozen(repr=False, eq=False)
class TileSet:
    """The logical tiles a declaration computes; deps select tiles, not tasks.

    Each tile maps to exactly one dispatch (its wave) and a task there (PG021 checks the
    waves of a `tiles` declaration cover every tile once).
    """

    name: str
    axes: tuple[IAxis, ...]
    dispatches: tuple[str, ...]
    scope: int
    kind: TaskKind
    span: Span
    waves: tuple[WaveDecl, ...] = ()
    #: the whole declaration, its last `deps(...)` clause and its `{ ... }` body (for fixes)
    decl_span: Span | None = attrs.field(default=None, eq=False)
    deps_span: Span | None = attrs.field(default=None, eq=False)
    body_span: Span | None = attrs.field(default=None, eq=False)


@records.value
@attrs.frozen(repr=False, eq=False)
class AssertStmt:
    """An `assert expr, "message"`: `expr` folded with the constants, `source` as written."""

    expr: Expr
    source: Expr
    message: str | None
    span: Span


@records.value
@attrs.frozen(repr=False, eq=False)
class Setting:
    """A `target` limit or a `cost` line as written: key, folded value, where."""

    key: str
    value: int
    span: Span


@records.value
@attrs.frozen(repr=False, eq=False)
class Budget:
    """A `budget FIGURE <= limit` statement, folded: the figure (pgraph.kinds.BUDGET_FIGURES), the limit, where."""

    figure: str
    limit: int
    span: Span


@records.value
@attrs.frozen(repr=False, eq=False)
class InterleaveBlock:
    """An `interleave { ... }` block; `parent` is the interleave block it stands in (a PG035 error)."""

    id: int
    span: Span
    parent: int | None


#: An allocation group: (heap scope, batch id, allocating loops). The batch id is the heap scope,
#: or the manual scope whose buffers are their own batch (`alloc_group`).
AllocKey = tuple[int, int, tuple[int, ...]]


@records.value
@attrs.frozen(repr=False, eq=False)
class Node:
    """One node of the entry's program-order tree, which both the expander and the backends walk.

    SCOPE (ident: scope id; a scoped loop's LOOP node holds one SCOPE child, its body), LOOP
    (loop id), DISPATCH (dispatch name), ALLOC (an `AllocKey`: where that group's buffers are
    allocated, once per iteration of its loops: the top of its heap scope, the top of an
    `unscoped` loop body, or just before the manual scope whose buffers it holds). Children are
    in program order, so scopes and loops without tasks are kept.
    """

    kind: NodeKind
    ident: int | str | AllocKey
    children: tuple[Node, ...] = ()


@records.value
@attrs.frozen(slots=False, repr=False, eq=False)
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
    asserts: tuple[AssertStmt, ...] = ()
    target_items: tuple[Setting, ...] = ()
    cost_items: tuple[Setting, ...] = ()
    interleaves: tuple[InterleaveBlock, ...] = ()
    #: the entry's program-order tree (scopes, loops, dispatches, allocation sites)
    tree: Node = Node(NodeKind.SCOPE, 0)
    kernel_tables: dict[str, KernelTable] = attrs.field(factory=dict)
    #: `budget` statements, in source order (pgraph.plan.budgets checks them)
    budgets: tuple[Budget, ...] = ()
    #: the constants -D, --config or --layers overrode (sorted names; () for the spec as written)
    overridden: tuple[str, ...] = ()

    def kernels_of(self, d: Dispatch) -> tuple[str, ...]:
        """Every kernel `d` may call: its table's members, or its one kernel (() for a dummy)."""
        if d.kernel_table is not None:
            return self.kernel_tables[d.kernel_table].members
        return (d.kernel,) if d.kernel is not None else ()

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

    def carry_loop(self, name: str) -> Loop:
        """The loop that carries `name` (KeyError if no loop does)."""
        for lp in self.loops:
            if any(c.name == name for c in lp.carries):
                return lp
        raise KeyError(name)


def alloc_group(p: Program, t: Tensor) -> int:
    """The batch an allocated tensor belongs to, named by a scope id: the manual scope it is
    declared in (pypto emits a manual scope's creates as their own `alloc_tensors` batch in the
    enclosing scope, just before the MANUAL header: docs/upstream.md §6.4, and the
    decode's per-layer alloc_1 / alloc_2, docs/upstream.md §8.5), else its heap scope."""
    d = t.declared_scope
    if d is not None and t.scope is not None and d != t.scope and p.scopes[d].mode is ScopeMode.MANUAL:
        return d
    return t.scope if t.scope is not None else 0


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


def alloc_key(p: Program, t: Tensor) -> AllocKey:
    """The allocation group of an allocated tensor: (heap scope, batch, allocating loops)."""
    assert t.scope is not None
    return (t.scope, alloc_group(p, t), t.loops)


def single_task(ts: TileSet) -> bool:
    """One TaskId for the whole tile set: `at`, `spmd`, or a dummy without an index."""
    return ts.kind in (TaskKind.AT, TaskKind.SPMD) or not ts.axes


def task_slots(p: Program, ts: TileSet) -> int:
    """Distinct tasks of a tile set: the slots of a TaskId carry (one entry per task)."""
    if single_task(ts):
        return 1
    return sum(d.task_count for d in map(p.dispatch, ts.dispatches)
               if not (d.kind is TaskKind.SPMD and d.block_count == 0))  # an empty wave submits nothing


def dep_dedup_key(p: Program, dep: DepRef) -> tuple[str, str] | None:
    """The single TaskId a dep entry names when a second identical entry in one deps list is
    merged into the first (pypto appends each deduplicated edge once: docs/upstream.md
    §6.5, "K = exact deduplicated edge count"); None when entries are not merged.

    Merged: a TaskId carry holding one task, and a single-task tile set (`at`, `spmd`, dummy
    without index) under a selection whose size uses no variable (the append is unconditional).
    A selection of variable size is appended under its condition, and stays as written.
    """
    if dep.kind is DepKind.CARRY:
        carry = p.carries[dep.target]
        one = max(task_slots(p, p.tilesets[carry.init]), task_slots(p, p.tilesets[carry.next])) <= 1
        return ("carry", dep.target) if one else None
    ts = p.tilesets[dep.target]
    if not single_task(ts):
        return None
    for sel in dep.sels or ():
        if free_vars(slice_bounds(sel.kind, sel.a, sel.b, (0, 0), sel.span).size):  # `*` has a number for size
            return None
    return ("tiles", dep.target)


def manual_dep(p: Program, name: str) -> bool:
    """True when tensor `name`'s buffer is declared `manual_dep` (a view inherits its base's
    flag, as simpler's Tensor::view ORs it): the runtime's submit adds the creator edge but no
    TensorMap lookup or insert (simpler TRB/runtime/tensor_create_info.h, TRB/orchestration
    submit; docs/upstream.md §2.3)."""
    t = p.tensors[name]
    return p.tensors[t.root].manual_dep if t.root in p.tensors else t.manual_dep


def creators(p: Program) -> dict[str, str]:
    """Each `created` tensor -> the dispatch that creates it: the first, in program order, passed
    it or a view of it (its submit makes the buffer: simpler add_output(TensorCreateInfo),
    docs/upstream.md §2.3). A created tensor no dispatch is passed is left out."""
    wanted = {t.name for t in p.tensors.values() if t.created}
    found: dict[str, str] = {}
    if not wanted:
        return found

    def walk(node: Node) -> None:
        if node.kind is NodeKind.DISPATCH:
            d = p.dispatch(node.ident)  # type: ignore[arg-type]
            for arg in d.args:
                t = p.tensors.get(arg.region.tensor) if arg.region is not None else None
                if t is not None and t.root in wanted and t.root not in found:
                    found[t.root] = d.name
            return
        for child in node.children:
            walk(child)

    walk(p.tree)
    return found
