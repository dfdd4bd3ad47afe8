"""Lower the AST to the Program IR: names, constants, overrides, kernels, scopes, waves.

Diagnostics are appended to the bag; lowering continues past an error where it can so
one run reports as much as possible, and returns None when any error was found.
"""

from __future__ import annotations

import difflib
import itertools
import math
from collections.abc import Iterable, Mapping

import attrs

from pgraph.diagnostics import DiagnosticBag, Note
from pgraph.ir import program as ir
from pgraph.ir.expr import EvalError, evaluate, free_vars, substitute
from pgraph.ir.fragments import FragmentTable, choose_entry
from pgraph.ir.loader import Loaded
from pgraph.source import Span
from pgraph.syntax import ast
from pgraph.target import A2A3_DEFAULTS, DEFAULT_COSTS

ACCESS_KIND = {"reads": "read", "writes": "write", "atomic_add": "atomic"}
ACCESS_VERB = {"read": "reads it", "write": "writes it", "atomic": "accumulates into it (atomic_add)"}
#: Which explicit access kinds each parameter direction admits.
DIRECTION_ACCESSES = {
    "in": {"read"},
    "out": {"write"},
    "inout": {"read", "write"},
    "atomic_add": {"atomic"},
}
#: (wave name, task axes, block axes, wave flags, wave deps, span) of one dispatch of a task.
WaveSpec = tuple[str | None, list[ir.IAxis], list[ir.IAxis], tuple[str, ...], tuple[ast.Dep, ...], Span]

DIRECTION_DEFAULT = {"in": ("read",), "out": ("write",), "inout": ("read", "write"), "atomic_add": ("atomic",)}
#: Longest chain of constants defined by later constants, and deepest nest of fragment `use`s,
#: that lowering follows (each link is a few Python frames; the specs need fewer than 5).
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


class Lowerer:
    """One lowering run; `run()` returns the Program or None on errors."""

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

    # ---- driver ----
    def run(self) -> ir.Program | None:
        items = self.loaded.items
        self.bag.note_hooks.append(self.fragments.notes)
        entries: dict[str, ast.Entry] = {}  # the first entry of each file
        for item in items:
            if isinstance(item, ast.Const):
                if item.name in self.const_decls:
                    self.dup(item.name, item.span, self.const_decls[item.name].span, "constant")
                else:
                    self.const_decls[item.name] = item
        for name, ov in self.overrides.items():
            if name not in self.const_decls:
                known = ", ".join(sorted(self.const_decls)[:6])
                guess = _closest(name, self.const_decls)
                self.err("PG017", f"{ov.origin} overrides '{name}', which the spec does not declare", ov.span,
                         hint=f"did you mean '{guess}'?" if guess else f"declared constants include: {known}, ...")
        for item in items:
            if isinstance(item, ast.Const):
                self.const_value(item.name, item.span)
        for item in items:
            if isinstance(item, ast.Assert):
                self.check_assert(item, _Env({}))
            elif isinstance(item, ast.TensorDecl):
                self.declare_tensor(item, None)
            elif isinstance(item, ast.ScalarDecl):
                self.declare_scalar(item)
            elif isinstance(item, ast.ViewDecl):
                self.declare_view(item, _Env({}), None)
            elif isinstance(item, ast.KernelDecl):
                self.declare_kernel(item)
            elif isinstance(item, ast.Target):
                self.declare_target(item)
            elif isinstance(item, ast.Cost):
                self.cost_items.append(item)
            elif isinstance(item, ast.Fragment):
                self.declare_fragment(item)
            elif isinstance(item, ast.Entry):
                if item.span.filename in entries:
                    self.dup(item.name, item.span, entries[item.span.filename].span, "entry")
                else:
                    entries[item.span.filename] = item
        self.entry = self.select_entry(list(entries.values()))
        if self.entry is None:
            if not self.bag.has_errors:
                span = Span(self.loaded.root, 1, 1, 1, 1)
                self.err("PG002", "the spec declares no `entry`", span,
                         hint="add `entry NAME { ... }` holding the orchestration body")
            return None
        root = self.new_scope("auto", None, "entry", self.entry.span)
        self.walk(self.entry.block, root, _Env({}), None, ())
        self.finish_carries()
        self.finish_costs()
        self.check_taskids()
        self.check_dep_scopes()
        self.mark_identical_loops()
        if self.bag.has_errors:
            return None
        for sid, names in self.taskids.items():
            self.scopes[sid] = attrs.evolve(self.scopes[sid], taskids=tuple(n for n, _ in names))
        return ir.Program(
            entry=self.entry.name,
            entry_span=self.entry.span,
            consts=dict(self.consts),
            tensors=self.tensors,
            scalars=self.scalars,
            kernels=self.kernels,
            scopes=tuple(self.scopes),
            loops=tuple(self.loops),
            tilesets=self.tilesets,
            dispatches=tuple(self.dispatches),
            phases=tuple(self.phases),
            carries=self.carries,
            target=self.target,
            costs=self.costs,
        )

    def declare_target(self, item: ast.Target) -> None:
        for ti in item.items:
            if ti.key not in A2A3_DEFAULTS:
                self.err("PG002", f"unknown target limit '{ti.key}'", ti.span,
                         hint="known limits: " + ", ".join(sorted(A2A3_DEFAULTS)))
                continue
            value = self.eval_const(ti.expr, "a target limit")
            if value is not None:
                if value <= 0:
                    self.err("PG006", f"target limit '{ti.key}' must be positive, got {value}", ti.span)
                    continue
                self.target[ti.key] = value

    def finish_costs(self) -> None:
        for c in self.cost_items:
            if c.name not in self.kernels and c.name not in DEFAULT_COSTS:
                self.err("PG002", f"cost names '{c.name}', which is neither a kernel nor a core shape", c.span,
                         hint="write `cost KERNEL = N` or `cost aic|aiv|mix|dummy = N` (µs per block wave)")
                continue
            value = self.eval_const(c.expr, "a cost")
            if value is not None:
                if value < 0:
                    self.err("PG006", f"cost of '{c.name}' is negative ({value})", c.span)
                    continue
                self.costs[c.name] = value

    def select_entry(self, entries: list[ast.Entry]) -> ast.Entry | None:
        """The root file's entry, else the only entry of an included file; PG034 when several."""
        choice = choose_entry(entries, self.loaded.root.display)
        if not choice.ambiguous:
            return choice.entry
        chains = [self.loaded.include_chain.get(e.span.filename, ()) for e in choice.ambiguous]
        span = chains[1][0] if chains[1] else Span(self.loaded.root, 1, 1, 1, 1)
        files = ", ".join(e.span.filename for e in choice.ambiguous)
        self.err("PG034", f"the root file declares no entry, and {len(choice.ambiguous)} included files do ({files})",
                 span, [Note(f"entry '{e.name}' is declared here", e.span) for e in choice.ambiguous],
                 hint="declare the entry in the root file: it overrides the entries of included files")
        return None

    def declare_fragment(self, item: ast.Fragment) -> None:
        first = self.fragments.decls.get(item.name)
        if first is not None:
            self.dup(item.name, item.name_span, first.name_span, "fragment")
            return
        self.fragments.decls[item.name] = item

    def use_fragment(self, use: ast.Use, scope: int, env: _Env, phase: str | None, loops: tuple[int, ...]) -> None:
        """Lower the statements of fragment `use.name` here, as if they were written in place of `use`."""
        frag = self.fragments.decls.get(use.name)
        if frag is None:
            guess = _closest(use.name, self.fragments.decls)
            self.err("PG002", f"fragment '{use.name}' is not declared", use.name_span,
                     hint=f"did you mean '{guess}'?" if guess else
                     "declare it at the top level of a file: `fragment NAME { statements }`")
            return
        if len(self.fragments.active) >= MAX_CHAIN:  # each `use` recurses; stop before Python's limit
            self.err("PG033", f"fragment '{use.name}' is used through a chain of more than {MAX_CHAIN} nested "
                     "`use`s", use.span, hint="flatten the fragments: pgraph treats so deep a chain as runaway")
            return
        cycle = self.fragments.cycle(use)
        if cycle is not None:
            self.err("PG033", f"fragment '{use.name}' uses itself: {' -> '.join(cycle)}", use.span,
                     [Note(f"fragment '{use.name}' is declared here", frag.name_span)],
                     hint="a `use` splices the fragment in place, so a cycle never ends; remove the `use` "
                          "that closes it")
            return
        with self.fragments.expanding(use):
            self.walk(frag.block, scope, env, phase, loops)

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

    def check_assert(self, item: ast.Assert, env: _Env) -> None:
        folded = self.fold(item.expr, env)
        if folded is None:
            return
        if not isinstance(folded, ast.Num):
            self.err("PG018", "an assert may only use constants", item.span)
            return
        if folded.value:
            return
        detail = describe_values(item.expr, self.consts)
        msg = f"assert failed: {item.message}" if item.message else "assert failed"
        self.err("PG008", f"{msg} ({detail})" if detail else msg, item.span,
                 hint="fix the constants (or the -D/--config overrides) so the invariant holds")

    # ---- declarations ----
    def shape(self, dims: Iterable[ast.Expr], env: _Env, span: Span) -> tuple[int, ...] | None:
        out = []
        for d in dims:
            v = self.fold_int(d, env, "a shape dimension")
            if v is None:
                return None
            if v < 0:
                self.err("PG006", f"shape dimension is negative ({v})", expr_span(d), hint="shapes count elements, >= 0")
                return None
            if v.bit_length() > 63:  # sizes are int64 at most on the device; keeps byte counts printable
                self.err("PG018", f"shape dimension {v:.3e} exceeds 2**63", expr_span(d),
                         hint="check the constants the shape uses")
                return None
            out.append(v)
        return tuple(out)

    def name_taken(self, name: str, span: Span) -> bool:
        for table, what in ((self.tensors, "tensor"), (self.scalars, "scalar")):
            if name in table:
                self.dup(name, span, table[name].span, what)  # type: ignore[attr-defined]
                return True
        if name in self.carries and self.carries[name].kind == "tensor":
            self.dup(name, span, self.carries[name].span, "carry")
            return True
        return False

    def declare_tensor(self, item: ast.TensorDecl, scope: int | None) -> None:
        if self.name_taken(item.name, item.span):
            return
        shape = self.shape(item.shape, _Env({}), item.span)
        if shape is None:
            self.failed.add(item.name)
            return
        if scope is None and not item.external:
            self.failed.add(item.name)
            self.err("PG019", f"top-level tensor '{item.name}' must be `external` (an orchestration argument)",
                     item.span, hint="add `external`, or declare it inside a scope to allocate it there")
            return
        storage = "external" if item.external else "alloc"
        alloc_scope = None if item.external else self.alloc_scope(scope)
        index = sum(1 for t in self.tensors.values() if t.storage == "external") if item.external else None
        loops = () if item.external else self.loop_stack
        self.tensors[item.name] = ir.Tensor(item.name, item.dtype, shape, storage, item.span,
                                            alloc_scope, scope, None, index, loops)

    def declare_scalar(self, item: ast.ScalarDecl) -> None:
        if self.name_taken(item.name, item.span):
            return
        self.scalars[item.name] = ir.ScalarArg(item.name, item.dtype, item.span, len(self.scalars))

    def declare_view(self, item: ast.ViewDecl, env: _Env, scope: int | None) -> None:
        if self.name_taken(item.name, item.span):
            return
        base = self.tensors.get(item.base)
        if base is None:
            self.failed.add(item.name)
            if item.base not in self.failed:
                self.err("PG002", f"view '{item.name}' names unknown tensor '{item.base}'", item.span)
            return
        shape = self.shape(item.shape, env, item.span)
        if shape is None:
            self.failed.add(item.name)
            return
        if math.prod(shape) != base.numel:
            self.failed.add(item.name)
            self.err("PG024", f"view '{item.name}' has {math.prod(shape)} elements but '{base.name}' has {base.numel}",
                     item.span, [Note(f"'{base.name}' declared here", base.span)],
                     hint="a view is a row-major reshape: the element counts must match")
            return
        root = base.base or base.name
        self.tensors[item.name] = ir.Tensor(item.name, base.dtype, shape, "view", item.span,
                                            base.scope, scope, root, None, base.loops)

    def declare_kernel(self, item: ast.KernelDecl) -> None:
        if item.name in self.kernels:
            self.dup(item.name, item.span, self.kernels[item.name].span, "kernel")
            return
        params: list[ir.Param] = []
        seen_scalar: ast.Param | None = None
        names: dict[str, Span] = {}
        for p in item.params:
            if p.name in names:
                self.dup(p.name, p.span, names[p.name], "parameter")
                continue
            names[p.name] = p.span
            if p.direction == "scalar":
                seen_scalar = seen_scalar or p
            elif seen_scalar is not None:
                self.err("PG025", f"tensor parameter '{p.name}' follows scalar '{seen_scalar.name}'", p.span,
                         [Note("first scalar parameter", seen_scalar.span)],
                         hint="the runtime packs all tensors before any scalar (CoreTaskArgs: code 5 otherwise); "
                              "move the scalars last")
            shape = self.shape(p.shape, _Env({}), p.span) if p.shape is not None else None
            params.append(ir.Param(p.name, p.direction, p.dtype, shape, p.span))
        self.kernels[item.name] = ir.Kernel(item.name, item.core, item.source, tuple(params), item.extern, item.span)

    # ---- scopes ----
    def new_scope(self, mode: str, parent: int | None, kind: str, span: Span, ring: int | None = None,
                  loop: int | None = None) -> int:
        depth = 1 if parent is None else self.scopes[parent].depth + 1
        sid = len(self.scopes)
        self.scopes.append(ir.Scope(sid, mode, depth, parent, kind, span, ring, loop))
        if ring is not None and ring != min(depth, 3):
            self.err("PG023", f"this scope is at depth {depth}, so its ring is {min(depth, 3)}, not {ring}", span,
                     hint="ring = min(depth, 3) (simpler: current_ring_id); move the scope or fix the stated ring")
        return sid

    def alloc_scope(self, scope: int | None) -> int | None:
        """Allocations in a manual scope are hoisted to the nearest enclosing non-manual scope."""
        cur = scope
        while cur is not None and self.scopes[cur].mode == "manual":
            cur = self.scopes[cur].parent
        return cur

    def in_manual(self, scope: int) -> bool:
        return self.scopes[scope].mode == "manual"

    def walk(self, block: ast.Block, scope: int, env: _Env, phase: str | None, loops: tuple[int, ...]) -> None:
        for stmt in block.stmts:
            if isinstance(stmt, ast.TensorDecl):
                self.declare_tensor(stmt, scope)
            elif isinstance(stmt, ast.ViewDecl):
                self.declare_view(stmt, env, scope)
            elif isinstance(stmt, ast.Let):
                folded = None if self.let_shadows(stmt, env) else self.fold(stmt.expr, env)
                if folded is not None:
                    env.values[stmt.name] = folded
            elif isinstance(stmt, ast.Assert):
                self.check_assert(stmt, env)
            elif isinstance(stmt, ast.ScopeStmt):
                self.walk_scope(stmt, scope, env, phase, loops)
            elif isinstance(stmt, ast.ForStmt):
                self.walk_for(stmt, scope, env, phase, loops)
            elif isinstance(stmt, ast.PhaseStmt):
                if stmt.name not in self.phases:
                    self.phases.append(stmt.name)
                self.walk(stmt.block, scope, env, stmt.name, loops)
            elif isinstance(stmt, ast.TaskIds):
                self.taskids.setdefault(scope, []).extend((n, stmt.span) for n in stmt.names)
            elif isinstance(stmt, ast.Use):
                self.use_fragment(stmt, scope, env, phase, loops)
            elif isinstance(stmt, ast.Task):
                self.lower_task(stmt, scope, env, phase, loops)

    def let_shadows(self, stmt: ast.Let, env: _Env) -> bool:
        """PG003 for a `let` named like an index or loop variable in scope (the variable would win
        every lookup, so the let would be silently ignored)."""
        if stmt.name not in env.variables:
            return False
        self.err("PG003", f"let '{stmt.name}' reuses the name of an index or loop variable in scope", stmt.span,
                 hint="rename the let: an index or loop variable is not rebound by `let`")
        return True

    def walk_scope(self, stmt: ast.ScopeStmt, scope: int, env: _Env, phase: str | None, loops: tuple[int, ...]) -> None:
        if self.in_manual(scope):
            what = "a manual scope" if stmt.mode == "manual" else "an auto scope"
            outer = self.scopes[scope]
            self.err("PG022", f"{what} may not be nested inside a manual scope", stmt.span,
                     [Note("the enclosing manual scope", outer.span)],
                     hint="the runtime rejects AUTO inside MANUAL (error 5) and pypto rejects MANUAL inside MANUAL; "
                          "move the scope out or drop it")
        sid = self.new_scope(stmt.mode, scope, "scope", stmt.span, stmt.ring)
        self.walk(stmt.block, sid, env.child(), phase, loops)

    def walk_for(self, stmt: ast.ForStmt, scope: int, env: _Env, phase: str | None, loops: tuple[int, ...]) -> None:
        lo = self.fold_int(stmt.axis.lo, env, "a loop bound")
        hi = self.fold_int(stmt.axis.hi, env, "a loop bound")
        if lo is None or hi is None or hi < lo:
            self.failed.update(c.name for c in stmt.carries)  # uses after the loop stay silent
        if lo is None or hi is None:
            return
        if hi < lo:
            self.err("PG006", f"loop range {lo}..{hi} has a negative extent", stmt.axis.span,
                     hint="ranges are half-open lo..hi with lo <= hi (an empty range is legal)")
            return
        lid = len(self.loops)
        carries = []
        for c in stmt.carries:
            carry = self.declare_carry(c)
            if carry is not None:
                carries.append(carry)
        scoped = stmt.scoped and not self.in_manual(scope)
        self.loops.append(ir.Loop(lid, ir.IAxis(stmt.axis.var, lo, hi, stmt.axis.span), tuple(carries), None,
                                  scope, stmt.span, scoped=scoped))
        body = self.new_scope("auto", scope, "loop", stmt.span, loop=lid) if scoped else None
        self.loops[lid] = attrs.evolve(self.loops[lid], body_scope=body)
        inner = env.child()
        inner.variables.add(stmt.axis.var)
        saved = self.loop_stack
        self.loop_stack = (*loops, lid)
        self.walk(stmt.block, body if body is not None else scope, inner, phase, (*loops, lid))
        self.loop_stack = saved

    def declare_carry(self, c: ast.CarryItem) -> ir.Carry | None:
        if c.name in self.carries or c.name in self.tilesets or c.name in self.tensors:
            first = (self.carries.get(c.name) or self.tilesets.get(c.name) or self.tensors.get(c.name))
            self.dup(c.name, c.span, first.span if first else c.span, "name")
            return None
        if c.init in self.tensors:
            carry = ir.Carry(c.name, "tensor", c.init, c.next, c.span)
            self.carry_types[c.name] = self.tensors[c.init]
        elif c.init in self.tilesets:
            carry = ir.Carry(c.name, "task", c.init, c.next, c.span)
        else:
            self.err("PG002", f"carry '{c.name}' starts from '{c.init}', which is neither a task nor a tensor "
                     "declared before the loop", c.span)
            self.failed.add(c.name)  # its uses stay silent
            return None
        self.carries[c.name] = carry
        return carry

    def finish_carries(self) -> None:
        for carry in self.carries.values():
            if carry.kind == "task":
                if carry.next not in self.tilesets:
                    kind = "a tensor" if carry.next in self.tensors else "not declared"
                    self.err("PG029" if carry.next in self.tensors else "PG002",
                             f"carry '{carry.name}' starts as task '{carry.init}' but continues with "
                             f"'{carry.next}', which is {kind}", carry.span)
                continue
            nxt = self.tensors.get(carry.next)
            init = self.tensors[carry.init]
            if nxt is None:
                self.err("PG029" if carry.next in self.tilesets else "PG002",
                         f"carry '{carry.name}' starts as tensor '{carry.init}' but continues with '{carry.next}', "
                         "which is not a tensor", carry.span)
            elif (nxt.dtype, nxt.shape) != (init.dtype, init.shape):
                self.err("PG029", f"carry '{carry.name}': '{carry.init}' is {init.dtype}{list(init.shape)} but "
                         f"'{carry.next}' is {nxt.dtype}{list(nxt.shape)}", carry.span,
                         [Note(f"'{carry.next}' declared here", nxt.span)])

    def check_taskids(self) -> None:
        for scope, names in self.taskids.items():
            for name, span in names:
                ts = self.tilesets.get(name)
                if ts is None:
                    self.err("PG002", f"taskids names '{name}', which is not a task", span)
                elif scope not in self.ancestors(ts.scope):
                    self.err("PG014", f"taskids '{name}' must stand in a scope that encloses the task", span,
                             [Note(f"'{name}' is declared here", ts.span)])

    def ancestors(self, scope: int) -> list[int]:
        out = []
        cur: int | None = scope
        while cur is not None:
            out.append(cur)
            cur = self.scopes[cur].parent
        return out

    def check_dep_scopes(self) -> None:
        for d in self.dispatches:
            consumer_chain = self.ancestors(d.scope)
            for dep in d.deps:
                if dep.kind != "tiles":
                    continue
                ts = self.tilesets.get(dep.target)
                if ts is None:
                    self.unknown_dep(d.name, dep)
                    continue
                if ts.scope in consumer_chain:
                    continue
                if any(dep.target in (n for n, _ in self.taskids.get(s, ())) for s in consumer_chain):
                    continue
                common = next(s for s in self.ancestors(ts.scope) if s in consumer_chain)
                where = self.scopes[common]
                self.err(
                    "PG014",
                    f"'{d.name}' depends on '{dep.target}', whose scope has already closed",
                    dep.span,
                    [Note(f"'{dep.target}' is declared in this scope", self.scopes[ts.scope].span),
                     Note("a scope that encloses both", where.span)],
                    hint=f"a TaskId is a local of its PTO2_SCOPE: declare `taskids {dep.target}` in the scope that "
                         "encloses both (pypto: a TASK_ID array hoisted into the consumer's scope)",
                )

    def unknown_dep(self, consumer: str, dep: ir.DepRef) -> None:
        """A dep naming no task: PG019 when the name is a kernel or scalar, PG002 otherwise."""
        if dep.target in self.failed:
            return
        if dep.target in self.tensors or dep.target in self.carries:  # tasks and tensors: two namespaces
            self.err("PG019", f"deps name tasks, but '{dep.target}' is a tensor", dep.span,
                     hint="name the task that writes it; in an auto scope the edge is inferred from the access")
            return
        if dep.target in self.kernels or dep.target in self.scalars:
            what = "a kernel" if dep.target in self.kernels else "a scalar"
            self.err("PG019", f"deps name tasks, but '{dep.target}' is {what}", dep.span,
                     hint="name the task (at/spmd/parallel/dummy/tiles) that must finish first")
            return
        guess = _closest(dep.target, [*self.tilesets, *(c for c, v in self.carries.items() if v.kind == "task")])
        self.err("PG002", f"'{consumer}' depends on '{dep.target}', which is not a declared task", dep.span,
                 hint=f"did you mean '{guess}'?" if guess else
                 "deps name tasks declared in the entry (at/spmd/parallel/dummy/tiles) or a task carry")

    def mark_identical_loops(self) -> None:
        """A loop's iterations are identical (window expansion is exact) when neither its deps nor
        the regions of auto-scope tasks on written buffers depend on the loop variable: only those
        decide edges (explicit edges, and the TensorMap's inferred ones); index spaces are constant.

        The TensorMap sees the call's argument regions, so those count as well as the accesses.
        An auto-scope `out` argument (OUTPUT_EXISTING: insert without lookup, older entries stay)
        on a buffer that outlives one iteration also makes the iterations differ: every
        iteration adds an entry, and each later reader gets one more edge.
        """
        auto = [d for d in self.dispatches if self.scopes[d.scope].mode == "auto"]
        written = {r for d in auto for a in d.accesses if a.kind != "read" for r in self.roots(a.region.tensor)}
        written |= {r for d in auto for a in d.args if a.region is not None and a.param.direction != "in"
                    for r in self.roots(a.region.tensor)}
        for loop in self.loops:
            var = loop.axis.var
            same = True
            for d in self.dispatches:
                if loop.id not in d.loops:
                    continue
                exprs = [e for dep in d.deps for sel in dep.sels or () for e in (sel.a, sel.b)]
                if self.scopes[d.scope].mode == "auto":
                    regions = [a.region for a in d.accesses] + [a.region for a in d.args if a.region is not None]
                    exprs += [e for r in regions if self.roots(r.tensor) & written
                              for dim in r.dims or () for e in (dim.a, dim.b)]
                    if any(a.region is not None and a.param.direction == "out"
                           and self.outlives_iteration(a.region.tensor, loop.id) for a in d.args):
                        same = False
                        break
                if any(e is not None and var in free_vars(e) for e in exprs):
                    same = False
                    break
            if same and not self.slabs_disjoint(loop):
                same = False
            self.loops[loop.id] = attrs.evolve(loop, identical=same)

    #: Evaluations allowed for the per-iteration slab check before falling back to full expansion.
    SLAB_CHECK_BUDGET = 200_000

    def slabs_disjoint(self, loop: ir.Loop) -> bool:
        """Regions that use the loop variable on a written buffer that outlives one iteration must
        give every iteration its own slab (e.g. `k_cache[L*CACHE_ROWS +: CACHE_ROWS, :]`).

        The window expands two iterations, so it only sees conflicts between neighbours; `g[L % 4]`
        makes iterations 0 and 4 clash unseen. Each such region's bounding box is evaluated for
        every iteration (over all task, block and item indices); overlapping boxes of different
        iterations, or a region too costly to evaluate, make the loop expand in full.
        """
        var = loop.axis.var
        written = {r for d in self.dispatches for a in d.accesses if a.kind != "read" for r in self.roots(a.region.tensor)}
        boxes: dict[str, list[tuple[int, str, list[tuple[int, int]]]]] = {}
        budget = self.SLAB_CHECK_BUDGET
        for d in self.dispatches:
            if loop.id not in d.loops:
                continue
            for acc in d.accesses:
                region = acc.region
                exprs = [e for dim in region.dims or () for e in (dim.a, dim.b) if e is not None]
                if not any(var in free_vars(e) for e in exprs):
                    continue
                if not (self.roots(region.tensor) & written) or not self.outlives_iteration(region.tensor, loop.id):
                    continue
                axes = [*d.task_axes, *d.block_axes, *(ir.IAxis(i.var, i.lo, i.hi, acc.span) for i in acc.items)]
                free = set().union(*(free_vars(e) for e in exprs)) - {var} - {a.var for a in axes}
                points = math.prod(a.size for a in axes) * loop.axis.size
                budget -= points
                if free or budget < 0:
                    return False  # another loop's variable, or too many points: expand in full
                tensor = self.tensors[region.tensor]
                for value in range(loop.axis.lo, loop.axis.hi):
                    box = self.region_bbox(region, tensor.shape, axes, {var: value})
                    if box is None:
                        return False
                    boxes.setdefault(tensor.base or tensor.name, []).append((value, tensor.name, box))
        for entries in boxes.values():
            for i, (va, ta, ba) in enumerate(entries):
                for vb, tb, bb in entries[i + 1:]:
                    if va != vb and _boxes_overlap(ba, ta, bb, tb, self.tensors):
                        return False
        return True

    def region_bbox(self, region: ir.RegionRef, shape: tuple[int, ...], axes: list[ir.IAxis],
                    env0: dict[str, int]) -> list[tuple[int, int]] | None:
        """Bounding box of `region` over every value of `axes` (None if an expression fails)."""
        box: list[tuple[int, int]] | None = None
        for values in itertools.product(*(range(a.lo, a.hi) for a in axes)):
            env = dict(env0)
            env.update({a.var: v for a, v in zip(axes, values)})
            cur = []
            for dim, n in zip(region.dims or (), shape):
                try:
                    if dim.kind == "all":
                        lo, hi = 0, n
                    elif dim.kind == "index":
                        lo = evaluate(dim.a, env)  # type: ignore[arg-type]
                        hi = lo + 1
                    elif dim.kind == "extent":
                        lo = evaluate(dim.a, env)  # type: ignore[arg-type]
                        hi = lo + evaluate(dim.b, env)  # type: ignore[arg-type]
                    else:
                        lo, hi = evaluate(dim.a, env), evaluate(dim.b, env)  # type: ignore[arg-type]
                except EvalError:
                    return None
                cur.append((lo, hi))
            box = cur if box is None else [(min(a[0], b[0]), max(a[1], b[1])) for a, b in zip(box, cur)]
        return box

    def roots(self, name: str) -> set[str]:
        """The buffers `name` may stand for: its root tensor, or for a tensor carry the carry and
        the roots of INIT and NEXT (a write through `cur` writes h0 or h)."""
        carry = self.carries.get(name)
        if carry is None or carry.kind != "tensor":
            return {self.root_of(name)}
        return {carry.name, self.root_of(carry.init), self.root_of(carry.next)}

    def outlives_iteration(self, name: str, lid: int) -> bool:
        """True when tensor `name` is one buffer for every iteration of loop `lid` (external, or
        allocated outside the loop); a carry alias names the previous iteration's buffer."""
        if name in self.carries:
            return False
        t = self.tensors.get(name)
        if t is None:
            return False
        root = self.tensors.get(t.base, t) if t.base else t
        return root.storage == "external" or lid not in root.loops

    # ---- tasks ----
    def axes(self, axes: Iterable[ast.Axis], env: _Env) -> list[ir.IAxis] | None:
        out = []
        seen: set[str] = set()
        for a in axes:
            lo = self.fold_int(a.lo, env, "an index bound")
            hi = self.fold_int(a.hi, env, "an index bound")
            if lo is None or hi is None:
                return None
            if hi < lo:
                self.err("PG006", f"index range {a.var} in {lo}..{hi} has a negative extent", a.span,
                         hint="ranges are half-open lo..hi with lo <= hi (an empty range is legal)")
                return None
            if a.var in seen:
                self.err("PG003", f"index variable '{a.var}' appears twice", a.span)
                return None
            seen.add(a.var)
            out.append(ir.IAxis(a.var, lo, hi, a.span))
        return out

    def lower_task(self, t: ast.Task, scope: int, env: _Env, phase: str | None, loops: tuple[int, ...]) -> None:
        if t.name in self.tilesets or t.name in self.carries:
            first = self.tilesets.get(t.name) or self.carries.get(t.name)
            self.dup(t.name, t.name_span, first.span if first else t.span, "task")
            return
        self.failed.add(t.name)  # until its tile set is registered below
        axes = self.axes(t.axes, env)
        if axes is None:
            return
        if t.kind == "at" and axes:
            self.err("PG020", f"`at {t.name}` is one task with one block; it takes no index space", t.axes[0].span,
                     hint="use `spmd` for blocks of one task, `parallel` for separate tasks, `tiles` for waves")
            return
        if t.kind in ("spmd", "parallel", "tiles") and not axes:
            self.err("PG020", f"`{t.kind} {t.name}` needs an index space, e.g. `[i in 0..N]`", t.name_span)
            return
        if t.kind == "dummy" and t.body:
            self.err("PG019", f"dummy '{t.name}' is dependency-only and takes no body", t.span,
                     hint="a dummy has no kernel; use `at` for a task that does work")
            return
        waves = [b for b in t.body if isinstance(b, ast.Wave)]
        if t.kind != "tiles" and waves:
            self.err("PG019", "waves belong to a `tiles` declaration", waves[0].span)
            return
        if t.kind == "tiles" and not waves:
            self.err("PG021", f"tiles '{t.name}' declares no wave", t.name_span,
                     hint="add `wave NAME ... : parallel|spmd ...` lines that cover every tile once")
            return
        self.tilesets[t.name] = ir.TileSet(t.name, tuple(axes), (), scope, t.kind, t.name_span)
        self.failed.discard(t.name)
        local = env.child()
        local.variables.update(a.var for a in axes)
        body = self.lower_body(t, local, scope) if t.kind != "dummy" else ([], None, [])
        if body is None:
            return
        accesses, kernel, args = body
        specs: list[WaveSpec] = []
        if t.kind == "tiles":
            specs = self.wave_specs(t, axes, waves, local)
        elif t.kind == "spmd":
            specs = [(None, [], axes, (), (), t.span)]
        else:
            specs = [(None, axes, [], (), (), t.span)]
        names = []
        kind_of = {"at": "at", "spmd": "spmd", "parallel": "parallel", "dummy": "dummy"}
        for wave, task_axes, block_axes, wflags, wdeps, span in specs:
            name = f"{t.name}.{wave}" if wave else t.name
            flags = set(t.flags) | set(wflags)
            kind = kind_of.get(t.kind) or ("spmd" if block_axes else "parallel")
            if t.kind == "tiles" and not task_axes and not block_axes:
                kind = "at"
            deps = self.lower_deps((*(t.deps or ()), *wdeps), local, task_axes, block_axes, loops, name)
            if deps is None:
                continue
            self.dispatches.append(ir.Dispatch(
                name=name, tileset=t.name, wave=wave, kind=kind, task_axes=tuple(task_axes),
                block_axes=tuple(block_axes), accesses=tuple(accesses), kernel=kernel, args=tuple(args),
                early="early" in flags, sync_start="sync_start" in flags, deps=deps, scope=scope, phase=phase,
                order=len(self.dispatches), loops=loops, span=span if wave else t.span,
            ))
            names.append(name)
        self.tilesets[t.name] = attrs.evolve(self.tilesets[t.name], dispatches=tuple(names))

    def wave_specs(self, t: ast.Task, axes: list[ir.IAxis], waves: list[ast.Wave], env: _Env) -> list[WaveSpec]:
        out: list[WaveSpec] = []
        boxes: list[tuple[str, Span, list[ir.IAxis]]] = []
        by_var = {a.var: a for a in axes}
        seen: dict[str, Span] = {}
        for w in waves:
            if w.name in seen:
                self.dup(w.name, w.span, seen[w.name], "wave")
                continue
            seen[w.name] = w.span
            restricted = dict(by_var)
            sub = self.axes(w.axes, env)
            if sub is None:
                continue
            bad = False
            for a in sub:
                full = by_var.get(a.var)
                if full is None:
                    self.err("PG002", f"wave '{w.name}' restricts '{a.var}', which is not an index of '{t.name}'",
                             a.span)
                    bad = True
                elif a.size and not (full.lo <= a.lo and a.hi <= full.hi):
                    self.err("PG026", f"wave '{w.name}' selects {a.var} in {a.lo}..{a.hi}, outside "
                             f"{full.lo}..{full.hi}", a.span)
                    bad = True
                else:
                    restricted[a.var] = ir.IAxis(a.var, a.lo, a.hi, a.span)
            if bad:
                continue
            box = [restricted[a.var] for a in axes]
            spmd_vars = set(w.spmd_axes) if w.spmd_axes is not None else set(by_var) if w.kind == "spmd" else set()
            for v in spmd_vars - set(by_var):
                self.err("PG002", f"wave '{w.name}' names SPMD index '{v}', which is not an index of '{t.name}'",
                         w.span)
                bad = True
            if bad:
                continue
            task_axes = [a for a in box if a.var not in spmd_vars]
            block_axes = [a for a in box if a.var in spmd_vars]
            boxes.append((w.name, w.span, box))
            out.append((w.name, task_axes, block_axes, w.flags, w.deps or (), w.span))
        total = math.prod(a.size for a in axes)
        covered = sum(math.prod(a.size for a in box) for _, _, box in boxes)
        for i, (na, sa, ba) in enumerate(boxes):
            for nb, sb, bb in boxes[i + 1:]:
                if all(max(x.lo, y.lo) < min(x.hi, y.hi) for x, y in zip(ba, bb)):
                    self.err("PG021", f"waves '{na}' and '{nb}' of '{t.name}' both take some tiles", sb,
                             [Note(f"wave '{na}'", sa)], hint="make the wave ranges disjoint")
                    return out
        if covered != total and not self.bag.has_errors:
            self.err("PG021", f"the waves of '{t.name}' cover {covered} of its {total} tiles", t.name_span,
                     hint="every tile must belong to exactly one wave")
        return out

    def lower_deps(self, deps: Iterable[ast.Dep], env: _Env, task_axes: list[ir.IAxis],
                   block_axes: list[ir.IAxis], loops: tuple[int, ...], consumer: str) -> tuple[ir.DepRef, ...] | None:
        out = []
        allowed = {a.var for a in task_axes} | {self.loops[lp].axis.var for lp in loops}
        block_vars = {a.var for a in block_axes}
        ok = True
        for dep in deps:
            if dep.name in self.carries and self.carries[dep.name].kind == "task":
                if dep.sels:
                    self.err("PG020", f"carry '{dep.name}' is one TaskId; it takes no selection", dep.span)
                    ok = False
                    continue
                out.append(ir.DepRef(dep.name, "carry", None, dep.span))
                continue
            sels = []
            for sel in dep.sels or ():
                parts: list[ast.Expr | None] = []
                for e in (sel.a, sel.b):
                    if e is None:
                        parts.append(None)
                        continue
                    folded = self.fold(e, env)
                    if folded is None:
                        ok = False
                        parts.append(None)
                        continue
                    used = free_vars(folded)
                    if used & block_vars:
                        self.err("PG027", f"a dep of '{consumer}' uses SPMD block index "
                                 f"{', '.join(sorted(used & block_vars))}; one task waits for all its deps",
                                 expr_span(e), hint="deps may use the task indices and loop variables only")
                        ok = False
                    elif used - allowed:
                        self.err("PG002", f"'{sorted(used - allowed)[0]}' is not defined here", expr_span(e))
                        ok = False
                    parts.append(folded)
                sels.append(ir.DepSel(sel.kind, parts[0], parts[1], sel.span))
            out.append(ir.DepRef(dep.name, "tiles", tuple(sels) if dep.sels else None, dep.span))
        return tuple(out) if ok else None

    def lower_body(self, t: ast.Task, env: _Env, scope: int) -> tuple[list[ir.Access], str | None, list[ir.Arg]] | None:
        explicit: list[ir.Access] = []
        call: ast.Call | None = None
        ok = True
        for item in t.body:
            if isinstance(item, ast.Let):
                folded = None if self.let_shadows(item, env) else self.fold(item.expr, env)
                if folded is None:
                    ok = False
                else:
                    env.values[item.name] = folded
            elif isinstance(item, ast.Access):
                for r in item.regions:
                    reg = self.region(r, env)
                    ok = ok and reg is not None
                    if reg is not None:
                        explicit.append(ir.Access(ACCESS_KIND[item.kind], reg, (), r.span))
            elif isinstance(item, ast.ItemLoop):
                got = self.item_loop(item, env)
                ok = ok and got is not None
                explicit.extend(got or [])
            elif isinstance(item, ast.Call):
                if call is not None:
                    self.err("PG003", "a task calls one kernel", item.span, [Note("first call", call.span)])
                    ok = False
                call = item
        if not ok:
            return None
        if call is None:
            self.err("PG028", f"task '{t.name}' has no `call`", t.name_span,
                     hint="add `call KERNEL(args)`; a task that only orders others is a `dummy`")
            return None
        kernel = self.kernels.get(call.kernel)
        if kernel is None:
            self.err("PG002", f"kernel '{call.kernel}' is not declared", call.span,
                     hint="declare it with `kernel NAME aic|aiv|mix (params)`")
            return None
        args = self.bind_args(call, kernel, env)
        if args is None:
            return None
        accesses = self.accesses_for(args, explicit, kernel)
        if accesses is None:
            return None
        return accesses, kernel.name, args

    def item_loop(self, item: ast.ItemLoop, env: _Env) -> list[ir.Access] | None:
        ax = self.axes([item.axis], env)
        if ax is None:
            return None
        inner = env.child()
        inner.variables.add(item.axis.var)
        out: list[ir.Access] = []
        for sub in item.items:
            if isinstance(sub, ast.Let):
                folded = None if self.let_shadows(sub, inner) else self.fold(sub.expr, inner)
                if folded is None:
                    return None
                inner.values[sub.name] = folded
            elif isinstance(sub, ast.Access):
                for r in sub.regions:
                    reg = self.region(r, inner)
                    if reg is None:
                        return None
                    out.append(ir.Access(ACCESS_KIND[sub.kind], reg, (ir.ItemAxis(ax[0].var, ax[0].lo, ax[0].hi),),
                                         r.span))
            else:
                self.err("PG019", "only `let` and access clauses may stand in an item loop", sub.span)
                return None
        return out

    def tensor_type(self, name: str) -> ir.Tensor | None:
        if name in self.tensors:
            return self.tensors[name]
        return self.carry_types.get(name)

    def region(self, r: ast.Region, env: _Env) -> ir.RegionRef | None:
        t = self.tensor_type(r.tensor)
        if t is None and r.tensor in self.failed:
            return None
        if t is None:
            what = "a task" if r.tensor in self.tilesets else "not declared"
            self.err("PG019" if r.tensor in self.tilesets else "PG002",
                     f"'{r.tensor}' is {what}; a region needs a tensor", r.span)
            return None
        for idx in r.indirect or ():
            if idx not in self.tensors:
                self.err("PG002", f"indirect index tensor '{idx}' is not declared", r.span)
                return None
        if r.slices is None:
            return ir.RegionRef(r.tensor, None, r.indirect if r.indirect is not None else None, r.span)
        if len(r.slices) != len(t.shape):
            self.err("PG020", f"'{r.tensor}' has {len(t.shape)} dimension(s) but the region gives {len(r.slices)}",
                     r.span, [Note(f"'{t.name}' declared here", t.span)])
            return None
        dims = []
        for s in r.slices:
            a = self.fold(s.a, env) if s.a is not None else None
            b = self.fold(s.b, env) if s.b is not None else None
            if (s.a is not None and a is None) or (s.b is not None and b is None):
                return None
            dims.append(ir.Dim(s.kind, a, b))
        return ir.RegionRef(r.tensor, tuple(dims), r.indirect, r.span)

    def bind_args(self, call: ast.Call, kernel: ir.Kernel, env: _Env) -> list[ir.Arg] | None:
        if len(call.args) != len(kernel.params):
            self.err("PG009", f"kernel '{kernel.name}' takes {len(kernel.params)} argument(s), "
                     f"this call passes {len(call.args)}", call.span,
                     [Note(f"'{kernel.name}' declared here", kernel.span)])
            return None
        args = []
        ok = True
        for arg, param in zip(call.args, kernel.params):
            got = self.bind_arg(arg, param, kernel, env)
            if got is None:
                ok = False
            else:
                args.append(got)
        return args if ok else None

    def bind_arg(self, arg: ast.Expr | ast.Region, param: ir.Param, kernel: ir.Kernel, env: _Env) -> ir.Arg | None:
        span = arg.span
        note = [Note(f"parameter '{param.name}' declared here", param.span)]
        if isinstance(arg, ast.Name) and arg.id in self.failed:
            return None
        is_tensor_name = isinstance(arg, ast.Name) and self.tensor_type(arg.id) is not None
        if not param.is_tensor:
            if isinstance(arg, ast.Region) or is_tensor_name:
                self.err("PG019", f"parameter '{param.name}' of '{kernel.name}' is a scalar, got a tensor", span, note)
                return None
            scalar_env = env.child()
            scalar_env.variables.update(self.scalars)
            folded = self.fold(arg, scalar_env)
            return None if folded is None else ir.Arg(param, None, folded, span)
        if isinstance(arg, ast.Name) and is_tensor_name:
            arg = ast.Region(arg.id, None, None, arg.span)
        if isinstance(arg, ast.Name) and not self.known_value(arg.id, env) and arg.id not in self.tilesets:
            guess = _closest(arg.id, [*self.tensors, *self.carry_types])
            self.err("PG002", f"'{arg.id}' is not declared (parameter '{param.name}' of '{kernel.name}' takes a "
                     "tensor)", span, note, hint=f"did you mean '{guess}'?" if guess else
                     "declare the tensor (`tensor NAME : dtype[shape]`) before the task")
            return None
        if not isinstance(arg, ast.Region):
            self.err("PG019", f"parameter '{param.name}' of '{kernel.name}' is a tensor, got an expression", span, note)
            return None
        region = self.region(arg, env)
        if region is None:
            return None
        t = self.tensor_type(region.tensor)
        assert t is not None
        if t.dtype != param.dtype:
            self.err("PG011", f"'{region.tensor}' is {t.dtype} but parameter '{param.name}' of '{kernel.name}' "
                     f"is {param.dtype}", span, note, hint="pass a tensor of the declared dtype, or fix the kernel")
            return None
        if param.shape is not None:
            shape = self.region_shape(region, t, env)
            if shape is not None and any(n < 0 for n in shape):
                self.err("PG006", f"the region of '{region.tensor}' has shape {list(shape)}: a slice has a negative "
                         "extent", span, hint="a slice `a:b` needs a <= b; `a +: n` needs n >= 0")
                return None
            if shape is not None and tuple(shape) != tuple(param.shape):
                self.err("PG012", f"the region of '{region.tensor}' has shape {list(shape)} but parameter "
                         f"'{param.name}' of '{kernel.name}' expects {list(param.shape)}", span, note,
                         hint="single indices drop their dimension; `a +: n` keeps n")
                return None
        return ir.Arg(param, region, None, span)

    def known_value(self, name: str, env: _Env) -> bool:
        """True when `name` is a constant, a let, an index/loop variable or a scalar argument."""
        return name in self.const_decls or name in env.values or name in env.variables or name in self.scalars

    def region_shape(self, region: ir.RegionRef, t: ir.Tensor, env: _Env) -> list[int] | None:
        """Shape of a region, evaluated with every free index at its lower bound."""
        if region.dims is None:
            return list(t.shape)
        shape = []
        for dim, full in zip(region.dims, t.shape):
            if dim.kind == "all":
                shape.append(full)
            elif dim.kind == "index":
                continue
            else:
                assert dim.a is not None and dim.b is not None
                extent = dim.b if dim.kind == "extent" else ast.BinOp("-", dim.b, dim.a, region.span)
                try:
                    value = evaluate(substitute(extent, {}), _zero_env(extent))
                except EvalError:
                    return None
                shape.append(value)
        return shape

    def accesses_for(self, args: list[ir.Arg], explicit: list[ir.Access], kernel: ir.Kernel) -> list[ir.Access] | None:
        by_tensor: dict[str, ir.Arg] = {}
        for arg in args:
            if arg.region is not None:
                by_tensor.setdefault(self.root_of(arg.region.tensor), arg)
        explicit_roots = {self.root_of(a.region.tensor) for a in explicit}
        out: list[ir.Access] = []
        ok = True
        for acc in explicit:
            bound = by_tensor.get(self.root_of(acc.region.tensor))
            if bound is None:
                self.err("PG010", f"the task accesses '{acc.region.tensor}' but does not pass it to "
                         f"'{kernel.name}'", acc.span, hint="a kernel touches only the tensors it is passed")
                ok = False
            elif acc.kind not in DIRECTION_ACCESSES[bound.param.direction]:
                self.err("PG010", f"'{acc.region.tensor}' is passed as {bound.param.direction} "
                         f"('{bound.param.name}') but the task {ACCESS_VERB[acc.kind]}", acc.span,
                         [Note(f"parameter '{bound.param.name}' declared here", bound.param.span)],
                         hint="the direction decides the runtime's edges: In reads, Out writes, InOut both, "
                              "atomic_add accumulates")
                ok = False
            else:
                out.append(acc)
        for arg in args:
            if arg.region is None or self.root_of(arg.region.tensor) in explicit_roots:
                continue
            for kind in DIRECTION_DEFAULT[arg.param.direction]:
                out.append(ir.Access(kind, arg.region, (), arg.span))
        return out if ok else None

    def root_of(self, name: str) -> str:
        t = self.tensors.get(name)
        if t is not None:
            return t.base or t.name
        carry = self.carries.get(name)
        return carry.name if carry else name


def _closest(name: str, candidates: Iterable[str]) -> str | None:
    """The declared name most like a misspelt `name` (difflib ratio >= 0.8), for a hint."""
    close = difflib.get_close_matches(name, sorted(set(candidates)), n=1, cutoff=0.8)
    return close[0] if close else None


def _boxes_overlap(a: list[tuple[int, int]], ta: str, b: list[tuple[int, int]], tb: str,
                   tensors: Mapping[str, ir.Tensor]) -> bool:
    """Overlap of two boxes of one buffer: per dimension for one tensor name, else flat intervals."""
    if ta == tb:
        return all(x[0] < y[1] and y[0] < x[1] for x, y in zip(a, b))

    def flat(box: list[tuple[int, int]], shape: tuple[int, ...]) -> tuple[int, int]:
        strides = [math.prod(shape[i + 1:]) for i in range(len(shape))]
        return (sum(lo * st for (lo, _), st in zip(box, strides)),
                sum((hi - 1) * st for (_, hi), st in zip(box, strides)) + 1)

    fa, fb = flat(a, tensors[ta].shape), flat(b, tensors[tb].shape)
    return fa[0] < fb[1] and fb[0] < fa[1]


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
