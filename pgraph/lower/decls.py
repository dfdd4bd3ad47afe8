"""Lower declarations: tensors, scalars, views, kernels, target limits, costs, asserts, carries."""

from __future__ import annotations

from collections.abc import Iterable

from pgraph.diagnostics import Note
from pgraph.expr import has_runtime
from pgraph.frontend import ast
from pgraph.ir import program as ir
from pgraph.ir.limits import A2A3_DEFAULTS, COMPAT_KEYS, DEFAULT_COSTS
from pgraph.kinds import BUDGET_FIGURES, CarryKind, Storage
from pgraph.lower.context import Env, LowerContext, respell
from pgraph.source import Span
from pgraph.suggest import closest


def shape(ctx: LowerContext, dims: Iterable[ast.Expr], env: Env) -> tuple[int, ...] | None:
    """Fold every dimension to an integer (a negative or huge one is a check's business)."""
    out = []
    for d in dims:
        v = ctx.fold_int(d, env, "a shape dimension")
        if v is None:
            return None
        out.append(v)
    return tuple(out)


def spans(dims: Iterable[ast.Expr]) -> tuple[Span, ...]:
    """Where each dimension expression is written."""
    return tuple(d.span for d in dims)


def name_taken(ctx: LowerContext, name: str, span: Span) -> bool:
    """PG003 when a tensor, scalar or tensor carry of that name exists."""
    for table, what in ((ctx.tensors, "tensor"), (ctx.scalars, "scalar")):
        if name in table:
            ctx.dup(name, span, table[name].span, what)  # type: ignore[attr-defined]
            return True
    carry = ctx.carries.get(name)
    if carry is not None and carry.kind is CarryKind.TENSOR:
        ctx.dup(name, span, carry.span, "carry")
        return True
    return False


def declare_tensor(ctx: LowerContext, item: ast.TensorDecl, scope: int | None, loops: tuple[int, ...]) -> None:
    """An `external` tensor is an orchestration argument (top level only: lower.forms); any
    other is an allocation of the scope it stands in (hoisted out of manual scopes)."""
    if name_taken(ctx, item.name, item.span):
        return
    dims = shape(ctx, item.shape, Env({}))
    if dims is None:
        ctx.failed.add(item.name)
        return
    if item.external and item.manual_dep:
        ctx.err("PG036", f"`manual_dep` on external tensor '{item.name}': an orchestration argument is made "
                "by the caller, not by a TensorCreateInfo, so the flag has no creation to mark; drop it",
                item.span)
    if item.external:
        index = sum(1 for t in ctx.tensors.values() if t.storage is Storage.EXTERNAL)
        ctx.tensors[item.name] = ir.Tensor(item.name, item.dtype, dims, Storage.EXTERNAL, item.span,
                                           None, scope, None, index, (), spans(item.shape), tuple(item.runtime))
        return
    if scope is None:   # a top-level tensor that is not external: PG019 (lower.forms reports it)
        ctx.failed.add(item.name)
        return
    # a loop inside a manual scope allocates nothing: its tensors are hoisted, with the manual
    # scope's, before that scope (pypto EmitBatchedAllocTensors), so one buffer serves every iteration
    loops = tuple(lid for lid in loops if not ctx.in_manual(ctx.loops[lid].parent_scope))
    heap = ctx.alloc_scope(scope)
    ctx.tensors[item.name] = ir.Tensor(item.name, item.dtype, dims, Storage.ALLOC, item.span,
                                       heap, scope, None, None, loops, spans(item.shape), created=item.created,
                                       manual_dep=item.manual_dep)
    assert heap is not None and scope is not None
    group = scope if scope != heap and ctx.in_manual(scope) else heap
    ctx.alloc_site((heap, group, loops))


def declare_scalar(ctx: LowerContext, item: ast.ScalarDecl) -> None:
    """An orchestration scalar argument (`orch_args.scalar(j)`)."""
    if name_taken(ctx, item.name, item.span):
        return
    ctx.scalars[item.name] = ir.ScalarArg(item.name, item.dtype, item.span, len(ctx.scalars))


def declare_view(ctx: LowerContext, item: ast.ViewDecl, env: Env, scope: int | None) -> None:
    """`view name = base as [shape]`: a reshape sharing the base's buffer (PG024 checks the size)."""
    if name_taken(ctx, item.name, item.span):
        return
    base = ctx.tensors.get(item.base)
    if base is None:
        ctx.failed.add(item.name)
        carry = ctx.carries.get(item.base)
        if carry is not None and carry.kind is CarryKind.TENSOR:
            # the carry's buffer changes per iteration; a view declared once cannot follow it
            ctx.err("PG002", f"view '{item.name}' names tensor carry '{item.base}', whose buffer changes "
                    "from one iteration to the next", item.span, [Note("the carry is declared here", carry.span)],
                    hint=f"carry the views instead: declare `view {carry.init}_v = {carry.init} as [...]` and "
                    f"`view {carry.next}_v = {carry.next} as [...]` before the loop and add "
                    f"`{item.name} = {carry.init}_v then {carry.next}_v` to its carries")
        elif item.base not in ctx.failed:
            ctx.err("PG002", f"view '{item.name}' names unknown tensor '{item.base}'", item.span)
        return
    dims = shape(ctx, item.shape, env)
    if dims is None:
        ctx.failed.add(item.name)
        return
    ctx.tensors[item.name] = ir.Tensor(item.name, base.dtype, dims, Storage.VIEW, item.span,
                                       base.scope, scope, base.root, None, base.loops, spans(item.shape))


def kernel_name_taken(ctx: LowerContext, name: str, span: Span) -> bool:
    """PG003 when a kernel or a kernels table of that name exists (one namespace)."""
    first = ctx.kernels.get(name) or ctx.kernel_tables.get(name)
    if first is None:
        return False
    ctx.dup(name, span, first.span, "kernel")
    return True


def declare_kernel(ctx: LowerContext, item: ast.KernelDecl) -> None:
    """A kernel signature; parameter order and duplicate names are checked by lower.forms."""
    if kernel_name_taken(ctx, item.name, item.span):
        return
    params: list[ir.Param] = []
    for p in item.params:
        dims = shape(ctx, p.shape, Env({})) if p.shape is not None else None
        params.append(ir.Param(p.name, p.direction, p.dtype, dims, p.span, spans(p.shape or ())))
    ctx.kernels[item.name] = ir.Kernel(item.name, item.core, item.source, tuple(params), item.extern, item.span,
                                       includes=tuple(item.includes))


def declare_alias(ctx: LowerContext, item: ast.KernelAlias) -> None:
    """`kernel B, C = A [source "..."]`: new kernels with A's core, parameters and body (after
    every `kernel` declaration, so A may be declared anywhere, or be an alias itself)."""
    base = ctx.kernels.get(item.base)
    if base is None:
        if item.base in ctx.kernel_tables:
            ctx.err("PG019", f"'{item.base}' is a kernels table; an alias names one kernel", item.span)
        else:
            guess = closest(item.base, ctx.kernels)
            ctx.err("PG002", f"kernel '{item.base}' is not declared (aliased by {', '.join(item.names)})", item.span,
                    hint=f"did you mean '{guess}'?" if guess else "declare it with `kernel NAME aic|aiv|mix (params)`")
        ctx.failed.update(item.names)
        return
    for name, span in zip(item.names, item.name_spans or (item.span,) * len(item.names)):
        if kernel_name_taken(ctx, name, span):
            continue
        source = item.source if item.source is not None else (base.source if base.extern else None)
        ctx.kernels[name] = ir.Kernel(name, base.core, source, base.params, base.extern, span,
                                      alias_of=base.body, includes=base.includes)


def declare_table(ctx: LowerContext, item: ast.KernelTable) -> None:
    """`kernels T = [A, B, ...]`: a table of declared kernels (their signatures are PG039's)."""
    if kernel_name_taken(ctx, item.name, item.span):
        return
    ok = True
    for m in item.members:
        if m in ctx.kernels or m in ctx.failed:
            continue
        ok = False
        what = "a kernels table" if m in ctx.kernel_tables else "not a declared kernel"
        guess = closest(m, ctx.kernels)
        ctx.err("PG002" if m not in ctx.kernel_tables else "PG019", f"'{m}' in kernels table '{item.name}' is {what}",
                item.span, hint=f"did you mean '{guess}'?" if guess else "a table lists kernels")
    if ok:
        ctx.kernel_tables[item.name] = ir.KernelTable(item.name, item.members, item.span)
    else:
        ctx.failed.add(item.name)


def declare_target(ctx: LowerContext, item: ast.Target) -> None:
    """`target a2a3 { key = value ... }`: runtime limits replacing the a2a3 defaults."""
    for ti in item.items:
        if ti.key not in A2A3_DEFAULTS and ti.key not in COMPAT_KEYS:
            ctx.err("PG002", f"unknown target limit '{ti.key}'", ti.span,
                    hint="known limits: " + ", ".join(sorted(A2A3_DEFAULTS)) + "; compatibility: "
                         + ", ".join(sorted(COMPAT_KEYS)))
            continue
        value = ctx.eval_const(ti.expr, "a target limit")
        if value is not None:
            ctx.target_items.append(ir.Setting(ti.key, value, ti.span))
            ctx.target[ti.key] = value


def finish_costs(ctx: LowerContext) -> None:
    """`cost NAME = N` lines, resolved once every kernel is declared."""
    for c in ctx.cost_decls:
        if c.name not in ctx.kernels and c.name not in DEFAULT_COSTS:
            ctx.err("PG002", f"cost names '{c.name}', which is neither a kernel nor a core shape", c.span,
                    hint="write `cost KERNEL = N` or `cost aic|aiv|mix|dummy = N` (µs per block wave)")
            continue
        value = ctx.eval_const(c.expr, "a cost")
        if value is not None:
            ctx.cost_items.append(ir.Setting(c.name, value, c.span))
            ctx.costs[c.name] = value


def declare_budget(ctx: LowerContext, b: ast.Budget) -> None:
    """`budget FIGURE <= N`: PG002 for a figure pgraph does not compute, PG003 for a second
    budget of one figure; the limit folds to a constant. Only the root file's budgets count:
    a variant that includes the HEAD spec for its fragments is another graph, with budgets of
    its own (or none)."""
    if b.span.filename != ctx.loaded.root.display:
        return
    if b.figure not in BUDGET_FIGURES:
        near = closest(b.figure, BUDGET_FIGURES)
        ctx.err("PG002", f"budget names '{b.figure}', which is not a figure of the plan", b.span,
                hint=(f"did you mean '{near}'? " if near else "") + "the figures: " + ", ".join(BUDGET_FIGURES))
        return
    first = next((x for x in ctx.budgets if x.figure == b.figure), None)
    if first is not None:
        ctx.err("PG003", f"a second budget for '{b.figure}'", b.span, [Note("the first one is here", first.span)],
                hint="keep one budget per figure")
        return
    value = ctx.eval_const(b.expr, "a budget")
    if value is not None:
        ctx.budgets.append(ir.Budget(b.figure, value, b.span))


def lower_assert(ctx: LowerContext, item: ast.Assert, env: Env) -> None:
    """Record an assert (folded); pgraph.plan checks it (PG008) and that it uses constants only."""
    folded = ctx.fold(item.expr, env)
    if folded is not None and has_runtime(folded):
        ctx.runtime_err(item.expr, "an assert")
        return
    if folded is not None:
        ctx.asserts.append(ir.AssertStmt(folded, item.expr, item.message, item.span))


def _declared_before(ctx: LowerContext, task: str, at: Span) -> bool:
    """Whether task (or task carry) `task` is declared before `at`, or in another file: a dep
    respelled to a task declared after its consumer would be a dep on a later task (PG032)."""
    decl = ctx.tilesets.get(task) or ctx.carries.get(task)
    if decl is None or decl.span.filename != at.filename:
        return True
    return (decl.span.line, decl.span.col) < (at.line, at.col)


def declare_carry(ctx: LowerContext, c: ast.CarryItem) -> ir.Carry | None:
    """A loop carry `name = init then next`; its kind follows `init` (a task or a tensor)."""
    if c.name in ctx.carries or c.name in ctx.tilesets or c.name in ctx.tensors:
        first = (ctx.carries.get(c.name) or ctx.tilesets.get(c.name) or ctx.tensors.get(c.name))
        ctx.dup(c.name, c.span, first.span if first else c.span, "name")
        return None
    if c.init in ctx.tensors:
        carry = ir.Carry(c.name, CarryKind.TENSOR, c.init, c.next, c.span)
        ctx.carry_types[c.name] = ctx.tensors[c.init]
    elif c.init in ctx.tilesets:
        carry = ir.Carry(c.name, CarryKind.TASK, c.init, c.next, c.span)
    else:
        ctx.err("PG002", f"carry '{c.name}' starts from '{c.init}', which is neither a task nor a tensor "
                "declared before the loop", c.span)
        ctx.failed.add(c.name)  # its uses stay silent
        return None
    ctx.carries[c.name] = carry
    return carry


def finish_carries(ctx: LowerContext) -> None:
    """PG002 for a carry whose `then` names nothing (its kind is checked by pgraph.plan: PG029)."""
    for carry in ctx.carries.values():
        if carry.next not in ctx.tilesets and carry.next not in ctx.tensors:
            what = "task" if carry.kind is CarryKind.TASK else "tensor"
            ctx.err("PG002", f"carry '{carry.name}' starts as {what} '{carry.init}' but continues with "
                    f"'{carry.next}', which is not declared", carry.span)


def check_taskids_names(ctx: LowerContext) -> None:
    """PG002 for `taskids X` naming no task (where it may stand is checked by pgraph.plan: PG014)."""
    for names in ctx.taskids.values():
        for name, span in names:
            if name not in ctx.tilesets:
                ctx.err("PG002", f"taskids names '{name}', which is not a task", span)


def unknown_dep(ctx: LowerContext, consumer: str, dep: ir.DepRef) -> None:
    """A dep naming no task: PG019 when the name is a tensor, kernel or scalar, PG002 otherwise."""
    if dep.target in ctx.failed:
        return
    if dep.target in ctx.tensors or dep.target in ctx.carries:  # tasks and tensors: two namespaces
        ctx.err("PG019", f"deps name tasks, but '{dep.target}' is a tensor", dep.span,
                hint="name the task that writes it; in an auto scope the edge is inferred from the access")
        return
    if dep.target in ctx.kernels or dep.target in ctx.scalars:
        what = "a kernel" if dep.target in ctx.kernels else "a scalar"
        ctx.err("PG019", f"deps name tasks, but '{dep.target}' is {what}", dep.span,
                hint="name the task (at/spmd/parallel/dummy/tiles) that must finish first")
        return
    guess = closest(dep.target, [*ctx.tilesets, *(c for c in ctx.carries if ctx.task_carry(c))])
    ctx.err("PG002", f"'{consumer}' depends on '{dep.target}', which is not a declared task", dep.span,
            hint=f"did you mean '{guess}'?" if guess else
            "deps name tasks declared in the entry (at/spmd/parallel/dummy/tiles) or a task carry",
            fix=respell(dep.span, dep.target, guess) if guess is None or _declared_before(ctx, guess, dep.span) else None)
