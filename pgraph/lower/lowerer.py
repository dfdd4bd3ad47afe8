"""Lower the loaded files to the Program IR: constants, overrides, declarations, the entry body.

`lower()` resolves every name and folds every constant; diagnostics are appended to the
bag and lowering goes on past an error where it can, so one run reports as much as possible.
It returns None when resolution failed; the checks of the resolved Program run afterwards
(`pgraph.pipeline`, `pgraph.plan`).
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from pgraph.diagnostics import DiagnosticBag, Note
from pgraph.frontend import ast
from pgraph.frontend.loader import Loaded
from pgraph.frontend.overrides import Override
from pgraph.ir import program as ir
from pgraph.kinds import DepKind, NodeKind, ScopeKind, ScopeMode, unhandled
from pgraph.lower import decls
from pgraph.lower.context import Env, LowerContext, Where
from pgraph.lower.fragments import choose_entry
from pgraph.lower.statements import walk
from pgraph.source import Span
from pgraph.suggest import closest

__all__ = ["Override", "lower"]


def lower(loaded: Loaded, bag: DiagnosticBag, overrides: Iterable[Override] = ()) -> ir.Program | None:
    """The Program of `loaded` with `overrides` applied, or None when a name does not resolve."""
    ctx = LowerContext(loaded, bag, overrides)
    bag.note_hooks.append(ctx.fragments.notes)
    declare_constants(ctx)
    entries = declare_items(ctx)
    entry = select_entry(ctx, entries)
    if entry is None:
        if not bag.has_errors:
            ctx.err("PG002", "the spec declares no `entry`", Span(loaded.root, 1, 1, 1, 1),
                    hint="add `entry NAME { ... }` holding the orchestration body")
        return None
    root = ctx.new_scope(ScopeMode.AUTO, None, ScopeKind.ENTRY, entry.span, block_span=entry.block.span,
                         depth=1 if entry.scoped else 0)
    tree = ctx.open_node(NodeKind.SCOPE, root, "front")
    walk(ctx, entry.block, Where(root, Env({}), None, ()))
    ctx.close_node()
    decls.finish_carries(ctx)
    decls.finish_costs(ctx)
    decls.check_taskids_names(ctx)
    check_dep_names(ctx)
    if bag.has_errors:
        return None
    for sid, names in ctx.taskids.items():
        ctx.scopes[sid] = attrs.evolve(ctx.scopes[sid], taskids=tuple(names))
    return ir.Program(
        entry=entry.name, entry_span=entry.span, consts=ctx.consts, tensors=ctx.tensors, scalars=ctx.scalars,
        kernels=ctx.kernels, scopes=tuple(ctx.scopes), loops=tuple(ctx.loops), tilesets=ctx.tilesets,
        dispatches=tuple(ctx.dispatches), phases=tuple(ctx.phases), carries=ctx.carries, target=ctx.target,
        costs=ctx.costs, asserts=tuple(ctx.asserts), target_items=tuple(ctx.target_items),
        cost_items=tuple(ctx.cost_items), budgets=tuple(ctx.budgets), overridden=tuple(sorted(ctx.overrides)), interleaves=tuple(ctx.interleaves), kernel_tables=ctx.kernel_tables,
        tree=ctx.finish_tree(tree),
    )


def declare_constants(ctx: LowerContext) -> None:
    """Every `const` (PG003 twice), every override (PG017 for an unknown name), then fold them all."""
    for item in ctx.loaded.items:
        if isinstance(item, ast.Const):
            if item.name in ctx.const_decls:
                ctx.dup(item.name, item.span, ctx.const_decls[item.name].span, "constant")
            else:
                ctx.const_decls[item.name] = item
    for name, ov in ctx.overrides.items():
        if name not in ctx.const_decls:
            known = ", ".join(sorted(ctx.const_decls)[:6])
            guess = closest(name, ctx.const_decls)
            ctx.err("PG017", f"{ov.origin} overrides '{name}', which the spec does not declare", ov.span,
                    hint=f"did you mean '{guess}'?" if guess else f"declared constants include: {known}, ...")
    for item in ctx.loaded.items:
        if isinstance(item, ast.Const):
            ctx.const_value(item.name)


def declare_items(ctx: LowerContext) -> list[ast.Entry]:
    """The top-level declarations, in file order; returns the first entry of each file."""
    entries: dict[str, ast.Entry] = {}
    for item in ctx.loaded.items:
        match item:
            case ast.Const() | ast.Include():
                pass  # folded above / spliced by the loader
            case ast.Allow():
                pass  # diagnostics only (pgraph.frontend.allows)
            case ast.Assert():
                decls.lower_assert(ctx, item, Env({}))
            case ast.TensorDecl():
                decls.declare_tensor(ctx, item, None, ())
            case ast.ScalarDecl():
                decls.declare_scalar(ctx, item)
            case ast.ViewDecl():
                decls.declare_view(ctx, item, Env({}), None)
            case ast.KernelDecl():
                decls.declare_kernel(ctx, item)
            case ast.KernelAlias() | ast.KernelTable():
                pass  # below, once every kernel is declared
            case ast.Target():
                decls.declare_target(ctx, item)
            case ast.Cost():
                ctx.cost_decls.append(item)
            case ast.Budget():
                decls.declare_budget(ctx, item)
            case ast.Fragment():
                first = ctx.fragments.decls.get(item.name)
                if first is not None:
                    ctx.dup(item.name, item.name_span, first.name_span, "fragment")
                else:
                    ctx.fragments.decls[item.name] = item
            case ast.Entry():
                if item.span.filename in entries:
                    ctx.dup(item.name, item.span, entries[item.span.filename].span, "entry")
                else:
                    entries[item.span.filename] = item
            case _:
                unhandled(item)
    for item in ctx.loaded.items:
        if isinstance(item, ast.KernelAlias):
            decls.declare_alias(ctx, item)
    for item in ctx.loaded.items:
        if isinstance(item, ast.KernelTable):
            decls.declare_table(ctx, item)
    return list(entries.values())


def select_entry(ctx: LowerContext, entries: list[ast.Entry]) -> ast.Entry | None:
    """The root file's entry, else the only entry of an included file; PG034 when several."""
    choice = choose_entry(entries, ctx.loaded.root.display)
    if not choice.ambiguous:
        return choice.entry
    chains = [ctx.loaded.include_chain.get(e.span.filename, ()) for e in choice.ambiguous]
    span = chains[1][0] if chains[1] else Span(ctx.loaded.root, 1, 1, 1, 1)
    files = ", ".join(e.span.filename for e in choice.ambiguous)
    ctx.err("PG034", f"the root file declares no entry, and {len(choice.ambiguous)} included files do ({files})",
            span, [Note(f"entry '{e.name}' is declared here", e.span) for e in choice.ambiguous],
            hint="declare the entry in the root file: it overrides the entries of included files")
    return None


def check_dep_names(ctx: LowerContext) -> None:
    """PG002/PG019 for deps naming no task (where the task's TaskId is visible is PG014, pgraph.plan)."""
    for d in ctx.dispatches:
        for dep in d.deps:
            if dep.kind is DepKind.TILES and dep.target not in ctx.tilesets:
                decls.unknown_dep(ctx, d.name, dep)
