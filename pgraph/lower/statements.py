"""Lower the statements of the entry body: scopes, loops and carries, phases, interleave, fragments."""

from __future__ import annotations

import attrs

from pgraph.diagnostics import Note
from pgraph.frontend import ast
from pgraph.ir import program as ir
from pgraph.kinds import NodeKind, ScopeKind, ScopeMode, unhandled
from pgraph.lower import decls
from pgraph.lower.context import MAX_CHAIN, LowerContext, Where, respell
from pgraph.lower.tasks import lower_task
from pgraph.suggest import closest


def walk(ctx: LowerContext, block: ast.Block, where: Where) -> None:
    """Lower every statement of `block` in order (lets extend `where.env` for later statements)."""
    for stmt in block.stmts:
        match stmt:
            case ast.TensorDecl():
                decls.declare_tensor(ctx, stmt, where.scope, where.loops)
            case ast.ViewDecl():
                decls.declare_view(ctx, stmt, where.env, where.scope)
            case ast.Let():
                folded = None if ctx.let_shadows(stmt, where.env) else ctx.fold(stmt.expr, where.env)
                if folded is not None:
                    where.env.values[stmt.name] = folded
                elif stmt.name not in where.env.variables:
                    where.env.failed.add(stmt.name)
            case ast.Assert():
                decls.lower_assert(ctx, stmt, where.env)
            case ast.ScopeStmt():
                walk_scope(ctx, stmt, where)
            case ast.ForStmt():
                walk_for(ctx, stmt, where)
            case ast.PhaseStmt():
                if stmt.name not in ctx.phases:
                    ctx.phases.append(stmt.name)
                walk(ctx, stmt.block, attrs.evolve(where, phase=stmt.name))
            case ast.InterleaveStmt():
                walk_interleave(ctx, stmt, where)
            case ast.TaskIds():
                ctx.taskids.setdefault(where.scope, []).extend((n, stmt.span) for n in stmt.names)
            case ast.Use():
                use_fragment(ctx, stmt, where)
            case ast.Task():
                lower_task(ctx, stmt, where)
            case ast.Allow():
                pass  # diagnostics only (pgraph.frontend.allows)
            case _:
                unhandled(stmt)


def walk_interleave(ctx: LowerContext, stmt: ast.InterleaveStmt, where: Where) -> None:
    """An `interleave` block: its declarations submit round-robin (nesting is PG035, pgraph.plan)."""
    block_id = len(ctx.interleaves)
    ctx.interleaves.append(ir.InterleaveBlock(block_id, stmt.span, where.interleave))
    walk(ctx, stmt.block, attrs.evolve(where, interleave=block_id))


def walk_scope(ctx: LowerContext, stmt: ast.ScopeStmt, where: Where) -> None:
    """An auto or manual scope block (its nesting and stated ring are checked by pgraph.plan)."""
    sid = ctx.new_scope(stmt.mode, where.scope, ScopeKind.BLOCK, stmt.span, stmt.ring, interleave=where.interleave,
                        block_span=stmt.block.span, ring_span=stmt.ring_span)
    ctx.open_node(NodeKind.SCOPE, sid, "before" if stmt.mode is ScopeMode.MANUAL else "front")
    walk(ctx, stmt.block, where.inner(scope=sid))
    ctx.close_node()


def walk_for(ctx: LowerContext, stmt: ast.ForStmt, where: Where) -> None:
    """A scope-level loop: one auto scope per iteration unless `unscoped` or inside a manual scope."""
    lo = ctx.fold_int(stmt.axis.lo, where.env, "a loop bound")
    hi = ctx.fold_int(stmt.axis.hi, where.env, "a loop bound")
    if lo is None or hi is None:
        ctx.failed.update(c.name for c in stmt.carries)  # uses after the loop stay silent
        return
    lid = len(ctx.loops)
    carries = [c for c in (decls.declare_carry(ctx, item) for item in stmt.carries) if c is not None]
    scoped = stmt.scoped and not ctx.in_manual(where.scope)
    body = (ctx.new_scope(ScopeMode.AUTO, where.scope, ScopeKind.LOOP, stmt.span, loop=lid,
                          interleave=where.interleave, block_span=stmt.block.span) if scoped else None)
    ctx.loops.append(ir.Loop(lid, ir.IAxis(stmt.axis.var, lo, hi, stmt.axis.span), tuple(carries), body,
                             where.scope, stmt.span, scoped=scoped, interleave=where.interleave))
    inner = where.inner(scope=body if body is not None else where.scope, loops=(*where.loops, lid))
    inner.env.variables.add(stmt.axis.var)
    # an unscoped loop body allocates in the enclosing scope once per iteration, at its top; a
    # loop in a manual scope allocates nothing (its tensors are hoisted before the manual scope)
    in_manual = ctx.in_manual(where.scope)
    ctx.open_node(NodeKind.LOOP, lid, None if scoped or in_manual else "front")
    if body is not None:
        ctx.open_node(NodeKind.SCOPE, body, "front")
    walk(ctx, stmt.block, inner)
    if body is not None:
        ctx.close_node()
    ctx.close_node()


def use_fragment(ctx: LowerContext, use: ast.Use, where: Where) -> None:
    """Lower the statements of fragment `use.name` here, as if they were written in place of `use`."""
    frag = ctx.fragments.decls.get(use.name)
    if frag is None:
        guess = closest(use.name, ctx.fragments.decls)
        ctx.err("PG002", f"fragment '{use.name}' is not declared", use.name_span,
                hint=f"did you mean '{guess}'?" if guess else
                "declare it at the top level of a file: `fragment NAME { statements }`",
                fix=respell(use.name_span, use.name, guess))
        return
    if len(ctx.fragments.active) >= MAX_CHAIN:  # each `use` recurses; stop before Python's limit
        ctx.err("PG033", f"fragment '{use.name}' is used through a chain of more than {MAX_CHAIN} nested "
                "`use`s", use.span, hint="flatten the fragments: pgraph treats so deep a chain as runaway")
        return
    cycle = ctx.fragments.cycle(use)
    if cycle is not None:
        ctx.err("PG033", f"fragment '{use.name}' uses itself: {' -> '.join(cycle)}", use.span,
                [Note(f"fragment '{use.name}' is declared here", frag.name_span)],
                hint="a `use` splices the fragment in place, so a cycle never ends; remove the `use` "
                     "that closes it")
        return
    with ctx.fragments.expanding(use):
        walk(ctx, frag.block, where)
