"""Lower task declarations: index spaces, waves, deps, kernel calls, regions and accesses.

Names are resolved here (tensors, kernels, index variables, tasks a dep names); what the
resolved declaration means is checked in `pgraph.plan` (argument counts, directions,
dtypes and shapes, wave coverage, region ranks, negative ranges) and its form (an `at`
without an index space, one call per task) in `pgraph.lower.forms`.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from pgraph.diagnostics import Note
from pgraph.expr import Expr, free_vars, has_runtime
from pgraph.findings import BlockKernelIndex, KernelTakesNoIndex, TableNeedsIndex
from pgraph.frontend import ast
from pgraph.ir import program as ir
from pgraph.kinds import DIRECTION_ACCESSES, DepKind, Flag, NodeKind, TaskKind, unhandled
from pgraph.lower.context import Env, LowerContext, Where, respell
from pgraph.source import Span
from pgraph.suggest import closest

#: (wave name, task axes, block axes, wave flags, wave deps, span) of one dispatch of a task.
WaveSpec = tuple[str | None, list[ir.IAxis], list[ir.IAxis], tuple[Flag, ...], tuple[ast.Dep, ...], Span]


def axes(ctx: LowerContext, decl: Iterable[ast.Axis], env: Env) -> list[ir.IAxis] | None:
    """Fold index axes (`i in lo..hi`); a negative range is reported by pgraph.plan (PG006)."""
    out = []
    for a in decl:
        lo = ctx.fold_int(a.lo, env, "an index bound")
        hi = ctx.fold_int(a.hi, env, "an index bound")
        if lo is None or hi is None:
            return None
        out.append(ir.IAxis(a.var, lo, hi, a.span))
    return out


#: What a bound `call` lowers to: kernel (a table's first member), args, accesses, call site,
#: kernels table and index (None for a plain call).
Bound = tuple[str, list[ir.Arg], list[ir.Access], ir.CallSite, str | None, Expr | None]


def lower_task(ctx: LowerContext, t: ast.Task, where: Where) -> None:
    """Lower one task declaration into its TileSet and Dispatches (one per wave of a `tiles`)."""
    if t.name in ctx.tilesets or t.name in ctx.carries:
        first = ctx.tilesets.get(t.name) or ctx.carries.get(t.name)
        ctx.dup(t.name, t.name_span, first.span if first else t.span, "task")
        return
    ctx.failed.add(t.name)  # until its tile set is registered below
    index = axes(ctx, t.axes, where.env)
    if index is None:
        return
    waves = [b for b in t.body if isinstance(b, ast.Wave)] if t.kind is TaskKind.TILES else []
    ctx.tilesets[t.name] = ir.TileSet(t.name, tuple(index), (), where.scope, t.kind, t.name_span,
                                      decl_span=t.span, deps_span=t.deps_span, body_span=t.body_span)
    ctx.failed.discard(t.name)
    local = where.env.child()
    local.variables.update(a.var for a in index)
    body = lower_body(ctx, t, local) if t.kind is not TaskKind.DUMMY else ([], None, ())
    if body is None:
        return
    explicit, call, untouched = body
    specs: list[WaveSpec]
    wave_decls: list[ir.WaveDecl] = []
    if t.kind is TaskKind.TILES:
        specs, wave_decls = wave_specs(ctx, t, index, waves, local)
    elif t.kind is TaskKind.SPMD:
        specs = [(None, [], index, (), (), t.span)]
    else:
        specs = [(None, index, [], (), (), t.span)]
    wave_calls = {w.name: w.call for w in waves}
    names = []
    wave_flag_spans = {w.name: tuple(zip(w.flags, w.flag_spans)) for w in waves}
    for wave, task_axes, block_axes, wflags, wdeps, span in specs:
        name = f"{t.name}.{wave}" if wave else t.name
        flags = set(t.flags) | set(wflags)
        kind = t.kind
        if t.kind is TaskKind.TILES:
            kind = TaskKind.SPMD if block_axes else TaskKind.PARALLEL if task_axes else TaskKind.AT
        deps = lower_deps(ctx, (*(t.deps or ()), *wdeps), local, task_axes, block_axes, where.loops, name)
        if deps is None:
            continue
        bound: Bound | None = None
        the_call = (wave_calls.get(wave) if wave else None) or call
        if t.kind is not TaskKind.DUMMY:
            if the_call is None:
                continue  # a missing call is PG028 (lower.forms)
            bound = lower_call(ctx, the_call, local, explicit, untouched, task_axes, block_axes, where.loops)
            if bound is None:
                continue
        kernel, args, accesses, site, table, kindex = bound or (None, [], [], None, None, None)
        ctx.dispatches.append(ir.Dispatch(
            name=name, tileset=t.name, wave=wave, kind=kind, task_axes=tuple(task_axes),
            block_axes=tuple(block_axes), accesses=tuple(accesses), kernel=kernel, args=tuple(args),
            early=Flag.EARLY in flags, sync_start=Flag.SYNC_START in flags, deps=deps, scope=where.scope,
            phase=where.phase, order=len(ctx.dispatches), loops=where.loops, span=span if wave else t.span,
            interleave=where.interleave, call=site, kernel_table=table, kernel_index=kindex,
            untouched=untouched,
            flag_spans=(*zip(t.flags, t.flag_spans), *wave_flag_spans.get(wave or "", ())),
        ))
        names.append(name)
        ctx.add_leaf(NodeKind.DISPATCH, name)
    ctx.tilesets[t.name] = attrs.evolve(ctx.tilesets[t.name], dispatches=tuple(names), waves=tuple(wave_decls))


def wave_specs(ctx: LowerContext, t: ast.Task, index: list[ir.IAxis], waves: list[ast.Wave],
               env: Env) -> tuple[list[WaveSpec], list[ir.WaveDecl]]:
    """The dispatches of a `tiles` declaration: each wave's tile box split into task and block axes.

    A wave outside the tile space or waves that overlap or leave tiles uncovered are
    reported by pgraph.plan (PG026, PG021) from the recorded WaveDecls.
    """
    out: list[WaveSpec] = []
    decls: list[ir.WaveDecl] = []
    by_var = {a.var: a for a in index}
    for w in waves:
        sub = axes(ctx, w.axes, env)
        if sub is None:
            continue
        restricted = dict(by_var)
        bad = False
        for a in sub:
            if a.var not in by_var:
                ctx.err("PG002", f"wave '{w.name}' restricts '{a.var}', which is not an index of '{t.name}'", a.span)
                bad = True
            else:
                restricted[a.var] = a
        spmd_vars = set(w.spmd_axes) if w.spmd_axes is not None else set(by_var) if w.kind is TaskKind.SPMD else set()
        for v in sorted(spmd_vars - set(by_var)):
            ctx.err("PG002", f"wave '{w.name}' names SPMD index '{v}', which is not an index of '{t.name}'", w.span)
            bad = True
        if bad:
            continue
        box = [restricted[a.var] for a in index]
        decls.append(ir.WaveDecl(w.name, tuple(box), w.span))
        task_axes = [a for a in box if a.var not in spmd_vars]
        block_axes = [a for a in box if a.var in spmd_vars]
        out.append((w.name, task_axes, block_axes, w.flags, w.deps or (), w.span))
    return out, decls


def lower_deps(ctx: LowerContext, deps: Iterable[ast.Dep], env: Env, task_axes: list[ir.IAxis],
               block_axes: list[ir.IAxis], loops: tuple[int, ...], consumer: str) -> tuple[ir.DepRef, ...] | None:
    """Resolve deps: a TaskId carry, or tiles of a tile set (the name is checked at the end of lowering)."""
    out = []
    allowed = {a.var for a in task_axes} | {a.var for a in block_axes} | {ctx.loops[lp].axis.var for lp in loops}
    ok = True
    for dep in deps:
        if ctx.task_carry(dep.name):
            carried = tuple(ir.DepSel(s.kind, s.a, s.b, s.span) for s in dep.sels) if dep.sels else None
            out.append(ir.DepRef(dep.name, DepKind.CARRY, carried, dep.span))  # a selection is PG020
            continue
        sels = []
        for sel in dep.sels or ():
            parts: list[Expr | None] = []
            for e in (sel.a, sel.b):
                if e is None:
                    parts.append(None)
                    continue
                folded = ctx.fold(e, env)
                if folded is None:
                    ok = False
                    parts.append(None)
                    continue
                if has_runtime(folded):
                    ctx.runtime_err(e, "a dep selection")
                    ok = False
                    parts.append(None)
                    continue
                used = free_vars(folded) - allowed
                if used:
                    ctx.err("PG002", f"'{sorted(used)[0]}' is not defined here", e.span)
                    ok = False
                parts.append(folded)
            sels.append(ir.DepSel(sel.kind, parts[0], parts[1], sel.span))
        out.append(ir.DepRef(dep.name, DepKind.TILES, tuple(sels) if dep.sels else None, dep.span))
    return tuple(out) if ok else None


def lower_body(ctx: LowerContext, t: ast.Task, env: Env
               ) -> tuple[list[ir.Access], ast.Call | None, tuple[tuple[str, Span], ...]] | None:
    """Lets, access clauses, `untouched`, item loops and the call of a task body (the first call:
    PG003 for more). The call is bound per dispatch (`lower_call`), since a wave may have its own."""
    explicit: list[ir.Access] = []
    untouched: list[tuple[str, Span]] = []
    call: ast.Call | None = None
    ok = True
    for item in t.body:
        match item:
            case ast.Let():
                folded = None if ctx.let_shadows(item, env) else ctx.fold(item.expr, env)
                if folded is None:
                    ok = False
                    if item.name not in env.variables:
                        env.failed.add(item.name)
                else:
                    env.values[item.name] = folded
            case ast.Access():
                for r in item.regions:
                    reg = region(ctx, r, env)
                    ok = ok and reg is not None
                    if reg is not None:
                        explicit.append(ir.Access(item.kind, reg, (), r.span, explicit=True))
            case ast.Untouched():
                for name in item.names:
                    if ctx.tensor_type(name) is not None:
                        untouched.append((name, item.span))
                    elif name not in ctx.failed:
                        guess = closest(name, [*ctx.tensors, *ctx.carry_types])
                        ctx.err("PG002", f"'{name}' is not a declared tensor (`untouched` names tensors the kernel "
                                "is passed)", item.span, hint=f"did you mean '{guess}'?" if guess else None)
                        ok = False
            case ast.ItemLoop():
                got = item_loop(ctx, item, env)
                ok = ok and got is not None
                explicit.extend(got or [])
            case ast.Call():
                call = call or item
            case ast.Wave():
                pass  # waves are lowered by wave_specs
            case _:
                unhandled(item)
    if not ok:
        return None
    return explicit, call, tuple(untouched)


def lower_call(ctx: LowerContext, call: ast.Call, env: Env, explicit: list[ir.Access],
               untouched: tuple[tuple[str, Span], ...], task_axes: list[ir.IAxis], block_axes: list[ir.IAxis],
               loops: tuple[int, ...]) -> Bound | None:
    """Resolve one `call` for one dispatch: the kernel (or table and index), bound arguments, accesses."""
    table: ir.KernelTable | None = ctx.kernel_tables.get(call.kernel)
    index: Expr | None = None
    kernel = ctx.kernels.get(call.kernel)
    if call.kernel in ctx.failed:
        return None
    if table is not None:
        if call.index is None:
            ctx.bag.found(TableNeedsIndex(span=call.span, table=call.kernel, size=len(table.members),
                                          declared=table.span))  # the planner's PG039
            return None
        index = ctx.fold(call.index, env)
        if index is None:
            return None
        if has_runtime(index):
            ctx.runtime_err(call.index, "a kernel index")
            return None
        allowed = {a.var for a in task_axes} | {ctx.loops[lp].axis.var for lp in loops}
        blocks = free_vars(index) & {a.var for a in block_axes}
        if blocks:
            ctx.bag.found(BlockKernelIndex(span=call.index.span, table=call.kernel, var=sorted(blocks)[0]))
            return None
        unknown = free_vars(index) - allowed
        if unknown:
            ctx.err("PG002", f"'{sorted(unknown)[0]}' is not defined here", call.index.span)
            return None
        kernel = ctx.kernels[table.members[0]]
    elif kernel is None:
        guess = closest(call.kernel, [*ctx.kernels, *ctx.kernel_tables])
        at = call.span.file.line(call.span.line).find(call.kernel, call.span.col - 1) + 1
        name_span = attrs.evolve(call.span, col=at, end_line=call.span.line, end_col=at + len(call.kernel))
        ctx.err("PG002", f"kernel '{call.kernel}' is not declared", call.span,
                hint=f"did you mean '{guess}'?" if guess else "declare it with `kernel NAME aic|aiv|mix (params)`",
                fix=respell(name_span, call.kernel, guess) if at > 0 and _arity(ctx, guess) == len(call.args) else None)
        return None
    elif call.index is not None:
        ctx.bag.found(KernelTakesNoIndex(span=call.index.span, kernel=call.kernel))
        return None
    site = ir.CallSite(kernel.name, len(call.args), call.span)
    tname = table.name if table is not None else None
    if len(call.args) != len(kernel.params):
        return kernel.name, [], list(explicit), site, tname, index  # PG009 (pgraph.plan): nothing to bind
    args = bind_args(ctx, call, kernel, env)
    if args is None:
        return None
    return kernel.name, args, accesses_for(ctx, args, explicit, untouched), site, tname, index


def item_loop(ctx: LowerContext, item: ast.ItemLoop, env: Env) -> list[ir.Access] | None:
    """`for it in lo..hi { reads ... }` in a task body: accesses over every value of `it`."""
    ax = axes(ctx, [item.axis], env)
    if ax is None:
        return None
    inner = env.child()
    inner.variables.add(item.axis.var)
    out: list[ir.Access] = []
    items = (ir.ItemAxis(ax[0].var, ax[0].lo, ax[0].hi, ax[0].span),)
    for sub in item.items:
        if isinstance(sub, ast.Let):
            folded = None if ctx.let_shadows(sub, inner) else ctx.fold(sub.expr, inner)
            if folded is None:
                return None
            inner.values[sub.name] = folded
        elif isinstance(sub, ast.Access):
            for r in sub.regions:
                reg = region(ctx, r, inner)
                if reg is None:
                    return None
                out.append(ir.Access(sub.kind, reg, items, r.span, explicit=True))
        # anything else is PG019 (lower.forms)
    return out


def region(ctx: LowerContext, r: ast.Region, env: Env) -> ir.RegionRef | None:
    """Resolve a region's tensor and index tensors and fold its slices (the rank is PG020's)."""
    t = ctx.tensor_type(r.tensor)
    if t is None and r.tensor in ctx.failed:
        return None
    if t is None:
        what = "a task" if r.tensor in ctx.tilesets else "not declared"
        ctx.err("PG019" if r.tensor in ctx.tilesets else "PG002", f"'{r.tensor}' is {what}; a region needs a tensor",
                r.span)
        return None
    for idx in r.indirect or ():
        if idx not in ctx.tensors:
            ctx.err("PG002", f"indirect index tensor '{idx}' is not declared", r.span)
            return None
    if r.slices is None:
        return ir.RegionRef(r.tensor, None, r.indirect, r.span)
    dims = []
    for s in r.slices:
        a = ctx.fold(s.a, env) if s.a is not None else None
        b = ctx.fold(s.b, env) if s.b is not None else None
        if (s.a is not None and a is None) or (s.b is not None and b is None):
            return None
        dims.append(ir.Dim(s.kind, a, b))
    return ir.RegionRef(r.tensor, tuple(dims), r.indirect, r.span)


def bind_args(ctx: LowerContext, call: ast.Call, kernel: ir.Kernel, env: Env) -> list[ir.Arg] | None:
    """Bind each argument to its parameter by position (the counts match)."""
    args = []
    ok = True
    for arg, param in zip(call.args, kernel.params):
        got = bind_arg(ctx, arg, param, kernel, env)
        if got is None:
            ok = False
        else:
            args.append(got)
    return args if ok else None


def bind_arg(ctx: LowerContext, arg: ast.Expr | ast.Region, param: ir.Param, kernel: ir.Kernel,
             env: Env) -> ir.Arg | None:
    """Resolve one argument: a tensor region for a tensor parameter, a scalar expression for a scalar.

    PG019 when the argument is the other kind of thing; dtype and shape are pgraph.plan's.
    """
    span = arg.span
    note = [Note(f"parameter '{param.name}' declared here", param.span)]
    if isinstance(arg, ast.Name) and arg.id in ctx.failed:
        return None
    is_tensor_name = isinstance(arg, ast.Name) and ctx.tensor_type(arg.id) is not None
    if not param.is_tensor:
        if isinstance(arg, ast.Region) or is_tensor_name:
            ctx.err("PG019", f"parameter '{param.name}' of '{kernel.name}' is a scalar, got a tensor", span, note)
            return None
        scalar_env = env.child()
        scalar_env.variables.update(ctx.scalars)
        folded = ctx.fold(arg, scalar_env)
        return None if folded is None else ir.Arg(param, None, folded, span)
    if isinstance(arg, ast.Name) and is_tensor_name:
        arg = ast.Region(arg.id, None, None, arg.span)
    if isinstance(arg, ast.Name) and not known_value(ctx, arg.id, env) and arg.id not in ctx.tilesets:
        guess = closest(arg.id, [*ctx.tensors, *ctx.carry_types])
        ctx.err("PG002", f"'{arg.id}' is not declared (parameter '{param.name}' of '{kernel.name}' takes a "
                "tensor)", span, note, hint=f"did you mean '{guess}'?" if guess else
                "declare the tensor (`tensor NAME : dtype[shape]`) before the task",
                fix=respell(span, arg.id, guess))
        return None
    if not isinstance(arg, ast.Region):
        ctx.err("PG019", f"parameter '{param.name}' of '{kernel.name}' is a tensor, got an expression", span, note)
        return None
    reg = region(ctx, arg, env)
    return None if reg is None else ir.Arg(param, reg, None, span)


def known_value(ctx: LowerContext, name: str, env: Env) -> bool:
    """True when `name` is a constant, a let, an index/loop variable or a scalar argument."""
    return name in ctx.const_decls or name in env.values or name in env.variables or name in ctx.scalars


def accesses_for(ctx: LowerContext, args: list[ir.Arg], explicit: list[ir.Access],
                 untouched: tuple[tuple[str, Span], ...] = ()) -> list[ir.Access]:
    """The explicit access clauses, plus the accesses each parameter direction implies for a
    tensor the body neither states nor marks `untouched` (a clause on a tensor not passed is
    pgraph.plan's PG010)."""
    explicit_roots = {ctx.root_of(a.region.tensor) for a in explicit} | {ctx.root_of(n) for n, _ in untouched}
    out = list(explicit)
    for arg in args:
        if arg.region is None or ctx.root_of(arg.region.tensor) in explicit_roots:
            continue
        for kind in DIRECTION_ACCESSES[arg.param.direction]:
            out.append(ir.Access(kind, arg.region, (), arg.span))
    return out


def _arity(ctx: LowerContext, name: str | None) -> int | None:
    """The parameter count of kernel (or kernel table) `name`; None when it is neither. A PG002
    respelling is a machine fix only when the call then passes the kernel's count (else the fix
    would trade PG002 for PG009)."""
    if name is None:
        return None
    if name in ctx.kernel_tables:
        name = ctx.kernel_tables[name].members[0]
    kernel = ctx.kernels.get(name)
    return None if kernel is None else len(kernel.params)
