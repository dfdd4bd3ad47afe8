"""AST of a .pgl file: frozen attrs classes, each with the Span it came from."""

from __future__ import annotations

import attrs

from pgraph.source import Span

# ---- expressions -----------------------------------------------------------------


@attrs.frozen
class Num:
    """An integer literal."""

    value: int
    span: Span


@attrs.frozen
class Name:
    """A reference to a constant, let, index variable or (in call args) a tensor/scalar."""

    id: str
    span: Span


@attrs.frozen
class BinOp:
    """`left op right` for op in + - * / % (integer, floor division) and comparisons."""

    op: str
    left: Expr
    right: Expr
    span: Span


@attrs.frozen
class Neg:
    """Unary minus."""

    operand: Expr
    span: Span


@attrs.frozen
class Not:
    """Boolean `not` (0 or 1)."""

    operand: Expr
    span: Span


@attrs.frozen
class Func:
    """`ceildiv(a, b)`, `min(a, ...)`, `max(a, ...)`."""

    name: str
    args: tuple[Expr, ...]
    span: Span


Expr = Num | Name | BinOp | Neg | Not | Func

# ---- regions, deps ----------------------------------------------------------------


@attrs.frozen
class Slice:
    """One dimension of a region: kind is 'all', 'index', 'range' (a:b) or 'extent' (a +: n)."""

    kind: str
    a: Expr | None
    b: Expr | None
    span: Span


@attrs.frozen
class Region:
    """`tensor[slices]`, optionally `indirect(index tensors)` (a may-overlap bounding box).

    `slices` is None for a bare tensor name (the whole tensor).
    """

    tensor: str
    slices: tuple[Slice, ...] | None
    indirect: tuple[str, ...] | None
    span: Span


@attrs.frozen
class Sel:
    """One axis of a dep's logical-tile selection: 'all', 'index', 'range' or 'extent'."""

    kind: str
    a: Expr | None
    b: Expr | None
    span: Span


@attrs.frozen
class Dep:
    """`name` or `name[sel, ...]`: the logical tiles (or carry/TaskId slot) waited on."""

    name: str
    sels: tuple[Sel, ...] | None
    span: Span


@attrs.frozen
class Axis:
    """`var in lo..hi` (half-open)."""

    var: str
    lo: Expr
    hi: Expr
    span: Span


# ---- task bodies -------------------------------------------------------------------


@attrs.frozen
class Let:
    """`let name = expr`."""

    name: str
    expr: Expr
    span: Span


@attrs.frozen
class Access:
    """`reads|writes|atomic_add region, ...`: per-block regions touched by the task."""

    kind: str
    regions: tuple[Region, ...]
    span: Span


@attrs.frozen
class ItemLoop:
    """`for it in lo..hi { ... }` inside a task: the union of its accesses over `it`."""

    axis: Axis
    items: tuple[BodyItem, ...]
    span: Span


@attrs.frozen
class Call:
    """`call kernel(args)`: each arg is an expression (scalar/bare tensor) or a Region."""

    kernel: str
    args: tuple[Expr | Region, ...]
    span: Span


@attrs.frozen
class Wave:
    """`wave name axes : parallel|spmd(axes) flags deps` inside a `tiles` declaration."""

    name: str
    axes: tuple[Axis, ...]
    kind: str
    spmd_axes: tuple[str, ...] | None
    flags: tuple[str, ...]
    deps: tuple[Dep, ...] | None
    span: Span


BodyItem = Let | Access | ItemLoop | Call | Wave


@attrs.frozen
class Task:
    """`at|spmd|parallel|dummy|tiles name[axes] flags deps { body }`."""

    kind: str
    name: str
    axes: tuple[Axis, ...]
    flags: tuple[str, ...]
    deps: tuple[Dep, ...] | None
    body: tuple[BodyItem, ...]
    span: Span
    name_span: Span


# ---- statements --------------------------------------------------------------------


@attrs.frozen
class Include:
    """`include "file.pgl"`, relative to the including file."""

    path: str
    span: Span


@attrs.frozen
class Const:
    """`const NAME = expr`, overridable with -D."""

    name: str
    expr: Expr
    span: Span


@attrs.frozen
class Assert:
    """`assert expr, "message"`, checked on the folded constants."""

    expr: Expr
    message: str | None
    span: Span


@attrs.frozen
class TensorDecl:
    """`tensor name : dtype[shape] [external]`."""

    name: str
    dtype: str
    shape: tuple[Expr, ...]
    external: bool
    span: Span


@attrs.frozen
class ScalarDecl:
    """`scalar name : dtype [external]` (an orchestration scalar argument)."""

    name: str
    dtype: str
    external: bool
    span: Span


@attrs.frozen
class ViewDecl:
    """`view name = base as [shape]`: a row-major reshape of `base`."""

    name: str
    base: str
    shape: tuple[Expr, ...]
    span: Span


@attrs.frozen
class Param:
    """A kernel parameter: direction in/out/inout/atomic_add or 'scalar'."""

    name: str
    direction: str
    dtype: str
    shape: tuple[Expr, ...] | None
    span: Span


@attrs.frozen
class KernelDecl:
    """`[extern] kernel name core [source "path"] (params)`."""

    name: str
    core: str
    source: str | None
    params: tuple[Param, ...]
    extern: bool
    span: Span


@attrs.frozen
class Block:
    """A `{ ... }` statement list."""

    stmts: tuple[Stmt, ...]
    span: Span


@attrs.frozen
class ScopeStmt:
    """`auto|manual scope [ring N] { ... }`: a runtime PTO2_SCOPE."""

    mode: str
    ring: int | None
    block: Block
    span: Span


@attrs.frozen
class CarryItem:
    """`name = init then next` in a loop header."""

    name: str
    init: str
    next: str
    span: Span


@attrs.frozen
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


@attrs.frozen
class PhaseStmt:
    """`phase name { ... }`: groups tasks for reports and pictures (not a scope)."""

    name: str
    block: Block
    span: Span


@attrs.frozen
class InterleaveStmt:
    """`interleave { ... }`: submit the tasks of its declarations round-robin.

    Declarations with the same task index space (same ranges, in order) form one group; a
    group submits index 0 of every member, then index 1, and so on (pypto: one loop whose
    body submits several tasks, e.g. #794's gate/up critical wave). Groups follow each other
    in the order of their first member. Not a scope.
    """

    block: Block
    span: Span


@attrs.frozen
class TaskIds:
    """`taskids a, b`: TaskId arrays of tasks `a`, `b` held in this scope."""

    names: tuple[str, ...]
    span: Span


@attrs.frozen
class Use:
    """`use NAME`: the statements of fragment NAME, spliced in place at lowering.

    Names inside the fragment resolve here, at the use site (loop variables, carries,
    lets and tensors of the enclosing blocks); `span` is the whole statement.
    """

    name: str
    span: Span
    name_span: Span


@attrs.frozen
class Fragment:
    """`fragment NAME { statements }`: a top-level, reusable statement list.

    It is lowered only where a `use` names it, once per use; `name_span` is the name token.
    """

    name: str
    block: Block
    span: Span
    name_span: Span


@attrs.frozen
class Entry:
    """`entry name { ... }`: the orchestration function; its body is scope depth 1."""

    name: str
    block: Block
    span: Span


@attrs.frozen
class TargetItem:
    """`key = expr` inside a target block."""

    key: str
    expr: Expr
    span: Span


@attrs.frozen
class Target:
    """`target a2a3 { task_window = 8192 ... }`: runtime limits overriding the defaults."""

    name: str
    items: tuple[TargetItem, ...]
    span: Span


@attrs.frozen
class Cost:
    """`cost NAME = expr`: per-block cost (µs) of a kernel, or the default of a core shape."""

    name: str
    expr: Expr
    span: Span


Stmt = (TensorDecl | ViewDecl | Let | Assert | ScopeStmt | ForStmt | PhaseStmt | InterleaveStmt | TaskIds | Use
        | Task)
Item = Include | Const | Assert | TensorDecl | ScalarDecl | ViewDecl | KernelDecl | Entry | Target | Cost | Fragment


@attrs.frozen
class Module:
    """One parsed file: its items in order."""

    items: tuple[Item, ...]
    span: Span
