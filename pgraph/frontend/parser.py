"""Parse .pgl text into the AST: Lark LALR over grammar/pgl.lark plus one Transformer."""

from __future__ import annotations

import functools
import os
import re
import sys
import zlib
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pgraph.diagnostics import DiagnosticBag, Edit, Fix, Note
from pgraph.expr import MAX_INT_BITS
from pgraph.fastpath import reference_mode
from pgraph.findings import LiteralTooLarge
from pgraph.frontend import ast, import_lark, lalr
from pgraph.kinds import AccessKind, Core, DimKind, Direction, Flag, ScopeMode, TaskKind
from pgraph.source import SourceFile, Span, span_from_meta

if TYPE_CHECKING:
    import lark

#: `reads|writes|atomic_add` keyword -> access kind.
ACCESS_KINDS = {"reads": AccessKind.READ, "writes": AccessKind.WRITE, "atomic_add": AccessKind.ATOMIC}


#: The LALR parser of grammar/pgl.lark saved by Lark (`Lark.save`), shipped beside the grammar
#: so that a process that needs Lark (a syntax error, PGRAPH_REFERENCE=1) loads it (~13 ms)
#: instead of building it (~110 ms; measured: a whole `pgraph check` of a syntax error, 0.19 s
#: with the file, 0.27 s without). The file starts with TABLES_MAGIC, the digest of the grammar
#: and the version of the Lark that saved it; a file of another grammar or another Lark is not
#: used (Lark builds the parser). `python3 -m pgraph.frontend.parser` rewrites it, and
#: tests/unit/test_scale.py checks that it matches.
TABLES_FILE = "pgl.lalr"
TABLES_MAGIC = b"pgraph-lalr-2 "


def _grammar_file(name: str) -> Path | None:
    """A file of the grammar folder: the source checkout's, else the installed package data."""
    here = Path(__file__).resolve().parents[2] / "grammar" / name  # the source checkout
    if here.is_file():
        return here
    data = resources.files("pgraph").joinpath(f"grammar/{name}")
    return Path(str(data)) if data.is_file() else None


def _grammar_text() -> str:
    """The grammar, from the installed package data or the source checkout."""
    path = _grammar_file("pgl.lark")
    if path is None:
        raise FileNotFoundError("grammar/pgl.lark is missing from the pgraph installation")
    return path.read_text(encoding="utf-8")


def grammar_digest(text: str) -> bytes:
    """The CRC-32 and length (ASCII) that name the grammar a saved table was built from: enough to
    notice a stale file (hashlib would cost its OpenSSL import at every start)."""
    data = text.encode("utf-8")
    return f"{zlib.crc32(data):08x}-{len(data)}".encode("ascii")


def build_parser(text: str | None = None) -> lark.Lark:
    """The LALR parser built from the grammar text (what the saved tables must equal)."""
    lark = import_lark()
    return lark.Lark(text if text is not None else _grammar_text(), parser="lalr", propagate_positions=True,
                     maybe_placeholders=False)


def _saved_header(text: str, lark_version: str) -> bytes:
    """The first line of grammar/pgl.lalr saved from the grammar `text` by that Lark."""
    return TABLES_MAGIC + grammar_digest(text) + b" lark-" + lark_version.encode("ascii", "replace") + b"\n"


def load_saved_parser(text: str) -> lark.Lark | None:
    """The saved parser when it was saved from the grammar `text` by the installed Lark, else
    None (a stale or missing file, or one of another Lark)."""
    path = _grammar_file(TABLES_FILE)
    if path is None:
        return None
    lark = import_lark()
    with path.open("rb") as f:
        if f.readline() != _saved_header(text, lark.__version__):
            return None
        return lark.Lark.load(f)


def save_parser(path: Path) -> None:
    """Build the parser from the grammar and write its tables with their grammar digest and
    Lark's version to `path` (Lark's saved parser), and the start-up driver's tables as the
    module `lalr.TABLES_MODULE`."""
    text = _grammar_text()
    built = build_parser(text)
    version = import_lark().__version__
    tmp = path.with_suffix(".tmp")
    with tmp.open("wb") as f:
        f.write(_saved_header(text, version))
        built.save(f)
    tmp.replace(path)
    tables = Path(lalr.__file__).with_name("pgl_tables.py")
    tmp = tables.with_suffix(".tmp")
    tmp.write_text(lalr.dump_tables(lalr.build_tables(built), grammar_digest(text), version), encoding="utf-8")
    tmp.replace(tables)


@functools.cache
def _fast_driver() -> lalr.Driver | None:
    """The start-up driver of the installed grammar and Lark (read and digested once per
    process); None when the tables were built from another grammar or by another Lark: Lark,
    the parser of record, then parses every text (see `parse_source`)."""
    return lalr.driver(grammar_digest(_grammar_text()), lalr.installed_lark_version())


class DriverError(RuntimeError):
    """Under PGRAPH_VERIFY=1 (the test suite): the start-up driver failed other than by
    refusing a text Lark refuses too (an exception of its own, or a refusal of a text Lark
    accepts). An internal error: exit code 3."""


def _verifying() -> bool:
    """PGRAPH_VERIFY is set (as `pipeline.Options.verify` reads it; the suite sets it)."""
    return os.environ.get("PGRAPH_VERIFY", "") not in ("", "0")


@functools.cache
def parser() -> lark.Lark:
    """The one LALR parser (loaded from the saved tables, or built once per process)."""
    text = _grammar_text()
    return load_saved_parser(text) or build_parser(text)


_F = TypeVar("_F", bound=Callable[..., Any])


def with_meta(method: _F) -> _F:
    """Mark a rule method that takes (meta, children): the node's position, then its children."""
    method.with_meta = True  # type: ignore[attr-defined]
    return method


def _is_token(x: Any, ttype: str) -> bool:
    """Whether `x` is a token of terminal `ttype` (a Lark token or the start-up driver's)."""
    return isinstance(x, str) and getattr(x, "type", None) == ttype


class _LiteralError(Exception):
    """int() refused a literal of a node (Python's 4300-digit limit); `node` is the lark Tree."""

    def __init__(self, node: Any) -> None:
        super().__init__(node)
        self.node = node


class _ToAst:
    """Builds AST nodes; each method is named after the grammar rule (or alias) it handles and
    takes the rule's children (Tokens and the AST values of rule nodes), with the node's
    position first when marked `with_meta`. The start-up driver (`lalr.Driver`) calls them
    during the reductions; `transform` walks a Lark tree with them."""

    def __init__(self, file: SourceFile) -> None:
        self.file = file

    def transform(self, tree: Any) -> Any:
        """The AST of a Lark parse tree (children first, like Lark's Transformer; a rule with
        no method stays a Tree). Raises _LiteralError for an integer literal int() refuses."""
        lark = import_lark()
        children = [self.transform(c) if isinstance(c, lark.Tree) else c for c in tree.children]
        method = getattr(self, tree.data, None)
        if method is None:
            return lark.Tree(tree.data, children, tree.meta)
        try:
            return method(tree.meta, children) if getattr(method, "with_meta", False) else method(children)
        except ValueError as err:
            raise _LiteralError(tree) from err

    def _span(self, meta: Any, fallback: Span | None = None) -> Span:
        if meta.__class__ is lalr.Meta and not meta.empty:  # the driver's: every position is set
            return Span(self.file, meta.line, meta.column, meta.end_line, meta.end_column)
        if getattr(meta, "empty", False) and fallback is not None:
            return fallback
        return span_from_meta(self.file, meta)

    def _tok(self, tok: Any) -> Span:
        if tok.__class__ is lalr.Token:
            return Span(self.file, tok.line, tok.column, tok.end_line, tok.end_column)
        return span_from_meta(self.file, tok)

    # ---- top level ----
    @with_meta
    def start(self, meta: Any, items: list[Any]) -> ast.Module:
        return ast.Module(tuple(items), self._span(meta, Span(self.file, 1, 1, 1, 1)))

    @with_meta
    def include(self, meta: Any, c: list[Any]) -> ast.Include:
        return ast.Include(str(c[0])[1:-1], self._span(meta))

    @with_meta
    def const_decl(self, meta: Any, c: list[Any]) -> ast.Const:
        return ast.Const(str(c[0]), c[1], self._span(meta))

    @with_meta
    def assert_stmt(self, meta: Any, c: list[Any]) -> ast.Assert:
        msg = str(c[1])[1:-1] if len(c) > 1 else None
        return ast.Assert(c[0], msg, self._span(meta))

    @with_meta
    def tensor_decl(self, meta: Any, c: list[Any]) -> ast.TensorDecl:
        dims = c[2]
        shape = tuple(d[1] if isinstance(d, tuple) else d for d in dims)
        runtime = tuple(isinstance(d, tuple) for d in dims)
        flags = {str(x) for x in c[3:]}
        return ast.TensorDecl(str(c[0]), str(c[1]), shape, "external" in flags, self._span(meta),
                              runtime if any(runtime) else (), "created" in flags, "manual_dep" in flags)

    def tshape(self, c: list[Any]) -> tuple[Any, ...]:
        return tuple(c)

    def runtime_dim(self, c: list[Any]) -> tuple[str, Any]:
        return ("runtime", c[1])

    @with_meta
    def scalar_decl(self, meta: Any, c: list[Any]) -> ast.ScalarDecl:
        return ast.ScalarDecl(str(c[0]), str(c[1]), len(c) > 2, self._span(meta))

    @with_meta
    def view_decl(self, meta: Any, c: list[Any]) -> ast.ViewDecl:
        return ast.ViewDecl(str(c[0]), str(c[1]), c[2], self._span(meta))

    def shape(self, c: list[Any]) -> tuple[Any, ...]:
        return tuple(c)

    @with_meta
    def kernel_decl(self, meta: Any, c: list[Any]) -> ast.KernelDecl:
        extern = bool(c) and _is_token(c[0], "EXTERN")
        if extern:
            c = c[1:]
        name, core = str(c[0]), str(c[1])
        rest = c[2:]
        source = None
        if rest and _is_token(rest[0], "STRING"):
            source = str(rest[0])[1:-1]
            rest = rest[1:]
        includes = next((x[1] for x in rest if isinstance(x, tuple) and x and x[0] == "includes"), ())
        params = tuple(p for p in rest if isinstance(p, ast.Param))
        return ast.KernelDecl(name, Core(core), source, params, extern, self._span(meta), includes)

    def includes(self, c: list[Any]) -> tuple[str, tuple[str, ...]]:
        return ("includes", tuple(str(x)[1:-1] for x in c))

    @with_meta
    def kernel_alias(self, meta: Any, c: list[Any]) -> ast.KernelAlias:
        source = None
        if c and c[-1].type == "STRING":
            source = str(c[-1])[1:-1]
            c = c[:-1]
        *names, base = c
        return ast.KernelAlias(tuple(str(n) for n in names), str(base), source, self._span(meta),
                               tuple(self._tok(n) for n in names))

    @with_meta
    def kernel_table(self, meta: Any, c: list[Any]) -> ast.KernelTable:
        return ast.KernelTable(str(c[0]), tuple(str(x) for x in c[1:]), self._span(meta))

    @with_meta
    def tensor_param(self, meta: Any, c: list[Any]) -> ast.Param:
        shape = c[3] if len(c) > 3 else None
        return ast.Param(str(c[0]), Direction(str(c[1])), str(c[2]), shape, self._span(meta))

    @with_meta
    def scalar_param(self, meta: Any, c: list[Any]) -> ast.Param:
        return ast.Param(str(c[0]), Direction.SCALAR, str(c[1]), None, self._span(meta))

    # ---- entry, scopes ----
    @with_meta
    def entry_decl(self, meta: Any, c: list[Any]) -> ast.Entry:
        scoped = not any(_is_token(x, "UNSCOPED") for x in c)
        return ast.Entry(str(c[0]), c[-1], self._span(meta), scoped)

    @with_meta
    def block(self, meta: Any, c: list[Any]) -> ast.Block:
        return ast.Block(tuple(c), self._span(meta))

    @with_meta
    def scope_stmt(self, meta: Any, c: list[Any]) -> ast.ScopeStmt:
        ring = int(str(c[1]).replace("_", "")) if len(c) == 3 else None
        return ast.ScopeStmt(ScopeMode(str(c[0])), ring, c[-1], self._span(meta),
                             self._tok(c[1]) if len(c) == 3 else None)

    @with_meta
    def for_stmt(self, meta: Any, c: list[Any]) -> ast.ForStmt:
        var = c[0]
        lo, hi = c[1]
        scoped = not any(_is_token(x, "UNSCOPED") for x in c)
        carries = next((x for x in c[2:] if isinstance(x, tuple)), ())
        axis = ast.Axis(str(var), lo, hi, self._tok(var))
        return ast.ForStmt(axis, tuple(carries), c[-1], self._span(meta), scoped)

    @with_meta
    def target_decl(self, meta: Any, c: list[Any]) -> ast.Target:
        return ast.Target(str(c[0]), tuple(c[1:]), self._span(meta))

    @with_meta
    def target_item(self, meta: Any, c: list[Any]) -> ast.TargetItem:
        unit = c[2] if len(c) > 2 else None
        return ast.TargetItem(str(c[0]), c[1], self._span(meta), str(unit) if unit is not None else None,
                              self._tok(unit) if unit is not None else None)

    @with_meta
    def cost_decl(self, meta: Any, c: list[Any]) -> ast.Cost:
        unit = c[2] if len(c) > 2 else None
        return ast.Cost(str(c[0]), c[1], self._span(meta), str(unit) if unit is not None else None,
                        self._tok(unit) if unit is not None else None)

    @with_meta
    def budget_decl(self, meta: Any, c: list[Any]) -> ast.Budget:
        return ast.Budget(str(c[0]), c[1], self._span(meta))

    def carry(self, c: list[Any]) -> tuple[Any, ...]:
        return tuple(c)

    @with_meta
    def carry_item(self, meta: Any, c: list[Any]) -> ast.CarryItem:
        return ast.CarryItem(str(c[0]), str(c[1]), str(c[2]), self._span(meta))

    @with_meta
    def phase_stmt(self, meta: Any, c: list[Any]) -> ast.PhaseStmt:
        return ast.PhaseStmt(str(c[0]), c[1], self._span(meta))

    @with_meta
    def interleave_stmt(self, meta: Any, c: list[Any]) -> ast.InterleaveStmt:
        return ast.InterleaveStmt(c[0], self._span(meta))

    @with_meta
    def taskids_stmt(self, meta: Any, c: list[Any]) -> ast.TaskIds:
        return ast.TaskIds(tuple(str(x) for x in c), self._span(meta))

    @with_meta
    def let_stmt(self, meta: Any, c: list[Any]) -> ast.Let:
        return ast.Let(str(c[0]), c[1], self._span(meta))

    @with_meta
    def fragment_decl(self, meta: Any, c: list[Any]) -> ast.Fragment:
        return ast.Fragment(str(c[0]), c[1], self._span(meta), self._tok(c[0]))

    @with_meta
    def allow_stmt(self, meta: Any, c: list[Any]) -> ast.Allow:
        *codes, reason = c
        return ast.Allow(tuple(str(x) for x in codes), str(reason)[1:-1], self._span(meta),
                         tuple(self._tok(x) for x in codes))

    @with_meta
    def use_stmt(self, meta: Any, c: list[Any]) -> ast.Use:
        return ast.Use(str(c[0]), self._span(meta), self._tok(c[0]))

    # ---- tasks ----
    @with_meta
    def task(self, meta: Any, c: list[Any]) -> ast.Task:
        kind, name = TaskKind(str(c[0])), c[1]
        axes: tuple[ast.Axis, ...] = ()
        flags: list[Flag] = []
        flag_spans: list[Span] = []
        deps: tuple[ast.Dep, ...] | None = None
        deps_span: Span | None = None
        body: tuple[Any, ...] = ()
        body_span: Span | None = None
        for part in c[2:]:
            if isinstance(part, tuple) and part and part[0] == "flag":
                flags.append(part[1])
                flag_spans.append(part[2])
            elif isinstance(part, tuple) and part and part[0] == "deps":
                deps = (deps or ()) + part[1]
                deps_span = part[2]
            elif isinstance(part, tuple) and part and part[0] == "body":
                body = part[1]
                body_span = part[2]
            elif isinstance(part, tuple):
                axes = part
        return ast.Task(kind, str(name), axes, tuple(flags), deps, body, self._span(meta), self._tok(name),
                        tuple(flag_spans), deps_span, body_span)

    def index_space(self, c: list[Any]) -> tuple[Any, ...]:
        return tuple(c)

    @with_meta
    def axis(self, meta: Any, c: list[Any]) -> ast.Axis:
        return ast.Axis(str(c[0]), c[1][0], c[1][1], self._span(meta))

    def range(self, c: list[Any]) -> tuple[Any, Any]:
        return (c[0], c[1])

    def flag(self, c: list[Any]) -> tuple[str, Flag, Span]:
        return ("flag", Flag(str(c[0])), self._tok(c[0]))

    @with_meta
    def deps(self, meta: Any, c: list[Any]) -> tuple[str, tuple[Any, ...], Span]:
        return ("deps", tuple(c), self._span(meta))

    @with_meta
    def dep(self, meta: Any, c: list[Any]) -> ast.Dep:
        sels = tuple(c[1:]) if len(c) > 1 else None
        return ast.Dep(str(c[0]), sels, self._span(meta))

    @with_meta
    def sel_all(self, meta: Any, c: list[Any]) -> ast.Sel:
        return ast.Sel(DimKind.ALL, None, None, self._span(meta, Span(self.file, 1, 1, 1, 1)))

    @with_meta
    def sel_index(self, meta: Any, c: list[Any]) -> ast.Sel:
        return ast.Sel(DimKind.INDEX, c[0], None, self._span(meta))

    @with_meta
    def sel_range(self, meta: Any, c: list[Any]) -> ast.Sel:
        return ast.Sel(DimKind.RANGE, c[0], c[1], self._span(meta))

    @with_meta
    def sel_extent(self, meta: Any, c: list[Any]) -> ast.Sel:
        return ast.Sel(DimKind.EXTENT, c[0], c[1], self._span(meta))

    @with_meta
    def task_body(self, meta: Any, c: list[Any]) -> tuple[str, tuple[Any, ...], Span]:
        return ("body", tuple(c), self._span(meta))

    @with_meta
    def access(self, meta: Any, c: list[Any]) -> ast.Access:
        return ast.Access(ACCESS_KINDS[str(c[0])], tuple(c[1:]), self._span(meta))

    @with_meta
    def item_loop(self, meta: Any, c: list[Any]) -> ast.ItemLoop:
        var = c[0]
        axis = ast.Axis(str(var), c[1][0], c[1][1], self._tok(var))
        return ast.ItemLoop(axis, tuple(c[2:]), self._span(meta))

    @with_meta
    def call(self, meta: Any, c: list[Any]) -> ast.Call:
        # `call T[i](a, b)`: the parser cannot tell the index from a first argument, so the
        # transformer sees [T, i, a, b] or [T, a, b]; the index is marked by its own rule below
        index = None
        rest = c[1:]
        if rest and isinstance(rest[0], tuple) and rest[0] and rest[0][0] == "kernel_index":
            index = rest[0][1]
            rest = rest[1:]
        return ast.Call(str(c[0]), tuple(rest), self._span(meta), index)

    def kernel_index(self, c: list[Any]) -> tuple[str, Any]:
        return ("kernel_index", c[0])

    @with_meta
    def untouched(self, meta: Any, c: list[Any]) -> ast.Untouched:
        return ast.Untouched(tuple(str(x) for x in c), self._span(meta))

    @with_meta
    def region(self, meta: Any, c: list[Any]) -> ast.Region:
        indirect = None
        if c and isinstance(c[-1], tuple) and c[-1] and c[-1][0] == "indirect":
            indirect = c[-1][1]
            c = c[:-1]
        return ast.Region(str(c[0]), tuple(c[1:]), indirect, self._span(meta))

    @with_meta
    def whole_region(self, meta: Any, c: list[Any]) -> ast.Region:
        return ast.Region(str(c[0]), None, None, self._span(meta))

    @with_meta
    def whole_indirect(self, meta: Any, c: list[Any]) -> ast.Region:
        return ast.Region(str(c[0]), None, c[1][1], self._span(meta))

    def indirect(self, c: list[Any]) -> tuple[str, tuple[str, ...]]:
        return ("indirect", tuple(str(x) for x in c))

    @with_meta
    def sl_all(self, meta: Any, c: list[Any]) -> ast.Slice:
        return ast.Slice(DimKind.ALL, None, None, self._span(meta, Span(self.file, 1, 1, 1, 1)))

    @with_meta
    def sl_index(self, meta: Any, c: list[Any]) -> ast.Slice:
        return ast.Slice(DimKind.INDEX, c[0], None, self._span(meta))

    @with_meta
    def sl_range(self, meta: Any, c: list[Any]) -> ast.Slice:
        return ast.Slice(DimKind.RANGE, c[0], c[1], self._span(meta))

    @with_meta
    def sl_extent(self, meta: Any, c: list[Any]) -> ast.Slice:
        return ast.Slice(DimKind.EXTENT, c[0], c[1], self._span(meta))

    @with_meta
    def wave(self, meta: Any, c: list[Any]) -> ast.Wave:
        name = str(c[0])
        axes = tuple(x for x in c[1:] if isinstance(x, ast.Axis))
        kind_part = next(x for x in c[1:] if isinstance(x, tuple) and x and x[0] in (TaskKind.PARALLEL, TaskKind.SPMD))
        flag_parts = [x for x in c[1:] if isinstance(x, tuple) and x and x[0] == "flag"]
        dep_parts = [x[1] for x in c[1:] if isinstance(x, tuple) and x and x[0] == "deps"]
        deps = tuple(d for part in dep_parts for d in part) if dep_parts else None
        call = next((x for x in c[1:] if isinstance(x, ast.Call)), None)
        return ast.Wave(name, axes, kind_part[0], kind_part[1], tuple(x[1] for x in flag_parts), deps,
                        self._span(meta), tuple(x[2] for x in flag_parts), call)

    def wave_parallel(self, c: list[Any]) -> tuple[TaskKind, None]:
        return (TaskKind.PARALLEL, None)

    def wave_spmd(self, c: list[Any]) -> tuple[TaskKind, tuple[str, ...] | None]:
        return (TaskKind.SPMD, tuple(str(x) for x in c) if c else None)

    # ---- expressions ----
    @with_meta
    def number(self, meta: Any, c: list[Any]) -> ast.Num:
        value = int(str(c[0]).replace("_", ""))
        if value.bit_length() > MAX_INT_BITS:
            raise ValueError("integer literal too large")  # parse_source hands it to the planner (PG018)
        return ast.Num(value, self._span(meta))

    @with_meta
    def name(self, meta: Any, c: list[Any]) -> ast.Name:
        return ast.Name(str(c[0]), self._span(meta))

    @with_meta
    def func(self, meta: Any, c: list[Any]) -> ast.Func:
        return ast.Func(str(c[0]), tuple(c[1:]), self._span(meta))

    @with_meta
    def binop(self, meta: Any, c: list[Any]) -> ast.BinOp:
        return ast.BinOp(str(c[1]), c[0], c[2], self._span(meta))

    compare = binop

    @with_meta
    def or_op(self, meta: Any, c: list[Any]) -> ast.BinOp:
        return ast.BinOp("or", c[0], c[1], self._span(meta))

    @with_meta
    def and_op(self, meta: Any, c: list[Any]) -> ast.BinOp:
        return ast.BinOp("and", c[0], c[1], self._span(meta))

    @with_meta
    def not_op(self, meta: Any, c: list[Any]) -> ast.Not:
        return ast.Not(c[0], self._span(meta))

    @with_meta
    def neg(self, meta: Any, c: list[Any]) -> ast.Neg:
        return ast.Neg(c[0], self._span(meta))


def _friendly(err: Any, source: str) -> tuple[str, str] | None:
    """Pick the message of the known bad input whose parser state matches `err`."""
    from pgraph.frontend.syntax_errors import best_match

    try:
        ex = best_match(err, parser().parse, source)
    except Exception:  # noqa: BLE001 - a failed match only loses the friendly text
        return None
    return None if ex is None else (ex.message, ex.hint)


def _describe(err: Any, source: str) -> str:
    from pgraph.frontend.syntax_errors import describe

    return describe(err, parser().terminals, source)


def parse_source(file: SourceFile, bag: DiagnosticBag) -> ast.Module | None:
    """Parse one file. On a syntax error append PG001 to `bag` and return None (PG018 for an
    integer literal past the limit).

    A valid text is parsed by the start-up driver (`lalr`, no Lark import). A text it refuses
    (a syntax error, a tree deeper than MAX_NESTING, a literal too large) is parsed by Lark,
    whose error is the answer. Lark parses every text instead under PGRAPH_REFERENCE=1 and when
    the driver's tables are not those of the installed grammar and Lark (`_fast_driver`).
    Under PGRAPH_VERIFY=1 any other failure of the driver, or its refusal of a text Lark
    accepts, raises DriverError (an internal error) instead of the second parse; elsewhere Lark's
    answer stands.
    """
    fast = None if reference_mode("lalr") else _fast_driver()
    if fast is None:
        return _parse_with_lark(file, bag)
    try:
        return fast.parse(file.text, _ToAst(file), MAX_NESTING)  # type: ignore[no-any-return]
    except (lalr.Fallback, ValueError) as err:  # refused (ValueError: `number`'s literal too large)
        refused: Exception = err
    except Exception as err:  # noqa: BLE001 - a failure of the driver itself
        if _verifying():
            raise DriverError(f"the LALR driver failed on {file.display}: {type(err).__name__}: {err}") from err
        refused = err
    module = _parse_with_lark(file, bag)
    if module is not None and _verifying():
        raise DriverError(f"the LALR driver refused {file.display}, which Lark parses") from refused
    return module


def _parse_with_lark(file: SourceFile, bag: DiagnosticBag) -> ast.Module | None:
    """`parse_source` by Lark: the syntax diagnostics come from its exceptions."""
    lark = import_lark()
    try:
        tree = parser().parse(file.text)
    except lark.exceptions.UnexpectedInput as err:
        from pgraph.frontend.syntax_errors import SYNTAX_EXAMPLES

        line = getattr(err, "line", 1) or 1
        col = getattr(err, "column", 1) or 1
        if isinstance(err, lark.exceptions.UnexpectedEOF) or (
            isinstance(err, lark.exceptions.UnexpectedToken) and err.token.type == "$END"
        ):
            lines = file.lines or [""]
            line, col = len(lines), len(lines[-1]) + 1
        span = Span(file, int(line), int(col), int(line), int(col) + 1)
        friendly = _friendly(err, file.text)
        detail = _describe(err, file.text)
        at_end = span.line == len(file.lines or [""]) and span.col == len((file.lines or [""])[-1]) + 1
        opened = open_block(file) if at_end else None
        if opened is None and _starts_top_level_item(file, span):
            # a declaration only the top level holds, inside a block: that block lost its `}`
            opened = open_block(file, before=(span.line, span.col))
            if opened is not None:
                friendly = None
        notes = [Note(f"this `{{` of {opened[1]} is never closed", opened[0])] if opened else []
        if friendly:
            fix = missing_comma(file, span) if friendly[0].startswith("items in a list are separated by") else None
            bag.add("PG001", f"{friendly[0]} ({detail})", span, notes, hint=friendly[1], fix=fix)
        elif opened:
            entry = next(e for e in SYNTAX_EXAMPLES if e.message.startswith("a block is not closed"))
            bag.add("PG001", f"{entry.message} ({detail})", span, notes, hint=entry.hint)
        else:
            bag.add("PG001", detail, span, hint="see docs/language.md for the grammar")
        return None
    deep = _too_deep(tree)
    if deep is not None:
        bag.add("PG001", f"the text nests more than {MAX_NESTING} levels deep here (expressions, blocks and "
                "scopes all count)", span_from_meta(file, deep),
                hint="name parts of a long expression with `const` or `let`, or flatten the nesting")
        return None
    try:
        return _ToAst(file).transform(tree)  # type: ignore[no-any-return]
    except _LiteralError as err:  # int() of a literal past Python's 4300-digit limit
        tok = next((c for c in err.node.children if _is_token(c, "INT")), None)
        digits = len(str(tok).replace("_", "")) if tok is not None else 0
        bag.found(LiteralTooLarge(span=span_from_meta(file, tok or err.node.meta), digits=digits, bits=MAX_INT_BITS))
        return None


def _offset(file: SourceFile, line: int, col: int) -> int:
    """The offset in `file.text` of 1-based (line, col)."""
    return sum(len(x) + 1 for x in file.text.split("\n")[:line - 1]) + col - 1


def _innermost_bracket(text: str, end: int) -> int | None:
    """The offset of the innermost `(` or `[` still open at offset `end` (comments skipped)."""
    depth: list[int] = []
    i = 0
    while i < end:
        ch = text[i]
        if ch == "#":
            nl = text.find("\n", i)
            i = end if nl < 0 else nl
            continue
        if ch in "([":
            depth.append(i)
        elif ch in ")]" and depth:
            depth.pop()
        i += 1
    return depth[-1] if depth else None


def _items(text: str, open_at: int) -> int | None:
    """How many comma-separated items the bracket opened at `open_at` holds (a trailing comma
    ends none), or None when it is never closed."""
    depth, commas, seen, i = 0, 0, False, open_at + 1
    while i < len(text):
        ch = text[i]
        if ch == "#":
            nl = text.find("\n", i)
            i = len(text) if nl < 0 else nl
            continue
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            if depth == 0:
                return commas + (1 if seen else 0)
            depth -= 1
        elif ch == "," and depth == 0:
            commas, seen = commas + 1, False
            i += 1
            continue
        if not ch.isspace():
            seen = True
        i += 1
    return None


_CALL = re.compile(r"\bcall\s+([A-Za-z_][A-Za-z0-9_]*)\s*(\[[^\]]*\])?\s*$")


def missing_comma(file: SourceFile, at: Span) -> Fix | None:
    """The fix of 'items in a list are separated by ,': a comma after the item before `at`.

    Only where the comma cannot break a count something else must match: not inside `[...]`
    (a shape, a region, a tile selection: the rank), and in a `call`'s arguments only when the
    kernel is declared in the same file and takes as many parameters as the call then passes.
    Elsewhere `f32[R, 16 16]` or `call k(a w w)` is as likely a stray word, and the hint stays
    advice."""
    text = file.text
    pos = _offset(file, at.line, at.col)
    inner = _innermost_bracket(text, pos)
    if inner is not None and text[inner] == "[":
        return None
    if inner is not None:
        call = _CALL.search(text[text.rfind("\n", 0, inner) + 1:inner])
        if call is not None:
            decl = re.search(rf"^\s*kernel\s+{re.escape(call.group(1))}\s+[a-z]+\s*\(", text, re.M)
            if call.group(2) is not None or decl is None:
                return None
            params, args = _items(text, decl.end() - 1), _items(text, inner)
            if params is None or args is None or args + 1 != params:
                return None
    line, col = at.line, at.col - 1
    while line >= 1:
        text = file.line(line)[:col] if line == at.line else file.line(line).split("#")[0]
        stripped = text.rstrip()
        if stripped:
            return Fix((Edit.insert(at, line, len(stripped) + 1, ","),))
        line -= 1
    return None


#: The words that start a declaration only the top level of a file holds (grammar/pgl.lark
#: `item`; tensor, view and assert are statements inside scopes too).
TOP_LEVEL_ONLY = frozenset({"include", "const", "scalar", "kernel", "extern", "kernels", "entry", "target",
                            "cost", "budget", "fragment"})


def _starts_top_level_item(file: SourceFile, at: Span) -> bool:
    """Whether the syntax error at `at` is the first word of its line and one that starts a
    top-level declaration (`budget`, `kernel`, `entry`, ...)."""
    text = file.line(at.line)
    if text[:at.col - 1].strip():
        return False
    word = text[at.col - 1:].split(None, 1)
    return bool(word) and word[0] in TOP_LEVEL_ONLY


def open_block(file: SourceFile, before: tuple[int, int] | None = None) -> tuple[Span, str] | None:
    """The innermost `{` never closed in `file` (comments and strings skipped), or before the
    (line, column) `before`, with the words before it on its line (`entry decode_fwd_layers`);
    None when the braces balance there."""
    stack: list[tuple[int, int]] = []
    for number, text in enumerate(file.lines, 1):
        if before is not None and number > before[0]:
            break
        if before is not None and number == before[0]:
            text = text[:before[1] - 1]
        i = 0
        while i < len(text):
            ch = text[i]
            if ch == "#":
                break
            if ch == '"':
                end = text.find('"', i + 1)
                i = len(text) if end < 0 else end + 1
                continue
            if ch == "{":
                stack.append((number, i + 1))
            elif ch == "}" and stack:
                stack.pop()
            i += 1
    if not stack:
        return None
    line, col = stack[-1]
    head = file.line(line)[:col - 1].split("#")[0].strip()
    back = line
    while not head and back > 1:  # `{` on a line of its own: the statement starts above it
        back -= 1
        head = file.line(back).split("#")[0].strip()
    words = " ".join(head.split()[:3])
    return Span(file, line, col, line, col + 1), f"`{words} ...`" if words else "a block"


#: Deepest parse tree `parse_source` accepts; the specs nest at most 19 levels. Every later
#: stage recurses over the tree, so a deeper one (a generated 1+1+...+1, thousands of nested
#: parentheses) would end in Python's RecursionError instead of a diagnostic.
MAX_NESTING = 200


def _too_deep(tree: lark.Tree[Any]) -> Any:
    """The first node (Tree meta or Token) deeper than MAX_NESTING, or None; iterative."""
    lark = import_lark()
    stack: list[tuple[Any, int]] = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if not isinstance(node, lark.Tree):
            continue
        if depth > MAX_NESTING:
            return node.meta
        stack.extend((child, depth + 1) for child in node.children)
    return None


def main(argv: list[str] | None = None) -> int:
    """`python3 -m pgraph.frontend.parser`: rewrite grammar/pgl.lalr and
    pgraph/frontend/pgl_tables.py from grammar/pgl.lark."""
    path = Path(__file__).resolve().parents[2] / "grammar" / TABLES_FILE
    if not path.parent.is_dir():
        print("run from a source checkout (grammar/ next to pgraph/)", file=sys.stderr)
        return 2
    save_parser(path)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
