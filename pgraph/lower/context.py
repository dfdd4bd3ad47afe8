"""The state of one lowering run, passed explicitly to every lowering function.

`LowerContext` holds the tables lowering fills (tensors, kernels, scopes, loops, tile sets,
dispatches, ...), constant folding and name lookup. Lowering resolves names and folds
constants; it reports only what stops resolution (an undefined or duplicate name, a name of
the wrong kind, an expression that cannot be folded). Every check of what the resolved
program means runs later, in `pgraph.plan`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import attrs

from pgraph import records
from pgraph.diagnostics import DiagnosticBag, Edit, Fix, Note
from pgraph.expr import (
    BinOp,
    EvalError,
    Expr,
    Func,
    Name,
    Neg,
    Not,
    Num,
    RuntimeDim,
    evaluate,
    free_vars,
    has_runtime,
    substitute,
)
from pgraph.findings import ConstantChain, ConstantCycle, NotConstant, Unevaluable
from pgraph.frontend import ast
from pgraph.frontend.loader import Loaded
from pgraph.frontend.overrides import Override
from pgraph.ir import program as ir
from pgraph.ir.limits import A2A3_DEFAULTS, DEFAULT_COSTS
from pgraph.kinds import CarryKind, NodeKind, ScopeKind, ScopeMode
from pgraph.lower.fragments import FragmentTable
from pgraph.lower.renames import rename_second
from pgraph.source import Span
from pgraph.suggest import closest

#: Longest chain of constants defined by each other (and of nested `use`s) followed.
MAX_CHAIN = 100


class Env:
    """Names visible in an expression: folded values (lets), variables left free, and the lets
    whose value failed (reported once, where the let is: a use of one is no second error)."""

    def __init__(self, values: Mapping[str, Expr], variables: Iterable[str] = (), failed: Iterable[str] = ()) -> None:
        self.values = dict(values)
        self.variables = set(variables)
        self.failed = set(failed)

    def child(self) -> Env:
        """A nested environment: later lets and variables do not leak out of it."""
        return Env(self.values, self.variables, self.failed)


@records.value
@attrs.frozen(repr=False, eq=False)
class Where:
    """Where a statement stands: its scope, environment, phase, loops and `interleave` block."""

    scope: int
    env: Env
    phase: str | None
    loops: tuple[int, ...]
    interleave: int | None = None

    def inner(self, **changes: object) -> Where:
        """This place with some fields changed (`env` is a child unless given)."""
        changes.setdefault("env", self.env.child())
        return attrs.evolve(self, **changes)  # type: ignore[arg-type]


@records.shared_repr
@attrs.define(eq=False, repr=False)
class TreeNode:
    """A node of the program-order tree while lowering builds it (frozen into `ir.Node`)."""

    kind: NodeKind
    ident: int | str | ir.AllocKey
    children: list[TreeNode] = attrs.Factory(list)

    def freeze(self) -> ir.Node:
        """The immutable `ir.Node` of this subtree."""
        return ir.Node(self.kind, self.ident, tuple(c.freeze() for c in self.children))


@records.shared_repr
@attrs.define(eq=False, repr=False)
class AllocHolder:
    """Where the allocation sites of the tensors declared here go: the front of `node`'s
    children (a scope, an `unscoped` loop body), or just before `before` in `node`'s children
    (a manual scope: its batch stands in the enclosing scope, pypto EmitBatchedAllocTensors)."""

    node: TreeNode
    before: TreeNode | None = None
    sites: list[TreeNode] = attrs.Factory(list)


class LowerContext:
    """The tables one lowering run fills, and the folding and lookup every lowering function uses."""

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
        self.kernel_tables: dict[str, ir.KernelTable] = {}
        self.scopes: list[ir.Scope] = []
        self.loops: list[ir.Loop] = []
        self.tilesets: dict[str, ir.TileSet] = {}
        self.dispatches: list[ir.Dispatch] = []
        self.phases: list[str] = []
        self.interleaves: list[ir.InterleaveBlock] = []
        self.carries: dict[str, ir.Carry] = {}
        self.carry_types: dict[str, ir.Tensor] = {}
        self.taskids: dict[int, list[tuple[str, Span]]] = {}
        self.asserts: list[ir.AssertStmt] = []
        self.target: dict[str, int] = dict(A2A3_DEFAULTS)
        self.target_items: list[ir.Setting] = []
        self.costs: dict[str, int] = dict(DEFAULT_COSTS)
        self.cost_items: list[ir.Setting] = []
        self.cost_decls: list[ast.Cost] = []
        self.budgets: list[ir.Budget] = []
        self.fragments = FragmentTable()
        #: Names whose declaration already failed with an error: later uses stay silent.
        self.failed: set[str] = set()
        #: the program-order tree: the open nodes (entry first) and the allocation holders
        self.tree: list[TreeNode] = []
        self.holders: list[AllocHolder | None] = []
        self._all_holders: list[AllocHolder] = []
        self._site_of: dict[ir.AllocKey, TreeNode] = {}

    # ---- the program-order tree ----
    def open_node(self, kind: NodeKind, ident: int | str, holder: str | None) -> TreeNode:
        """Append a node to the innermost open one and open it. `holder` says where the
        allocations of tensors declared inside go: 'front' (this node's top), 'before' (just
        before this node: a manual scope), None (they keep the enclosing holder: a loop in a
        manual scope, a scoped loop whose body scope holds them)."""
        node = TreeNode(kind, ident)
        parent = self.tree[-1] if self.tree else None
        if parent is not None:
            parent.children.append(node)
        self.tree.append(node)
        if holder == "front":
            h: AllocHolder | None = AllocHolder(node)
        elif holder == "before":
            assert parent is not None
            h = AllocHolder(parent, node)
        else:
            h = self.holders[-1] if self.holders else None
        if h is not None and all(h is not x for x in self._all_holders):
            self._all_holders.append(h)
        self.holders.append(h)
        return node

    def close_node(self) -> None:
        """Close the innermost open node."""
        self.tree.pop()
        self.holders.pop()

    def add_leaf(self, kind: NodeKind, ident: int | str) -> None:
        """A dispatch node in the innermost open node."""
        self.tree[-1].children.append(TreeNode(kind, ident))

    def alloc_site(self, key: ir.AllocKey) -> None:
        """Record the allocation site of group `key` at the innermost holder (once per group)."""
        if key in self._site_of or not self.holders or self.holders[-1] is None:
            return
        site = TreeNode(NodeKind.ALLOC, key)
        self._site_of[key] = site
        self.holders[-1].sites.append(site)

    def finish_tree(self, root: TreeNode) -> ir.Node:
        """Insert the allocation sites and freeze the tree."""
        for h in self._all_holders:
            if not h.sites:
                continue
            at = 0 if h.before is None else next(i for i, c in enumerate(h.node.children) if c is h.before)
            h.node.children[at:at] = h.sites
        return root.freeze()

    # ---- diagnostics ----
    def err(self, code: str, message: str, span: Span | None, notes: Iterable[Note] = (),
            hint: str | None = None, fix: Fix | None = None) -> None:
        """Report a resolution error (the pipeline's note hooks add the include and `use` chains)."""
        self.bag.add(code, message, span, notes, hint, fix=fix)

    def dup(self, name: str, span: Span, first: Span, what: str) -> None:
        """PG003 for a second declaration of `name` (or for a fragment used twice)."""
        earlier = self.fragments.reused(span, first)
        if earlier is not None:  # the same declaration again: its fragment is used a second time
            self.err("PG003", f"{what} '{name}' is declared twice: fragment '{earlier.name}' is used more than once",
                     span, [Note("the first use declares it", earlier.span)],
                     hint="each `use` declares the fragment's tasks and tensors again; use it once, or move "
                          "the declaration out of the fragment")
            return
        hint, fix = rename_second(self.loaded, name, span, what)
        self.err("PG003", f"{what} '{name}' is declared twice", span, [Note("first declared here", first)],
                 hint=hint, fix=fix)

    # ---- constants ----
    def const_value(self, name: str) -> int | None:
        """The folded value of constant `name` (an override wins), or None (reported) on error."""
        if name in self.consts:
            return self.consts[name]
        decl = self.const_decls.get(name)
        if decl is None:
            return None
        if name in self._const_busy:
            self.bag.found(ConstantCycle(span=decl.span, name=name))
            return None
        if len(self._const_busy) >= MAX_CHAIN:  # each link recurses; stop before Python's limit
            if not self._chain_reported:
                self._chain_reported = True
                self.bag.found(ConstantChain(span=decl.span, name=name, limit=MAX_CHAIN))
            return None
        self._const_busy.add(name)
        override = self.overrides.get(name)
        value = self.eval_const(override.expr if override else decl.expr)
        self._const_busy.discard(name)
        if value is not None:
            self.consts[name] = value
        return value

    def eval_const(self, expr: Expr, what: str = "a constant expression") -> int | None:
        """Evaluate an expression that may only use constants (PG002 otherwise; what cannot be
        evaluated is the planner's PG018, handed to it: `pgraph.findings`)."""
        call = find_func(expr, "dim")
        if call is not None:
            self.err("PG038", f"`dim(...)` reads a tensor shape, which {what} cannot use", call.span,
                     hint="a constant is fixed before any tensor exists; use `dim(...)` in a `let` of the entry "
                          "or directly in a scalar argument")
            return None
        env: dict[str, int] = {}
        for name in sorted(free_vars(expr)):
            node = find_name(expr, name)
            value = self.const_value(name)
            if value is None:
                if name not in self.const_decls:
                    guess = closest(name, self.const_decls)
                    self.err("PG002", f"'{name}' is not a declared constant ({what})", node.span if node else None,
                             hint=f"did you mean '{guess}'?" if guess else
                             "declare it with `const NAME = ...` or fix the spelling",
                             fix=respell(node.span, name, guess) if node else None)
                return None
            env[name] = value
        try:
            return evaluate(expr, env)
        except EvalError as e:
            self.bag.found(Unevaluable(span=e.span, message=e.message))
            return None

    def resolve_dims(self, expr: Expr) -> Expr | None:
        """Replace each `dim(T, axis)` call: a constant dimension by its value, a `runtime` one by a
        RuntimeDim (planned at the declared value, read at run time by the a2a3 C++). PG038/PG002."""
        match expr:
            case Func(name="dim"):
                return self._dim(expr)
            case Func():
                args = [self.resolve_dims(a) for a in expr.args]
                if any(a is None for a in args):
                    return None
                return Func(expr.name, tuple(a for a in args if a is not None), expr.span)
            case BinOp():
                left, right = self.resolve_dims(expr.left), self.resolve_dims(expr.right)
                if left is None or right is None:
                    return None
                return BinOp(expr.op, left, right, expr.span)
            case Neg() | Not():
                inner = self.resolve_dims(expr.operand)
                if inner is None:
                    return None
                return Neg(inner, expr.span) if isinstance(expr, Neg) else Not(inner, expr.span)
            case _:
                return expr

    def _dim(self, call: Func) -> Expr | None:
        hint = "write `dim(TENSOR, AXIS)` with a declared tensor and a constant axis, e.g. `dim(k_cache, 0)`"
        if len(call.args) != 2 or not isinstance(call.args[0], Name):
            self.err("PG038", "`dim` takes a tensor and an axis", call.span, hint=hint)
            return None
        tname = call.args[0].id
        t = self.tensor_type(tname)
        if t is None:
            if tname not in self.failed:
                guess = closest(tname, self.tensors)
                self.err("PG002", f"'{tname}' is not a declared tensor (`dim` reads a tensor's shape)",
                         call.args[0].span, hint=f"did you mean '{guess}'?" if guess else hint)
            return None
        axis = self.eval_const(call.args[1], "the axis of `dim`")
        if axis is None:
            return None
        if not 0 <= axis < len(t.shape):
            self.err("PG038", f"'{tname}' has {len(t.shape)} dimension(s); `dim` asks for axis {axis}",
                     call.args[1].span, [Note(f"'{t.name}' declared here", t.span)], hint=hint)
            return None
        if t.is_runtime(axis):
            return RuntimeDim(t.name, axis, t.shape[axis], call.span)
        return Num(t.shape[axis], call.span)

    def fold(self, expr: Expr, env: Env) -> Expr | None:
        """Substitute constants and lets; unknown names are PG002. Returns None on error."""
        resolved = self.resolve_dims(expr)
        if resolved is None:
            return None
        expr = resolved
        ok = True
        values: dict[str, Expr] = {}
        for name in free_vars(expr):
            if name in env.variables:
                continue
            if name in env.values:
                values[name] = env.values[name]
                continue
            if name in env.failed and name not in self.const_decls:
                ok = False  # a let whose value failed: its error is reported already
                continue
            node = find_name(expr, name)
            value = self.const_value(name) if name in self.const_decls else None
            if value is None:
                if name not in self.const_decls:
                    guess = closest(name, [*self.const_decls, *env.values, *env.variables])
                    self.err("PG002", f"'{name}' is not defined here", node.span if node else None,
                             hint=f"did you mean '{guess}'?" if guess else
                             "declare it (const, let, index variable or loop variable) before use",
                             fix=respell(node.span, name, guess) if node else None)
                ok = False
                continue
            values[name] = Num(value, node.span if node else expr.span)
        if not ok:
            return None
        try:
            return substitute(expr, values)
        except EvalError as e:
            self.bag.found(Unevaluable(span=e.span, message=e.message))
            return None

    def fold_int(self, expr: Expr, env: Env, what: str) -> int | None:
        """Fold to a constant integer; free variables are an error (the planner's PG018, handed to it)."""
        folded = self.fold(expr, env)
        if folded is None:
            return None
        if not isinstance(folded, Num) and has_runtime(folded):
            self.runtime_err(expr, what)
            return None
        if not isinstance(folded, Num):
            names = ", ".join(sorted(free_vars(folded)))
            self.bag.found(NotConstant(span=expr.span, what=what, names=names))
            return None
        return folded.value

    def runtime_err(self, expr: Expr, what: str) -> None:
        """PG038: a value fixed when the spec is planned depends on a dimension read at run time."""
        self.err("PG038", f"{what} is fixed when the spec is planned, but it reads a `runtime` tensor dimension",
                 expr.span, hint="runtime dimensions may be used in lets, scalar arguments and regions; give this "
                                 "value a constant (the planning value of the dimension is a constant too)")

    # ---- lookups ----
    def in_manual(self, scope: int) -> bool:
        """True when `scope` is a manual scope."""
        return self.scopes[scope].mode is ScopeMode.MANUAL

    def ancestors(self, scope: int) -> list[int]:
        """`scope` and its enclosing scopes so far, innermost first (ir.scope_chain)."""
        return ir.scope_chain(self.scopes, scope)

    def tensor_type(self, name: str) -> ir.Tensor | None:
        """The tensor a region name stands for (a tensor carry: its initial tensor)."""
        if name in self.tensors:
            return self.tensors[name]
        return self.carry_types.get(name)

    def root_of(self, name: str) -> str:
        """The buffer a name's elements live in (pgraph.ir.queries.root, while tables are open)."""
        t = self.tensors.get(name)
        if t is not None:
            return t.root
        return name

    def let_shadows(self, stmt: ast.Let, env: Env) -> bool:
        """PG003 for a `let` named like an index or loop variable in scope (the variable would win
        every lookup, so the let would be silently ignored)."""
        if stmt.name not in env.variables:
            return False
        self.err("PG003", f"let '{stmt.name}' reuses the name of an index or loop variable in scope", stmt.span,
                 hint="rename the let: an index or loop variable is not rebound by `let`")
        return True

    def new_scope(self, mode: ScopeMode, parent: int | None, kind: ScopeKind, span: Span, ring: int | None = None,
                  loop: int | None = None, interleave: int | None = None, block_span: Span | None = None,
                  ring_span: Span | None = None, depth: int = 1) -> int:
        """Open a scope record and return its id: its depth is its parent's plus one, and `depth`
        for the entry's (1, or 0 for an `unscoped` entry in the executor's root scope)."""
        depth = depth if parent is None else self.scopes[parent].depth + 1
        sid = len(self.scopes)
        self.scopes.append(ir.Scope(sid, mode, depth, parent, kind, span, ring, loop, (), interleave,
                                    block_span, ring_span))
        return sid

    def alloc_scope(self, scope: int | None) -> int | None:
        """Allocations in a manual scope are hoisted to the nearest enclosing non-manual scope."""
        cur = scope
        while cur is not None and self.scopes[cur].mode is ScopeMode.MANUAL:
            cur = self.scopes[cur].parent
        return cur

    def task_carry(self, name: str) -> bool:
        """True when `name` is a TaskId carry."""
        carry = self.carries.get(name)
        return carry is not None and carry.kind is CarryKind.TASK


def respell(span: Span, name: str, guess: str | None) -> Fix | None:
    """The fix of a 'did you mean' hint: `guess` in place of `name`, which starts `span`; none
    when another candidate is as near (`pgraph.suggest.Guess.sole`)."""
    if guess is None or not getattr(guess, "sole", True) or span.file.line(span.line)[span.col - 1:span.col - 1 + len(name)] != name:
        return None
    return Fix((Edit(attrs.evolve(span, end_line=span.line, end_col=span.col + len(name)), guess),))


def find_func(expr: Expr, name: str) -> Func | None:
    """The first call of function `name` in `expr`."""
    if isinstance(expr, Func):
        if expr.name == name:
            return expr
        for a in expr.args:
            found = find_func(a, name)
            if found:
                return found
        return None
    if isinstance(expr, (Neg, Not)):
        return find_func(expr.operand, name)
    if isinstance(expr, BinOp):
        return find_func(expr.left, name) or find_func(expr.right, name)
    return None


def find_name(expr: Expr, name: str) -> Name | None:
    """The first `Name` node called `name` in `expr` (for the caret of a diagnostic)."""
    if isinstance(expr, Name):
        return expr if expr.id == name else None
    if isinstance(expr, (ast.Neg, ast.Not)):
        return find_name(expr.operand, name)
    if isinstance(expr, ast.Func):
        for a in expr.args:
            found = find_name(a, name)
            if found:
                return found
        return None
    if isinstance(expr, ast.BinOp):
        return find_name(expr.left, name) or find_name(expr.right, name)
    return None


def head(span: Span, keyword: str) -> Span:
    """The first `len(keyword)` columns of `span`: carets under a statement's keyword, not its block."""
    return attrs.evolve(span, end_line=span.line, end_col=span.col + len(keyword))
