"""Inline allows: each `allow(PGxxx, "reason")` waives the warnings and notes of its codes reported
inside the declaration it stands before (docs/language.md §13.2).

An allow pairs with the next statement of its own list (the items of its file, or the statements
of its block); several allows in a row pair with the same declaration. PG041 (the frontend's:
the text alone shows it) when an allow names a code that is not one, gives an empty reason, or
stands before no declaration. The waiving itself is the bag's (`DiagnosticBag.waive`, at the
end of the pipeline), which also reports an allow that waived nothing (PG042).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from pgraph.diagnostics import RULES, DiagnosticBag, Waiver
from pgraph.frontend import ast
from pgraph.suggest import closest

__all__ = ["DECLARATIONS", "check_allows", "inline_waivers"]

#: What an allow may stand before: the statements that declare a task, a tensor, a kernel, a
#: constant, a budget, a cost or target setting, or a scope (a scope statement or a loop, whose
#: body is a scope).
DECLARATIONS = (ast.Task, ast.TensorDecl, ast.ScalarDecl, ast.ViewDecl, ast.KernelDecl, ast.KernelAlias,
                ast.KernelTable, ast.Const, ast.Budget, ast.Cost, ast.Target, ast.ScopeStmt, ast.ForStmt)

#: The words of DECLARATIONS as a message lists them.
DECLARATION_WORDS = ("a task, tensor, scalar, view, kernel, kernels table, const, budget, cost, target, "
                     "scope or for loop")


def _lists(items: Sequence[ast.Item]) -> Iterator[Sequence[object]]:
    """The statement lists of a loaded program: the top-level items, and every block's statements."""
    yield items
    todo: list[ast.Block] = [i.block for i in items if isinstance(i, (ast.Entry, ast.Fragment))]
    while todo:
        block = todo.pop()
        yield block.stmts
        todo.extend(s.block for s in block.stmts
                    if isinstance(s, (ast.ScopeStmt, ast.ForStmt, ast.PhaseStmt, ast.InterleaveStmt)))


def _pairs(items: Sequence[ast.Item]) -> Iterator[tuple[ast.Allow, object | None]]:
    """Each allow and the statement it stands before (None: the end of its list, or a statement of
    another file: the loader splices included files into one item list)."""
    for stmts in _lists(items):
        pending: list[ast.Allow] = []
        for s in stmts:
            if isinstance(s, ast.Allow):
                pending.append(s)
                continue
            for a in pending:
                same_file = getattr(s, "span", None) is not None and s.span.filename == a.span.filename  # type: ignore[attr-defined]
                yield a, s if same_file else None
            pending = []
        for a in pending:
            yield a, None


def check_allows(items: Sequence[ast.Item], bag: DiagnosticBag) -> None:
    """PG041 for every allow that names an unknown code, has an empty reason or stands before no
    declaration."""
    for a, target in _pairs(items):
        for code, span in zip(a.codes, a.code_spans or (a.span,) * len(a.codes)):
            if code not in RULES:
                near = closest(code, list(RULES))
                bag.add("PG041", f"`allow` names '{code}', which is not a diagnostic code", span,
                        hint=(f"did you mean '{near}'? " if near else "") + "codes are PG followed by three digits "
                        "(`pgraph explain CODE`, docs/rules.md)")
        if not a.reason.strip():
            bag.add("PG041", "an `allow` needs a reason: say why the diagnostic does not apply here", a.span,
                    hint=f'write `allow({", ".join(a.codes)}, "why this is intended")`')
        if not isinstance(target, DECLARATIONS):
            what = "the end of its block" if target is None else f"a `{_word(target)}` statement"
            bag.add("PG041", f"an `allow` must stand before a declaration, not before {what}", a.span,
                    hint=f"put it on the line above {DECLARATION_WORDS} whose diagnostic it waives")


def _word(stmt: object) -> str:
    """The keyword of a statement that is no declaration (for the PG041 message)."""
    return {ast.Include: "include", ast.Assert: "assert", ast.Let: "let", ast.Use: "use", ast.TaskIds: "taskids",
            ast.PhaseStmt: "phase", ast.InterleaveStmt: "interleave", ast.Entry: "entry",
            ast.Fragment: "fragment"}.get(type(stmt), type(stmt).__name__.lower())


def inline_waivers(items: Sequence[ast.Item]) -> list[Waiver]:
    """The waivers of the well-formed allows (each with the span of its declaration), in text order."""
    out = []
    for a, target in _pairs(items):
        if isinstance(target, DECLARATIONS) and a.reason.strip() and all(c in RULES for c in a.codes):
            deferred = isinstance(target, ast.Budget) and target.figure == "sim_us"
            out.append(Waiver(a.codes, a.reason, a.span, target.span, deferred))
    return out
