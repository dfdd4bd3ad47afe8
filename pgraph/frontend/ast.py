"""AST of a .pgl file: frozen attrs classes, each with the Span it came from."""

from __future__ import annotations

import attrs

from pgraph import records
from pgraph.expr import BinOp, Expr, Func, Name, Neg, Not, Num  # noqa: F401  (expressions are syntax too)
from pgraph.kinds import AccessKind, Core, DimKind, Direction, Flag, ScopeMode, TaskKind
from pgraph.source import Span

# ---- regions, deps ----------------------------------------------------------------


@records.value
@attrs.frozen(repr=False, eq=False)
class Slice:
    """One dimension of a region: `:` (ALL), `a` (INDEX), `a:b` (RANGE) or `a +: n` (EXTENT)."""

    kind: DimKind
    a: Expr | None
    b: Expr | None
    span: Span


@records.value
@attrs.frozen(repr=False, eq=False)
class Region:
    """`tensor[slices]`, optionally `indirect(index tensors)` (a may-overlap bounding box).

    `slices` is None for a bare tensor name (the whole tensor).
    """

    tensor: str
    slices: tuple[Slice, ...] | None
    indirect: tuple[str, ...] | None
    span: Span


@records.value
@attrs.frozen(repr=False, eq=False)
class Sel:
    """One axis of a dep's logical-tile selection: `*` (ALL), `a`, `a..b` (RANGE) or `a +: n`."""

    kind: DimKind
    a: Expr | None
    b: Expr | None
    span: Span


@records.value
@attrs.frozen(repr=False, eq=False)
class Dep:
    """`name` or `name[sel, ...]`: the logical tiles (or carry/TaskId slot) waited on."""

    name: str
    sels: tuple[Sel, ...] | None
    span: Span


@records.value
@attrs.frozen(repr=False, eq=False)
class Axis:
    """`var in lo..hi` (half-open)."""

    var: str
    lo: Expr
    hi: Expr
    span: Span


# ---- task bodies -------------------------------------------------------------------


@records.value
@attrs.frozen(repr=False, eq=False)
class Let:
    """`let name = expr`."""

    name: str
    expr: Expr
    span: Span


@records.value
@attrs.frozen(repr=False, eq=False)
class Access:
    """`reads|writes|atomic_add region, ...`: per-block regions touched by the task."""

    kind: AccessKind
    regions: tuple[Region, ...]
    span: Span


@records.value
@attrs.frozen(repr=False, eq=False)
class ItemLoop:
    """`for it in lo..hi { ... }` inside a task: the union of its accesses over `it`."""

    axis: Axis
    items: tuple[BodyItem, ...]
    span: Span


@records.value
@attrs.frozen(repr=False, eq=False)
class Call:
    """`call kernel(args)` or `call table[index](args)`: each arg is an expression (scalar/bare
    tensor) or a Region; `index` selects the kernel of a `kernels` table per task."""

    kernel: str
    args: tuple[Expr | Region, ...]
    span: Span
    index: Expr | None = None


@records.value
@attrs.frozen(repr=False, eq=False)
class Untouched:
    """`untouched a, b`: tensors the kernel is passed but neither reads nor writes."""

    names: tuple[str, ...]
    span: Span


@records.value
@attrs.frozen(repr=False, eq=False)
class Wave:
    """`wave name axes : parallel|spmd(axes) flags deps` inside a `tiles` declaration.

    `kind` is PARALLEL or SPMD; `flag_spans` gives the span of each flag in `flags`; `call` is
    the wave's own kernel call (`wave ... call K(args)`), None when the waves share the body's.
    """

    name: str
    axes: tuple[Axis, ...]
    kind: TaskKind
    spmd_axes: tuple[str, ...] | None
    flags: tuple[Flag, ...]
    deps: tuple[Dep, ...] | None
    span: Span
    flag_spans: tuple[Span, ...] = ()
    call: Call | None = None


BodyItem = Let | Access | Untouched | ItemLoop | Call | Wave


@records.value
@attrs.frozen(repr=False, eq=False)
class Task:
    """`at|spmd|parallel|dummy|tiles name[axes] flags deps { body }`.

    `flag_spans` gives the span of each flag in `flags`; `deps_span` the last `deps(...)`
    clause (where a machine-applicable fix adds a dep), `body_span` the `{ ... }` if any.
    """

    kind: TaskKind
    name: str
    axes: tuple[Axis, ...]
    flags: tuple[Flag, ...]
    deps: tuple[Dep, ...] | None
    body: tuple[BodyItem, ...]
    span: Span
    name_span: Span
    flag_spans: tuple[Span, ...] = ()
    deps_span: Span | None = None
    body_span: Span | None = None


# ---- statements --------------------------------------------------------------------


@records.value
@attrs.frozen(repr=False, eq=False)
class Include:
    """`include "file.pgl"`, relative to the including file."""

    path: str
    span: Span


@records.value
@attrs.frozen(repr=False, eq=False)
class Const:
    """`const NAME = expr`, overridable with -D."""

    name: str
    expr: Expr
    span: Span


@records.value
@attrs.frozen(repr=False, eq=False)
class Assert:
    """`assert expr, "message"`, checked on the folded constants."""

    expr: Expr
    message: str | None
    span: Span


@records.value
@attrs.frozen(repr=False, eq=False)
class TensorDecl:
    """`tensor name : dtype[shape] [external | created] [manual_dep]`; `runtime[d]` marks a dimension written
    `runtime EXPR` (read at run time, EXPR the planning value); () when none is."""

    name: str
    dtype: str
    shape: tuple[Expr, ...]
    external: bool
    span: Span
    runtime: tuple[bool, ...] = ()
    #: `created`: the buffer is made by its first writer's submit (no alloc task)
    created: bool = False
    #: `manual_dep`: no TensorMap lookup or insert for it (explicit deps order its users)
    manual_dep: bool = False


@records.value
@attrs.frozen(repr=False, eq=False)
class ScalarDecl:
    """`scalar name : dtype [external]` (an orchestration scalar argument)."""

    name: str
    dtype: str
    external: bool
    span: Span


@records.value
@attrs.frozen(repr=False, eq=False)
class ViewDecl:
    """`view name = base as [shape]`: a row-major reshape of `base`."""

    name: str
    base: str
    shape: tuple[Expr, ...]
    span: Span


@records.value
@attrs.frozen(repr=False, eq=False)
class Param:
    """A kernel parameter: direction in/out/inout/atomic_add, or SCALAR."""

    name: str
    direction: Direction
    dtype: str
    shape: tuple[Expr, ...] | None
    span: Span


@records.value
@attrs.frozen(repr=False, eq=False)
class KernelDecl:
    """`[extern] kernel name core [source "path"] [includes "dir", ...] (params)`."""

    name: str
    core: Core
    source: str | None
    params: tuple[Param, ...]
    extern: bool
    span: Span
    includes: tuple[str, ...] = ()


@records.value
@attrs.frozen(repr=False, eq=False)
class KernelAlias:
    """`kernel B, C = A [source "path"]`: kernels sharing A's core and parameters (one body,
    separate func ids and sources); `name_spans` gives where each new name is written."""

    names: tuple[str, ...]
    base: str
    source: str | None
    span: Span
    name_spans: tuple[Span, ...] = ()


@records.value
@attrs.frozen(repr=False, eq=False)
class KernelTable:
    """`kernels T = [A, B, ...]`: kernels a call selects per task with `call T[index](...)`."""

    name: str
    members: tuple[str, ...]
    span: Span


@records.value
@attrs.frozen(repr=False, eq=False)
class Block:
    """A `{ ... }` statement list."""

    stmts: tuple[Stmt, ...]
    span: Span


@records.value
@attrs.frozen(repr=False, eq=False)
class ScopeStmt:
    """`auto|manual scope [ring N] { ... }`: a runtime PTO2_SCOPE (`ring_span`: where N is written)."""

    mode: ScopeMode
    ring: int | None
    block: Block
    span: Span
    ring_span: Span | None = None


@records.value
@attrs.frozen(repr=False, eq=False)
class CarryItem:
    """`name = init then next` in a loop header."""

    name: str
    init: str
    next: str
    span: Span


@records.value
@attrs.frozen(repr=False, eq=False)
class ForStmt:
    """`for L in lo..hi [unscoped] carry ... { ... }`: the body is an auto scope per iteration.

    `unscoped` (pypto `auto_scope=False`) keeps the body in the enclosing scope, so its
    tasks and allocations accumulate there across iterations.
    """

    axis: Axis
    carries: tuple[CarryItem, ...]
    block: Block
    span: Span
    scoped: bool = True


@records.value
@attrs.frozen(repr=False, eq=False)
class PhaseStmt:
    """`phase name { ... }`: groups tasks for reports and pictures (not a scope)."""

    name: str
    block: Block
    span: Span


@records.value
@attrs.frozen(repr=False, eq=False)
class InterleaveStmt:
    """`interleave { ... }`: submit the tasks of its declarations round-robin.

    Declarations with the same task index space (same ranges, in order) form one group; a
    group submits index 0 of every member, then index 1, and so on (pypto: one loop whose
    body submits several tasks, e.g. #794's gate/up critical wave). Groups follow each other
    in the order of their first member. Not a scope.
    """

    block: Block
    span: Span


@records.value
@attrs.frozen(repr=False, eq=False)
class TaskIds:
    """`taskids a, b`: TaskId arrays of tasks `a`, `b` held in this scope."""

    names: tuple[str, ...]
    span: Span


@records.value
@attrs.frozen(repr=False, eq=False)
class Use:
    """`use NAME`: the statements of fragment NAME, spliced in place at lowering.

    Names inside the fragment resolve here, at the use site (loop variables, carries,
    lets and tensors of the enclosing blocks); `span` is the whole statement.
    """

    name: str
    span: Span
    name_span: Span


@records.value
@attrs.frozen(repr=False, eq=False)
class Fragment:
    """`fragment NAME { statements }`: a top-level, reusable statement list.

    It is lowered only where a `use` names it, once per use; `name_span` is the name token.
    """

    name: str
    block: Block
    span: Span
    name_span: Span


@records.value
@attrs.frozen(repr=False, eq=False)
class Entry:
    """`entry name [unscoped] { ... }`: the orchestration function. Its body is a scope of depth 1
    (ring 1: pypto's outermost `PTO2_SCOPE()`), or with `unscoped` (`scoped` False) the executor's
    root scope, depth 0 and ring 0, as hand-written orchestrations submit (simpler: the executor
    opens the root scope around the entry)."""

    name: str
    block: Block
    span: Span
    scoped: bool = True


@records.value
@attrs.frozen(repr=False, eq=False)
class TargetItem:
    """`key = expr` inside a target block; `unit` a (rejected) unit suffix such as `MB`."""

    key: str
    expr: Expr
    span: Span
    unit: str | None = None
    unit_span: Span | None = None


@records.value
@attrs.frozen(repr=False, eq=False)
class Target:
    """`target a2a3 { task_window = 8192 ... }`: runtime limits overriding the defaults."""

    name: str
    items: tuple[TargetItem, ...]
    span: Span


@records.value
@attrs.frozen(repr=False, eq=False)
class Cost:
    """`cost NAME = expr`: per-block cost (µs) of a kernel, or the default of a core shape.

    `unit` is a (rejected) unit suffix such as `us`.
    """

    name: str
    expr: Expr
    span: Span
    unit: str | None = None
    unit_span: Span | None = None


@records.value
@attrs.frozen(repr=False, eq=False)
class Budget:
    """`budget FIGURE <= expr`: the most a figure of the plan may be (pgraph.plan.budgets, PG121)."""

    figure: str
    expr: Expr
    span: Span


@records.value
@attrs.frozen(repr=False, eq=False)
class Allow:
    """`allow(PG104, PG016, "reason")` before a declaration: its warnings and notes of these codes
    are waived (pgraph.frontend.allows pairs it with the declaration; `code_spans`: each code)."""

    codes: tuple[str, ...]
    reason: str
    span: Span
    code_spans: tuple[Span, ...] = ()


Stmt = (TensorDecl | ViewDecl | Let | Assert | ScopeStmt | ForStmt | PhaseStmt | InterleaveStmt | TaskIds | Use
        | Task | Allow)
Item = (Include | Const | Assert | TensorDecl | ScalarDecl | ViewDecl | KernelDecl | KernelAlias | KernelTable | Entry
        | Target | Cost | Budget | Fragment | Allow)


@records.value
@attrs.frozen(repr=False, eq=False)
class Module:
    """One parsed file: its items in order."""

    items: tuple[Item, ...]
    span: Span
