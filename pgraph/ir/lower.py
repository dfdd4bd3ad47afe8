"""Lower the AST to the Program IR: names, constants, overrides, kernels, scopes, waves.

Diagnostics are appended to the bag; lowering continues past an error where it can so
one run reports as much as possible, and returns None when any error was found.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import attrs

from pgraph.diagnostics import Note
from pgraph.ir import program as ir
from pgraph.ir.fragments import choose_entry
from pgraph.ir.loop_identity import LoopIdentity
from pgraph.ir.lower_base import MAX_CHAIN, Override, _closest, _Env, describe_values, expr_span
from pgraph.ir.lower_tasks import TaskLowering
from pgraph.source import Span
from pgraph.syntax import ast
from pgraph.target import A2A3_DEFAULTS, DEFAULT_COSTS

__all__ = ["Lowerer", "Override"]


class Lowerer(TaskLowering, LoopIdentity):
    """One lowering run; `run()` returns the Program or None on errors."""

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
            elif isinstance(stmt, ast.InterleaveStmt):
                self.walk_interleave(stmt, scope, env, phase, loops)
            elif isinstance(stmt, ast.TaskIds):
                self.taskids.setdefault(scope, []).extend((n, stmt.span) for n in stmt.names)
            elif isinstance(stmt, ast.Use):
                self.use_fragment(stmt, scope, env, phase, loops)
            elif isinstance(stmt, ast.Task):
                self.lower_task(stmt, scope, env, phase, loops)

    def walk_interleave(self, stmt: ast.InterleaveStmt, scope: int, env: _Env, phase: str | None,
                        loops: tuple[int, ...]) -> None:
        if self.interleave is not None:
            self.err("PG035", "an `interleave` block may not contain another one", head(stmt.span, "interleave"),
                     [Note("the enclosing interleave block", head(self.interleave[1], "interleave"))],
                     hint="list every declaration to interleave in one block")
            self.walk(stmt.block, scope, env, phase, loops)  # declare its names: no follow-on errors
            return
        self.interleave = (self.interleave_count, stmt.span)
        self.interleave_count += 1
        try:
            self.walk(stmt.block, scope, env, phase, loops)
        finally:
            self.interleave = None

    def check_not_in_interleave(self, what: str, span: Span, keyword: str) -> None:
        """PG035 for a scope or loop inside `interleave` (its tasks could not be round-robined).

        The caller lowers the statement anyway, so the names it declares exist and the
        program reports no follow-on errors (lowering errors stop the pipeline regardless).
        """
        if self.interleave is None:
            return
        self.err("PG035", f"{what} may not appear inside an `interleave` block", head(span, keyword),
                 [Note("the interleave block", head(self.interleave[1], "interleave"))],
                 hint="interleave declarations of one scope and loop; put the scope or loop around the block")

    def walk_scope(self, stmt: ast.ScopeStmt, scope: int, env: _Env, phase: str | None, loops: tuple[int, ...]) -> None:
        self.check_not_in_interleave("a scope", stmt.span, f"{stmt.mode} scope")
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
        self.check_not_in_interleave("a loop", stmt.span, "for")
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


def head(span: Span, keyword: str) -> Span:
    """The first `len(keyword)` columns of `span`: carets under a statement's keyword, not its block."""
    return attrs.evolve(span, end_line=span.line, end_col=span.col + len(keyword))
