"""Shared state of one lowering run: the tables it fills, constant folding, name lookup, diagnostics."""


from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping

import attrs

from pgraph.diagnostics import DiagnosticBag, Note
from pgraph.ir import program as ir
from pgraph.ir.expr import EvalError, evaluate, free_vars, substitute
from pgraph.ir.fragments import FragmentTable
from pgraph.ir.loader import Loaded
from pgraph.source import Span
from pgraph.syntax import ast
from pgraph.target import A2A3_DEFAULTS, DEFAULT_COSTS

MAX_CHAIN = 100


@attrs.frozen
class Override:
    """A constant override from `-D NAME=VALUE` (span None) or a `--config` file."""

    name: str
    expr: ast.Expr
    span: Span | None
    origin: str


class _Env:
    """Names visible in an expression: folded values, and variables left free."""

    def __init__(self, values: Mapping[str, ast.Expr], variables: Iterable[str] = ()) -> None:
        self.values = dict(values)
        self.variables = set(variables)

    def child(self) -> _Env:
        return _Env(self.values, self.variables)


class LowerState:
    """The tables a lowering run fills and the helpers every lowering stage uses.

    `Lowerer` (pgraph.ir.lower) combines it with TaskLowering (task declarations) and
    LoopIdentity (which loops the window expansion may treat as identical).
    """

    def __init__(self, loaded: Loaded, bag: DiagnosticBag, overrides: Iterable[Override] = ()) -> None:
        self.loaded = loaded
        self.bag = bag
        self.overrides = {o.name: o for o in overrides}
        self.const_decls: dict[str, ast.Const] = {}
        self.consts: dict[str, int] = {}
        self._const_busy: set[str] = set()
        self._chain_reported = False
        self.tensors: dict[str, ir.Tensor] = {}
        self.scalars: dict[str, ir.ScalarArg] = {}
        self.kernels: dict[str, ir.Kernel] = {}
        self.scopes: list[ir.Scope] = []
        self.loops: list[ir.Loop] = []
        self.tilesets: dict[str, ir.TileSet] = {}
        self.dispatches: list[ir.Dispatch] = []
        self.phases: list[str] = []
        self.interleave: tuple[int, Span] | None = None   # (id, span) of the enclosing `interleave`
        self.interleave_count = 0
        self.carries: dict[str, ir.Carry] = {}
        self.carry_types: dict[str, ir.Tensor] = {}
        self.taskids: dict[int, list[tuple[str, Span]]] = {}
        self.entry: ast.Entry | None = None
        self.fragments = FragmentTable()
        #: Names whose declaration already failed with an error: later uses stay silent.
        self.failed: set[str] = set()
        self.loop_stack: tuple[int, ...] = ()
        self.target: dict[str, int] = dict(A2A3_DEFAULTS)
        self.costs: dict[str, int] = dict(DEFAULT_COSTS)
        self.cost_items: list[ast.Cost] = []

    # ---- diagnostics ----
    def err(self, code: str, message: str, span: Span | None, notes: Iterable[Note] = (), hint: str | None = None) -> None:
        chain: list[Note] = []
        if span is not None:
            for inc in reversed(self.loaded.include_chain.get(span.filename, ())):
                chain.append(Note(f"in a file included from {inc.location()}", None))
        self.bag.add(code, message, span, [*notes, *chain], hint)

    # ---- constants ----
    def const_value(self, name: str, span: Span) -> int | None:
        if name in self.consts:
            return self.consts[name]
        decl = self.const_decls.get(name)
        if decl is None:
            return None
        if name in self._const_busy:
            self.err("PG018", f"constant '{name}' is defined in terms of itself", decl.span)
            return None
        if len(self._const_busy) >= MAX_CHAIN:  # each link recurses; stop before Python's limit
            if not self._chain_reported:
                self._chain_reported = True
                self.err("PG018", f"constant '{name}' is reached through a chain of more than {MAX_CHAIN} "
                         "constants each defined by the next", decl.span,
                         hint="define the constants in terms of earlier ones")
            return None
        self._const_busy.add(name)
        override = self.overrides.get(name)
        expr = override.expr if override else decl.expr
        value = self.eval_const(expr)
        self._const_busy.discard(name)
        if value is not None:
            self.consts[name] = value
        return value

    def eval_const(self, expr: ast.Expr, what: str = "a constant expression") -> int | None:
        """Evaluate an expression that may only use constants."""
        env: dict[str, int] = {}
        for name in sorted(free_vars(expr)):
            node = _find_name(expr, name)
            value = self.const_value(name, node.span if node else expr_span(expr))
            if value is None:
                if name not in self.const_decls:
                    guess = _closest(name, self.const_decls)
                    self.err("PG002", f"'{name}' is not a declared constant ({what})", node.span if node else None,
                             hint=f"did you mean '{guess}'?" if guess else
                             "declare it with `const NAME = ...` or fix the spelling")
                return None
            env[name] = value
        try:
            return evaluate(expr, env)
        except EvalError as e:
            self.err("PG018", e.message, e.span)
            return None

    def fold(self, expr: ast.Expr, env: _Env) -> ast.Expr | None:
        """Substitute constants and lets; unknown names are PG002. Returns None on error."""
        ok = True
        values: dict[str, ast.Expr] = {}
        for name in free_vars(expr):
            if name in env.variables:
                continue
            if name in env.values:
                values[name] = env.values[name]
                continue
            node = _find_name(expr, name)
            value = self.const_value(name, node.span if node else expr_span(expr)) if name in self.const_decls else None
            if value is None:
                if name not in self.const_decls:
                    guess = _closest(name, [*self.const_decls, *env.values, *env.variables])
                    self.err("PG002", f"'{name}' is not defined here", node.span if node else None,
                             hint=f"did you mean '{guess}'?" if guess else
                             "declare it (const, let, index variable or loop variable) before use")
                ok = False
                continue
            values[name] = ast.Num(value, node.span if node else expr_span(expr))
        if not ok:
            return None
        try:
            return substitute(expr, values)
        except EvalError as e:
            self.err("PG018", e.message, e.span)
            return None

    def fold_int(self, expr: ast.Expr, env: _Env, what: str) -> int | None:
        """Fold to a constant integer; free variables are an error (PG018)."""
        folded = self.fold(expr, env)
        if folded is None:
            return None
        if not isinstance(folded, ast.Num):
            names = ", ".join(sorted(free_vars(folded)))
            self.err("PG018", f"{what} must be a constant, but it depends on {names}", expr_span(expr))
            return None
        return folded.value

    def dup(self, name: str, span: Span, first: Span, what: str) -> None:
        earlier = self.fragments.reused(span, first)
        if earlier is not None:  # the same declaration again: its fragment is used a second time
            self.err("PG003", f"{what} '{name}' is declared twice: fragment '{earlier.name}' is used more than once",
                     span, [Note("the first use declares it", earlier.span)],
                     hint="each `use` declares the fragment's tasks and tensors again; use it once, or move "
                          "the declaration out of the fragment")
            return
        self.err("PG003", f"{what} '{name}' is declared twice", span,
                 [Note("first declared here", first)], hint="rename one of them")

    def in_manual(self, scope: int) -> bool:
        return self.scopes[scope].mode == "manual"

    def ancestors(self, scope: int) -> list[int]:
        """`scope` and its enclosing scopes so far, innermost first (ir.scope_chain)."""
        return ir.scope_chain(self.scopes, scope)

    def tensor_type(self, name: str) -> ir.Tensor | None:
        if name in self.tensors:
            return self.tensors[name]
        return self.carry_types.get(name)

    def root_of(self, name: str) -> str:
        t = self.tensors.get(name)
        if t is not None:
            return t.base or t.name
        carry = self.carries.get(name)
        return carry.name if carry else name

    def let_shadows(self, stmt: ast.Let, env: _Env) -> bool:
        """PG003 for a `let` named like an index or loop variable in scope (the variable would win
        every lookup, so the let would be silently ignored)."""
        if stmt.name not in env.variables:
            return False
        self.err("PG003", f"let '{stmt.name}' reuses the name of an index or loop variable in scope", stmt.span,
                 hint="rename the let: an index or loop variable is not rebound by `let`")
        return True



def _closest(name: str, candidates: Iterable[str]) -> str | None:
    """The declared name most like a misspelt `name` (difflib ratio >= 0.8), for a hint."""
    close = difflib.get_close_matches(name, sorted(set(candidates)), n=1, cutoff=0.8)
    return close[0] if close else None


def _zero_env(expr: ast.Expr) -> dict[str, int]:
    return {name: 0 for name in free_vars(expr)}


def _find_name(expr: ast.Expr, name: str) -> ast.Name | None:
    if isinstance(expr, ast.Name):
        return expr if expr.id == name else None
    if isinstance(expr, (ast.Neg, ast.Not)):
        return _find_name(expr.operand, name)
    if isinstance(expr, ast.Func):
        for a in expr.args:
            found = _find_name(a, name)
            if found:
                return found
        return None
    if isinstance(expr, ast.BinOp):
        return _find_name(expr.left, name) or _find_name(expr.right, name)
    return None


def expr_span(expr: ast.Expr) -> Span:
    """The span of an expression node."""
    return expr.span


def describe_values(expr: ast.Expr, consts: Mapping[str, int]) -> str:
    """`A = 5, B = 1024, 5 * 1024 = 5120 vs 5121`: the evaluated values of a failed assert."""
    names = sorted(free_vars(expr))
    parts = [f"{n} = {consts[n]}" for n in names if n in consts]
    if isinstance(expr, ast.BinOp) and expr.op in ("==", "!=", "<", "<=", ">", ">="):
        env = {n: consts[n] for n in names if n in consts}
        try:
            left, right = evaluate(expr.left, env), evaluate(expr.right, env)
            parts.append(f"left side = {left}, right side = {right}")
        except EvalError:
            pass
    return ", ".join(parts)
