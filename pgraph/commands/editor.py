"""What an editor asks of one open .pgl file: its diagnostics, the declaration of a name, hover text.

The language server (pgraph.commands.lsp) is a thin layer of LSP messages over this module,
which knows nothing of the protocol: positions here are 1-based lines and 1-based columns in
code points, as in every pgraph Span; the server converts them to the protocol's UTF-16 units.

`analyze(path, opts)` runs what `pgraph check` runs on the file (with the editor's unsaved
buffers as `opts.sources`): the whole pipeline, or, for an include-only file that files of the
project include, the check in their context (pgraph.commands.context). It keeps
- the diagnostics placed in this file: those located in it; a diagnostic located in another
  file with a note in this one (a call in the includer that does not match a kernel declared
  here) at that note; a diagnostic in a file this one includes at the `include` line that
  leads there, its message prefixed with the place (as clangd reports errors in headers);
- the declarations of every file of the program (constants, tensors, scalars, views, kernels,
  kernel tables, fragments, tasks and their waves, lets, loop, task and item axes, carries),
  for go-to-definition, and the lowered Program and the Plan, for hover: a task's task count
  and blocks (whole program and per layer) and the regions it reads and writes, a tensor's
  shape, dtype and storage, a constant's folded value.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import attrs

from pgraph import records
from pgraph.diagnostics import Diagnostic, DiagnosticBag, Severity
from pgraph.frontend import ast
from pgraph.frontend.loader import Loaded, display_name, real_path
from pgraph.pipeline import Options, Stopped, run_until
from pgraph.source import Span

__all__ = ["Analysis", "EditorDiagnostic", "Related", "Symbol", "analyze", "definition", "hover"]


@records.shared_repr
@attrs.define(repr=False)
class Related:
    """A place another part of a diagnostic points at (a note with a span): file, 1-based range, text."""

    path: Path
    line: int
    col: int
    end_line: int
    end_col: int
    message: str


@records.shared_repr
@attrs.define(repr=False)
class EditorDiagnostic:
    """A diagnostic placed in the analysed file: 1-based range (end exclusive), severity, code
    (None for the server's own word: a context that could not check the file), the message with
    the spanless notes and the hint appended, and the related places."""

    line: int
    col: int
    end_line: int
    end_col: int
    severity: Severity
    code: str | None
    message: str
    related: list[Related] = attrs.Factory(list)


@records.shared_repr
@attrs.define(repr=False)
class Symbol:
    """A declaration: its name, kind, the span of the name, the whole declaration, and for a
    local name (a let, an axis, a carry) the span it is visible in."""

    name: str
    kind: str
    span: Span
    decl: Span
    visible: Span | None = None


@records.shared_repr
@attrs.define(repr=False)
class Analysis:
    """One analysis of an open file (see the module docstring). `context` names the includer
    whose Program and Plan the hover reads, for an include-only file."""

    path: Path
    diagnostics: list[EditorDiagnostic]
    stopped: Stopped | None
    symbols: list[Symbol]
    includes: list[tuple[Span, Path]]
    context: str | None = None


# ---- diagnostics ------------------------------------------------------------------------------

def _same(span: Span | None, path: Path) -> bool:
    return span is not None and span.file.path is not None and real_path(span.file.path) == path


def _text(d: Diagnostic, keep_spanned: bool = False) -> str:
    """The message, then the notes without a span (or all, with `keep_spanned`) and the hint."""
    parts = [d.message]
    parts.extend(f"note: {n.message}" for n in d.notes if keep_spanned or n.span is None)
    if d.hint:
        parts.append(f"hint: {d.hint}")
    return "\n".join(parts)


def _related(d: Diagnostic) -> list[Related]:
    return [Related(n.span.file.path, n.span.line, n.span.col, n.span.end_line, n.span.end_col, n.message)
            for n in d.notes if n.span is not None and n.span.file.path is not None]


def place(diags: list[Diagnostic], path: Path, loaded: Loaded | None) -> list[EditorDiagnostic]:
    """The diagnostics of a run, placed in the file `path` (see the module docstring)."""
    out: list[EditorDiagnostic] = []
    for d in diags:
        sev = d.level
        if d.span is None:
            out.append(EditorDiagnostic(1, 1, 1, 2, sev, d.code, _text(d), _related(d)))
            continue
        s = d.span
        if _same(s, path):
            out.append(EditorDiagnostic(s.line, s.col, s.end_line, s.end_col, sev, d.code, _text(d), _related(d)))
            continue
        here = next((n for n in d.notes if _same(n.span, path)), None)
        where = f"{s.location()}: {sev.value}[{d.code}]"
        if here is not None and here.span is not None:
            n = here.span
            out.append(EditorDiagnostic(n.line, n.col, n.end_line, n.end_col, sev, d.code,
                                        f"{here.message}: {where}: {_text(d)}",
                                        [Related(s.file.path, s.line, s.col, s.end_line, s.end_col, d.message)]
                                        if s.file.path is not None else []))
            continue
        if sev is Severity.NOTE:
            continue  # a note of another file stays there
        chain = loaded.include_chain.get(s.filename, ()) if loaded is not None else ()
        at = chain[0] if chain and _same(chain[0], path) else None
        line, col, end_line, end_col = (at.line, at.col, at.end_line, at.end_col) if at else (1, 1, 1, 2)
        out.append(EditorDiagnostic(line, col, end_line, end_col, sev, d.code,
                                    f"in included file {where}: {_text(d)}",
                                    [Related(s.file.path, s.line, s.col, s.end_line, s.end_col, d.message)]
                                    if s.file.path is not None else []))
    return out


# ---- declarations -------------------------------------------------------------------------------

def _name_span(span: Span, name: str) -> Span:
    """The span of the first `name` at or after the start of `span` (the name of a declaration)."""
    lines = span.file.lines
    pattern = re.compile(rf"(?<![\w]){re.escape(name)}(?![\w])")
    for n in range(span.line, min(span.end_line, len(lines)) + 1):
        start = span.col - 1 if n == span.line else 0
        m = pattern.search(lines[n - 1], start)
        if m:
            return attrs.evolve(span, line=n, col=m.start() + 1, end_line=n, end_col=m.end() + 1)
    return span


class _Collector:
    """Walks the items of every loaded file and records their declarations."""

    def __init__(self) -> None:
        self.symbols: list[Symbol] = []

    def add(self, name: str, kind: str, decl: Span, visible: Span | None = None, at: Span | None = None) -> None:
        self.symbols.append(Symbol(name, kind, at if at is not None else _name_span(decl, name), decl, visible))

    def items(self, items: tuple[ast.Item, ...]) -> None:
        for item in items:
            match item:
                case ast.Const():
                    self.add(item.name, "const", item.span)
                case ast.TensorDecl() | ast.ScalarDecl() | ast.ViewDecl():
                    self.stmt(item, None)
                case ast.KernelDecl():
                    self.add(item.name, "kernel", item.span)
                    for p in item.params:
                        self.add(p.name, "param", p.span, item.span)
                case ast.KernelAlias():
                    for i, name in enumerate(item.names):
                        at = item.name_spans[i] if i < len(item.name_spans) else None
                        self.add(name, "kernel", item.span, at=at)
                case ast.KernelTable():
                    self.add(item.name, "kernels", item.span)
                case ast.Fragment():
                    self.add(item.name, "fragment", item.span, at=item.name_span)
                    self.block(item.block.stmts, item.span)
                case ast.Entry():
                    self.add(item.name, "entry", item.span)
                    self.block(item.block.stmts, item.span)
                case _:
                    pass

    def block(self, stmts: tuple[object, ...], visible: Span) -> None:
        for s in stmts:
            self.stmt(s, visible)

    def stmt(self, s: object, visible: Span | None) -> None:
        match s:
            case ast.TensorDecl():
                self.add(s.name, "tensor", s.span)
            case ast.ScalarDecl():
                self.add(s.name, "scalar", s.span)
            case ast.ViewDecl():
                self.add(s.name, "view", s.span)
            case ast.Let():
                self.add(s.name, "let", s.span, visible)
            case ast.ScopeStmt() | ast.PhaseStmt() | ast.InterleaveStmt():
                self.block(s.block.stmts, s.span)
            case ast.ForStmt():
                self.add(s.axis.var, "loop variable", s.axis.span, s.span)
                for c in s.carries:
                    self.add(c.name, "carry", c.span, s.span)
                self.block(s.block.stmts, s.span)
            case ast.Task():
                self.add(s.name, "task", s.span, at=s.name_span)
                for a in s.axes:
                    self.add(a.var, "axis", a.span, s.span)
                self.body(s.body, s.span)
            case _:
                pass

    def body(self, items: tuple[object, ...], visible: Span) -> None:
        for b in items:
            match b:
                case ast.Let():
                    self.add(b.name, "let", b.span, visible)
                case ast.ItemLoop():
                    self.add(b.axis.var, "item variable", b.axis.span, b.span)
                    self.body(b.items, b.span)
                case ast.Wave():
                    self.add(b.name, "wave", b.span, visible)
                    for a in b.axes:
                        self.add(a.var, "axis", a.span, b.span)
                case _:
                    pass


def symbols(loaded: Loaded) -> list[Symbol]:
    """The declarations of every file of `loaded`, in textual order."""
    c = _Collector()
    c.items(loaded.items)
    return c.symbols


def _includes(loaded: Loaded | None, path: Path) -> list[tuple[Span, Path]]:
    """The `include` statements of the file `path` (parsed again: the loader splices them away)."""
    if loaded is None:
        return []
    from pgraph.frontend.parser import parse_source

    file = next((i.span.file for i in loaded.items if _same(i.span, path)), None)
    if file is None and _same(Span(loaded.root, 1, 1, 1, 1), path):
        file = loaded.root
    if file is None:
        return []
    module = parse_source(file, DiagnosticBag())
    if module is None:
        return []
    return [(i.span, real_path(path.parent / i.path)) for i in module.items
            if isinstance(i, ast.Include) and i.path.strip()]


# ---- the analysis -------------------------------------------------------------------------------

def analyze(path: str | Path, opts: Options) -> Analysis:
    """Check the file `path` as `pgraph check` does (see the module docstring)."""
    from pgraph.commands import context

    real = real_path(Path(path))
    bag = DiagnosticBag()
    stopped = run_until(path, opts, bag, "plan")
    if stopped.program is None and context.include_only(stopped.loaded):
        assert stopped.loaded is not None
        result = context.check_in_context(path, opts, stopped.loaded)
        if result is not None:
            diags = place(result.diagnostics, real, result.stopped.loaded if result.stopped else stopped.loaded)
            for name in result.incomplete:
                diags.append(EditorDiagnostic(
                    1, 1, 1, 2, Severity.WARNING, None,
                    f"not fully checked in the context of {name}: errors outside this file stopped that check "
                    "before planning (open that file to see them)"))
            ctx_stopped = result.stopped or stopped
            loaded = ctx_stopped.loaded or stopped.loaded
            return Analysis(real, diags, ctx_stopped, symbols(loaded) if loaded else [],
                            _includes(stopped.loaded, real), result.contexts[0] if result.contexts else None)
    diags = place(bag.sorted(), real, stopped.loaded)
    return Analysis(real, diags, stopped, symbols(stopped.loaded) if stopped.loaded else [],
                    _includes(stopped.loaded, real))


def _inside(span: Span, line: int, col: int) -> bool:
    return (span.line, span.col) <= (line, col) <= (span.end_line, span.end_col)


def word_at(text: str, line: int, col: int) -> tuple[str, int] | None:
    """The name under (line, col) of `text` (1-based, code points) and its first column, or None."""
    lines = text.split("\n")
    if not 1 <= line <= len(lines):
        return None
    s = lines[line - 1]
    for m in re.finditer(r"[A-Za-z_][A-Za-z_0-9]*", s):
        if m.start() + 1 <= col <= m.end() + 1:
            return m.group(), m.start() + 1
    return None


#: The kind of declaration the word before a name asks for.
_WANTS = {"call": ("kernel", "kernels"), "use": ("fragment",), "deps": ("task",), "taskids": ("task",)}


def _wanted(line_text: str, start: int) -> tuple[str, ...] | None:
    """The kinds a name at column `start` can be, judging by the text before it."""
    before = line_text[:start - 1]
    m = re.search(r"(\w+)\s*$", before)
    if m and m.group(1) in _WANTS:
        return _WANTS[m.group(1)]
    if re.search(r"\bdeps\s*\([^)]*$", before) or re.search(r"\btaskids\b[^{}]*$", before):
        return ("task",)
    return None


def resolve(analysis: Analysis, text: str, line: int, col: int) -> list[Symbol]:
    """The declarations the name at (line, col) of the analysed file refers to (the innermost
    local first; else every global of that name, narrowed by what the words before it ask for)."""
    found = word_at(text, line, col)
    if found is None:
        return []
    name, start = found
    named = [s for s in analysis.symbols if s.name == name]
    own = [s for s in named if _same(s.span, analysis.path) and _inside(s.span, line, col)]
    if own:
        return own[:1]
    local = [s for s in named if s.visible is not None and _same(s.visible, analysis.path)
             and _inside(s.visible, line, col)]
    if local:
        return [min(local, key=lambda s: (s.visible.end_line - s.visible.line, s.visible.end_col))]  # type: ignore[union-attr]
    glob = [s for s in named if s.visible is None]
    wants = _wanted(text.split("\n")[line - 1], start)
    if wants:
        glob = [s for s in glob if s.kind in wants] or glob
    # a name of a fragment's body can be a carry or let of the loop a `use` splices it into
    return glob or [s for s in named if s.kind in ("carry", "let", "loop variable")]


def definition(analysis: Analysis, text: str, line: int, col: int) -> list[tuple[Path, Span | None]]:
    """Where the name or include at (line, col) is declared: (file, name span; None: the file's start)."""
    for span, target in analysis.includes:
        if _inside(span, line, col):
            return [(target, None)]
    return [(s.span.file.path, s.span) for s in resolve(analysis, text, line, col) if s.span.file.path is not None]


# ---- hover --------------------------------------------------------------------------------------

def hover(analysis: Analysis, text: str, line: int, col: int) -> str | None:
    """Markdown for the name at (line, col): what the Program and the Plan know of it."""
    for span, target in analysis.includes:
        if _inside(span, line, col):
            return f"include `{display_name(target)}`"
    found = resolve(analysis, text, line, col)
    if not found:
        return None
    sym = found[0]
    program = analysis.stopped.program if analysis.stopped else None
    plan = analysis.stopped.plan if analysis.stopped else None
    head = f"```pgl\n{sym.decl.file.line(sym.decl.line).strip()}\n```"
    where = f"{sym.kind} `{sym.name}`, declared at {sym.span.location()}"
    body: list[str] = []
    if program is None:
        body.append("(not lowered: the file has errors before name resolution)")
    else:
        body.extend(_facts(sym, program, plan))
    if analysis.context:
        body.append(f"_in the context of {analysis.context}_")
    return "\n\n".join([head, where, *body])


def _dims(shape: tuple[int, ...], runtime: tuple[bool, ...] = ()) -> str:
    return ", ".join(("runtime " if i < len(runtime) and runtime[i] else "") + str(d) for i, d in enumerate(shape))


def _facts(sym: Symbol, program: object, plan: object) -> Iterator[str]:
    """The lines of a hover after the declaration (see `hover`)."""
    from pgraph.ir.program import Program

    assert isinstance(program, Program)
    match sym.kind:
        case "const":
            if sym.name in program.consts:
                value = program.consts[sym.name]
                over = " (overridden)" if sym.name in getattr(program, "overridden", ()) else ""
                yield f"= **{value:,}**{over}"
        case "tensor" | "view":
            t = program.tensors.get(sym.name)
            if t is not None:
                yield f"**{t.dtype}[{_dims(t.shape, t.runtime)}]**, {_storage(program, t)}"
        case "scalar":
            sc = program.scalars.get(sym.name)
            if sc is not None:
                yield f"**{sc.dtype}**, orchestration scalar argument {sc.arg_index}"
        case "kernel":
            k = program.kernels.get(sym.name)
            if k is not None:
                yield from _kernel(k)
        case "task":
            yield from _task(sym.name, program, plan)
        case _:
            pass


def _storage(program: object, t: object) -> str:
    """Where a tensor lives: an orchestration argument, a heap allocation of a scope, a view."""
    from pgraph.ir.program import Program, Tensor
    from pgraph.kinds import Storage

    assert isinstance(program, Program) and isinstance(t, Tensor)
    if t.storage is Storage.EXTERNAL:
        return f"external: orchestration tensor argument {t.arg_index}"
    if t.base is not None:
        return f"a view of `{t.base}` (allocates nothing)"
    scope = program.scopes[t.scope] if t.scope is not None and t.scope < len(program.scopes) else None
    if scope is None:
        return str(t.storage)
    return f"allocated on the heap of the scope at depth {scope.depth} (ring {scope.ring})"


def _kernel(k: object) -> Iterator[str]:
    from pgraph.ir.program import Kernel
    from pgraph.kinds import Direction

    assert isinstance(k, Kernel)
    yield f"**{'extern ' if k.extern else ''}{k.core}** kernel" + (f", an alias of `{k.alias_of}`" if k.alias_of else "") + (
        f", source `{k.source}`" if k.source else "")
    rows = []
    for p in k.params:
        if p.direction is Direction.SCALAR:
            rows.append(f"- `{p.name}`: scalar {p.dtype}")
        else:
            shape = f"[{_dims(p.shape)}]" if p.shape is not None else " (any shape)"
            rows.append(f"- `{p.name}`: {p.direction} {p.dtype}{shape}")
    if rows:
        yield "\n".join(rows)


def _task(name: str, program: object, plan: object) -> Iterator[str]:
    """A task declaration: per dispatch (one per wave of a `tiles`), its tasks and blocks in the
    whole program and per layer (from the Plan's instance graph), its kernel and flags, and the
    regions it reads and writes (folded)."""
    from pgraph.ir.program import Program
    from pgraph.plan.base import Plan
    from pgraph.plan.counts import Counts, count

    assert isinstance(program, Program)
    tileset = program.tilesets.get(name)
    names = tileset.dispatches if tileset is not None else (name,)
    per_layer = isinstance(plan, Plan) and plan.has(Counts) and plan.get(Counts).per_layer is not None
    for dname in names:
        d = next((x for x in program.dispatches if x.name == dname), None)
        if d is None:
            continue
        lines = [f"**{d.name}**: {d.kind}" + (f" `{d.kernel_table or d.kernel}`" if d.kernel else "")
                 + "".join(f", {f}" for f, on in (("early", d.early), ("sync_start", d.sync_start)) if on)]
        if isinstance(plan, Plan):
            whole = count(plan, lambda inst, n=dname: inst.dispatch == n, True)  # type: ignore[misc]
            tasks = whole["tasks"] + whole["dummy_tasks"]
            text = f"{tasks:,} task(s), {whole['blocks']:,} block(s) in the program"
            if per_layer:
                layer = count(plan, lambda inst, n=dname: inst.dispatch == n, False)  # type: ignore[misc]
                text += f"; per layer {layer['tasks'] + layer['dummy_tasks']:,} task(s), {layer['blocks']:,} block(s)"
            lines.append(text)
        else:
            lines.append(f"{d.task_count:,} task(s) per iteration, {d.block_count:,} block(s) each")
        axes = [f"{a.var} in {a.lo}..{a.hi}" for a in (*d.task_axes, *d.block_axes)]
        if axes:
            lines.append("axes: " + ", ".join(axes))
        for a in d.accesses:
            t = program.tensors.get(a.region.tensor)
            shape = f" of {t.dtype}[{_dims(t.shape)}]" if t is not None else ""
            lines.append(f"- {_ACCESS[str(a.kind)]} `{_region(a.region)}`{shape}")
        yield "\n".join(lines)


_ACCESS = {"read": "reads", "write": "writes", "atomic": "atomic_add"}


def _region(r: object) -> str:
    """A folded region as text: `q_acc[:, i / 5 * 512 +: 512]`."""
    from pgraph.frontend.unparse import expr
    from pgraph.ir.program import RegionRef
    from pgraph.kinds import DimKind

    assert isinstance(r, RegionRef)
    if r.dims is None:
        text = r.tensor
    else:
        parts = []
        for d in r.dims:
            if d.kind is DimKind.ALL:
                parts.append(":")
            elif d.kind is DimKind.INDEX and d.a is not None:
                parts.append(expr(d.a))
            elif d.kind is DimKind.RANGE and d.a is not None and d.b is not None:
                parts.append(f"{expr(d.a)}:{expr(d.b)}")
            elif d.a is not None and d.b is not None:
                parts.append(f"{expr(d.a)} +: {expr(d.b)}")
        text = f"{r.tensor}[{', '.join(parts)}]"
    if r.indirect is not None:
        text += " indirect" + (f"({', '.join(r.indirect)})" if r.indirect else "")
    return text
