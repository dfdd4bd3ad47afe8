"""The forms of declarations that the grammar does not fix, checked on the AST with lowering.

The grammar lets a task keyword take any index space, flags and body so that a misplaced
piece gets a precise diagnostic instead of a parse error. Checked here, on the AST, in the
same stage as lowering (one run reports both): a dummy takes no body, waves belong to `tiles`,
an item loop holds lets and accesses only, an `external` tensor is a top-level declaration and
every other tensor is not (PG019); a compute task calls exactly one kernel (PG028, PG003);
names are declared once per index space, kernel and tile set (PG003); a kernel's scalars come
after its tensors (PG025); flags are given once and `sync_start` is for SPMD grids (PG036);
allocations have no `runtime` dimension (PG038). What these checks meet of other stages'
rules is handed to the owner (`pgraph.findings`): an `at` with an index space or an
`spmd`/`parallel`/`tiles` without one (PG020), `tiles` without a wave (PG021), a unit suffix
(PG001).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from pgraph.diagnostics import DiagnosticBag, Edit, Fix, Note, Severity
from pgraph.findings import AtIndexSpace, MissingIndexSpace, NoWave, UnitSuffix
from pgraph.frontend import ast
from pgraph.frontend.loader import Loaded
from pgraph.kinds import Direction, Flag, TaskKind, unhandled
from pgraph.lower.renames import rename_second
from pgraph.source import Span


class _Forms:
    def __init__(self, loaded: Loaded, bag: DiagnosticBag) -> None:
        self.loaded = loaded
        self.bag = bag

    def err(self, code: str, message: str, span: Span | None, notes: Iterable[Note] = (), hint: str | None = None,
            severity: Severity | None = None, fix: Fix | None = None) -> None:
        self.bag.add(code, message, span, notes, hint, severity, fix)  # the pipeline's hooks add the include chain

    def dups(self, items: Iterable[tuple[str, Span]], what: str) -> None:
        seen: dict[str, Span] = {}
        for name, span in items:
            if name in seen:
                hint, fix = rename_second(self.loaded, name, span, what)
                self.err("PG003", f"{what} '{name}' is declared twice", span, [Note("first declared here", seen[name])],
                         hint=hint, fix=fix)
            else:
                seen[name] = span

    # ---- top level ----
    def items(self, items: Sequence[ast.Item]) -> None:
        for item in items:
            match item:
                case ast.TensorDecl():
                    if not item.external:
                        self.err("PG019", f"top-level tensor '{item.name}' must be `external` (an orchestration "
                                 "argument)", item.span,
                                 hint="add `external`, or declare it inside a scope to allocate it there")
                case ast.KernelDecl():
                    self.kernel(item)
                case ast.KernelAlias():
                    self.dups(zip(item.names, item.name_spans or [item.span] * len(item.names)), "kernel")
                    if item.source is not None and len(item.names) > 1:
                        self.err("PG019", f"`source` names one file, but the alias declares {len(item.names)} "
                                 f"kernels ({', '.join(item.names)})", item.span,
                                 hint="declare each kernel with its own source on a line of its own: "
                                      f'`kernel {item.names[0]} = {item.base} source "..."`')
                case ast.KernelTable():
                    pass
                case ast.Target():
                    for ti in item.items:
                        self.unit(ti.key, ti.unit, ti.unit_span, ti.expr, target=True)
                case ast.Cost():
                    self.unit(item.name, item.unit, item.unit_span, item.expr, target=False)
                case ast.Entry() | ast.Fragment():
                    self.block(item.block)
                case ast.Const() | ast.Assert() | ast.ScalarDecl() | ast.ViewDecl() | ast.Include() | ast.Budget() \
                        | ast.Allow():
                    pass
                case _:
                    unhandled(item)

    def kernel(self, k: ast.KernelDecl) -> None:
        self.dups(((p.name, p.span) for p in k.params), "parameter")
        seen_scalar: ast.Param | None = None
        for p in k.params:
            if p.direction is Direction.SCALAR:
                seen_scalar = seen_scalar or p
            elif seen_scalar is not None:
                self.err("PG025", f"tensor parameter '{p.name}' follows scalar '{seen_scalar.name}'", p.span,
                         [Note("first scalar parameter", seen_scalar.span)],
                         hint="the runtime packs all tensors before any scalar (CoreTaskArgs: code 5 otherwise); "
                              "move the scalars last")

    def unit(self, key: str, unit: str | None, span: Span | None, expr: ast.Expr, target: bool) -> None:
        if unit is None or span is None:
            return
        self.bag.found(UnitSuffix(span=span, key=key, unit=unit, expr=expr, target=target))  # the frontend's PG001

    # ---- statements ----
    def block(self, block: ast.Block) -> None:
        for stmt in block.stmts:
            match stmt:
                case ast.TensorDecl():
                    if stmt.external:
                        self.err("PG019", f"tensor '{stmt.name}' is declared `external` inside a block; an "
                                 "orchestration argument is a top-level declaration", stmt.span,
                                 hint="move the declaration to the top level of the file, or drop `external` to "
                                      "allocate the tensor in this scope")
                    elif any(stmt.runtime):
                        self.err("PG038", f"allocation '{stmt.name}' has a `runtime` dimension; only an "
                                 "orchestration argument's shape is read at run time", stmt.span,
                                 hint="give the allocation a constant shape (its TensorCreateInfo is written "
                                      "when the spec is built)")
                case ast.Task():
                    self.task(stmt)
                case ast.ScopeStmt() | ast.ForStmt() | ast.PhaseStmt() | ast.InterleaveStmt():
                    self.block(stmt.block)
                case ast.ViewDecl() | ast.Let() | ast.Assert() | ast.TaskIds() | ast.Use() | ast.Allow():
                    pass
                case _:
                    unhandled(stmt)

    def task(self, t: ast.Task) -> None:
        self.dups(((a.var, a.span) for a in t.axes), "index variable")
        if t.kind is TaskKind.AT and t.axes:
            self.bag.found(AtIndexSpace(span=t.axes[0].span, task=t.name))
        if t.kind in (TaskKind.SPMD, TaskKind.PARALLEL, TaskKind.TILES) and not t.axes:
            self.bag.found(MissingIndexSpace(span=t.name_span, task=t.name, kind=str(t.kind)))
        self.flags(t)
        if t.kind is TaskKind.DUMMY:
            if t.body:
                self.err("PG019", f"dummy '{t.name}' is dependency-only and takes no body", t.span,
                         hint="a dummy has no kernel; use `at` for a task that does work")
            return
        waves = [b for b in t.body if isinstance(b, ast.Wave)]
        if t.kind is not TaskKind.TILES and waves:
            self.err("PG019", "waves belong to a `tiles` declaration", waves[0].span)
        if t.kind is TaskKind.TILES and not waves:
            self.bag.found(NoWave(span=t.name_span, tileset=t.name))
        self.dups(((w.name, w.span) for w in waves), "wave")
        for w in waves:
            self.dups(((a.var, a.span) for a in w.axes), "index variable")
        calls = [b for b in t.body if isinstance(b, ast.Call)]
        for extra in calls[1:]:
            self.err("PG003", "a task calls one kernel", extra.span, [Note("first call", calls[0].span)])
        wave_calls = [w for w in waves if w.call is not None] if t.kind is TaskKind.TILES else []
        if calls and wave_calls:
            self.err("PG003", f"wave '{wave_calls[0].name}' calls a kernel, but the body of '{t.name}' already "
                     "calls one for every wave", wave_calls[0].call.span if wave_calls[0].call else wave_calls[0].span,
                     [Note("the body's call", calls[0].span)],
                     hint="either one `call` in the body for every wave, or a `call` on every wave line")
        elif not calls and wave_calls:
            for w in waves:
                if w.call is None:
                    self.err("PG028", f"wave '{w.name}' of '{t.name}' has no `call`, while other waves have their "
                             "own", w.span, hint="add `call KERNEL(args)` at the end of the wave line")
        elif not calls:
            self.err("PG028", f"task '{t.name}' has no `call`", t.name_span,
                     hint="add `call KERNEL(args)`; a task that only orders others is a `dummy`")
        for b in t.body:
            if isinstance(b, ast.ItemLoop):
                for sub in b.items:
                    if not isinstance(sub, (ast.Let, ast.Access)):
                        self.err("PG019", "only `let` and access clauses may stand in an item loop", sub.span)

    def flags(self, t: ast.Task) -> None:
        """PG036: a flag given twice (warning), `sync_start` on anything but an SPMD grid (error)."""
        self.repeated(t.flags, t.flag_spans, f"'{t.name}'")
        waves = [b for b in t.body if isinstance(b, ast.Wave)] if t.kind is TaskKind.TILES else []
        for w in waves:
            self.repeated(w.flags, w.flag_spans, f"wave '{w.name}'")
            for f, span in zip(w.flags, w.flag_spans):
                if f in t.flags:
                    first = t.flag_spans[t.flags.index(f)]
                    self.err("PG036", f"wave '{w.name}' repeats the `{f}` flag of its declaration '{t.name}'", span,
                             [Note("the declaration's flag", first)], severity=Severity.WARNING,
                             hint=f"drop one of the two: a flag on `tiles {t.name}` applies to every wave",
                             fix=Fix((Edit.delete(span),)))
        if t.kind is TaskKind.TILES:
            if Flag.SYNC_START in t.flags:
                for w in waves:
                    if w.kind is not TaskKind.SPMD:
                        span = t.flag_spans[t.flags.index(Flag.SYNC_START)]
                        self.err("PG036", f"`sync_start` on '{t.name}' applies to its `parallel` wave '{w.name}': "
                                 "only an SPMD grid starts its blocks together", span, [Note("the wave", w.span)],
                                 hint="put `sync_start` on the SPMD wave line instead of the declaration")
            for w in waves:
                if w.kind is not TaskKind.SPMD and Flag.SYNC_START in w.flags:
                    span = w.flag_spans[w.flags.index(Flag.SYNC_START)]
                    self.err("PG036", f"`sync_start` on `parallel` wave '{w.name}': only an SPMD grid starts its "
                             "blocks together", span, hint="drop `sync_start`, or make the wave `spmd`",
                             fix=Fix((Edit.delete(span),)))
        elif t.kind is not TaskKind.SPMD and Flag.SYNC_START in t.flags:
            span = t.flag_spans[t.flags.index(Flag.SYNC_START)]
            what = "a dummy" if t.kind is TaskKind.DUMMY else f"`{t.kind}` task"
            self.err("PG036", f"`sync_start` on {what} '{t.name}': only an SPMD grid starts its blocks together "
                     "(simpler: require_sync_start launches a grid's blocks all-or-nothing)", span,
                     hint="drop `sync_start`, or make the task an `spmd` grid", fix=Fix((Edit.delete(span),)))

    def repeated(self, flags: Sequence[Flag], spans: Sequence[Span], owner: str) -> None:
        seen: dict[Flag, Span] = {}
        for f, span in zip(flags, spans):
            if f in seen:
                self.err("PG036", f"the `{f}` flag of {owner} is given twice", span,
                         [Note("first given here", seen[f])], severity=Severity.WARNING, hint="drop the second one",
                         fix=Fix((Edit.delete(span),)))
            else:
                seen[f] = span


def check_forms(loaded: Loaded, bag: DiagnosticBag) -> None:
    """Report every form error of the loaded files (see the module docstring)."""
    _Forms(loaded, bag).items(loaded.items)
