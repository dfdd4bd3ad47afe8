"""AST -> canonical .pgl text: `parse(unparse(m))` equals `m` up to spans.

Used by `pgraph check --emit ast` and by the formatter. The text is canonical: two-space
indentation, one statement per line, a task's flags before its deps, expressions with only
the parentheses the grammar needs (`(a + b) * c`, `a - (b - c)`), kernel parameters one per
line when the declaration would pass 100 columns.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from pgraph.expr import BinOp, Expr, Func, Name, Neg, Not, Num, RuntimeDim
from pgraph.frontend import ast
from pgraph.kinds import AccessKind, DimKind, Direction, TaskKind, unhandled

INDENT = "  "
WIDTH = 100

#: Binding strength of each expression form (higher binds tighter), as in grammar/pgl.lark.
_LEVEL = {"or": 1, "and": 2, "not": 3, "==": 4, "!=": 4, "<": 4, "<=": 4, ">": 4, ">=": 4,
          "+": 5, "-": 5, "*": 6, "/": 6, "%": 6, "neg": 7, "atom": 8}
ACCESS_WORD = {AccessKind.READ: "reads", AccessKind.WRITE: "writes", AccessKind.ATOMIC: "atomic_add"}


def _level(e: Expr) -> int:
    match e:
        case BinOp():
            return _LEVEL[e.op]
        case Not():
            return _LEVEL["not"]
        case Neg():
            return _LEVEL["neg"]
        case Num() if e.value < 0:
            return _LEVEL["neg"]
        case _:
            return _LEVEL["atom"]


def expr(e: Expr, need: int = 0) -> str:
    """An expression, parenthesised only where binding strength `need` requires."""
    match e:
        case Num():
            text = str(e.value)
        case Name():
            text = e.id
        case Func():
            text = f"{e.name}({', '.join(expr(a) for a in e.args)})"
        case RuntimeDim():
            text = f"dim({e.tensor}, {e.axis})"
        case Neg():
            text = f"-{expr(e.operand, _LEVEL['neg'])}"
        case Not():
            text = f"not {expr(e.operand, _LEVEL['not'])}"
        case BinOp():
            lv = _LEVEL[e.op]
            if lv == _LEVEL["=="]:  # comparisons do not chain: both sides are sums
                left, right = expr(e.left, _LEVEL["+"]), expr(e.right, _LEVEL["+"])
            else:
                left, right = expr(e.left, lv), expr(e.right, lv + 1)
            text = f"{left} {e.op} {right}"
        case _:
            unhandled(e)
    return f"({text})" if _level(e) < need else text


def _shape(dims: Sequence[Expr]) -> str:
    return "[" + ", ".join(expr(d) for d in dims) + "]"


def _axis(a: ast.Axis) -> str:
    return f"{a.var} in {expr(a.lo)}..{expr(a.hi)}"


def _slice(s: ast.Slice) -> str:
    match s.kind:
        case DimKind.ALL:
            return ":"
        case DimKind.INDEX:
            assert s.a is not None
            return expr(s.a)
        case DimKind.RANGE:
            assert s.a is not None and s.b is not None
            return f"{expr(s.a)}:{expr(s.b)}"
        case DimKind.EXTENT:
            assert s.a is not None and s.b is not None
            return f"{expr(s.a)} +: {expr(s.b)}"
    unhandled(s.kind)


def _sel(s: ast.Sel) -> str:
    match s.kind:
        case DimKind.ALL:
            return "*"
        case DimKind.INDEX:
            assert s.a is not None
            return expr(s.a)
        case DimKind.RANGE:
            assert s.a is not None and s.b is not None
            return f"{expr(s.a)}..{expr(s.b)}"
        case DimKind.EXTENT:
            assert s.a is not None and s.b is not None
            return f"{expr(s.a)} +: {expr(s.b)}"
    unhandled(s.kind)


def region(r: ast.Region) -> str:
    """`x[a, b +: n] indirect(i)`."""
    text = r.tensor if r.slices is None else f"{r.tensor}[{', '.join(_slice(s) for s in r.slices)}]"
    if r.indirect is not None:
        text += " indirect" + (f"({', '.join(r.indirect)})" if r.indirect else "")
    return text


def _arg(a: Expr | ast.Region) -> str:
    return region(a) if isinstance(a, ast.Region) else expr(a)


def _call(c: ast.Call) -> str:
    index = f"[{expr(c.index)}]" if c.index is not None else ""
    return f"call {c.kernel}{index}({', '.join(_arg(a) for a in c.args)})"


def _dep(d: ast.Dep) -> str:
    return d.name if d.sels is None else f"{d.name}[{', '.join(_sel(s) for s in d.sels)}]"


def _deps(deps: tuple[ast.Dep, ...] | None) -> str:
    return "" if deps is None else f" deps({', '.join(_dep(d) for d in deps)})"


def _flags(flags: Iterable[str]) -> str:
    return "".join(f" {f}" for f in flags)


class Unparser:
    """Collects the lines of one module.

    `origin[i]` says where line i comes from, for the formatter (pgraph.frontend.fmt) to put
    the comments back: (source line, kind), kind "stmt" for the first line of a statement or
    item, "cont" for its further lines, "close" for a block's `}` (the source line of the
    `}`), "blank" for a blank line between items.
    """

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.origin: list[tuple[int | None, str]] = []
        self._at: int | None = None
        self._fresh = False

    def begin(self, node: object) -> None:
        """The lines that follow come from `node` (its span's first line)."""
        span = getattr(node, "span", None)
        self._at = span.line if span is not None else None
        self._fresh = True

    def line(self, depth: int, text: str) -> None:
        self.lines.append(INDENT * depth + text if text else "")
        self.origin.append((self._at, "stmt" if self._fresh else "cont"))
        self._fresh = False

    def block(self, depth: int, head: str, stmts: Sequence[object], each: object, node: object = None) -> None:
        if not stmts:
            self.line(depth, f"{head} {{ }}")
            return
        self.line(depth, f"{head} {{")
        for s in stmts:
            each(depth + 1, s)  # type: ignore[operator]
        span = getattr(node, "span", None)
        self._at = span.end_line if span is not None else None
        self.lines.append(INDENT * depth + "}")
        self.origin.append((self._at, "close"))

    # ---- top level ----
    def module(self, m: ast.Module) -> str:
        groups: list[tuple[int, bool]] = []  # (first line, several lines) of each item, its allows included
        allows = False
        for item in m.items:
            start = len(self.lines)
            self.item(item)
            multi = len(self.lines) - start > 1
            if allows:  # the allows above this item and the item are one group (no blank between)
                start = groups.pop()[0]
            groups.append((start, multi))
            allows = isinstance(item, ast.Allow)
        for (start, multi), (_, prev_multi) in reversed(list(zip(groups[1:], groups))):
            if multi or prev_multi:
                self.lines.insert(start, "")
                self.origin.insert(start, (None, "blank"))
        return "\n".join(self.lines) + "\n" if self.lines else ""

    def item(self, item: ast.Item) -> None:
        self.begin(item)
        match item:
            case ast.Include():
                self.line(0, f'include "{item.path}"')
            case ast.Const():
                self.line(0, f"const {item.name} = {expr(item.expr)}")
            case ast.KernelDecl():
                self.kernel(item)
            case ast.KernelAlias():
                self.line(0, f"kernel {', '.join(item.names)} = {item.base}"
                          + (f' source "{item.source}"' if item.source is not None else ""))
            case ast.KernelTable():
                self.line(0, f"kernels {item.name} = [{', '.join(item.members)}]")
            case ast.Target():
                self.block(0, f"target {item.name}", item.items, self.target_item, item)
            case ast.Cost():
                self.line(0, f"cost {item.name} = {expr(item.expr)}" + (f" {item.unit}" if item.unit else ""))
            case ast.Budget():
                self.line(0, f"budget {item.figure} <= {expr(item.expr)}")
            case ast.Entry():
                self.block(0, f"entry {item.name}" + ("" if item.scoped else " unscoped"), item.block.stmts,
                           self.stmt, item)
            case ast.Fragment():
                self.block(0, f"fragment {item.name}", item.block.stmts, self.stmt, item)
            case ast.Assert() | ast.TensorDecl() | ast.ScalarDecl() | ast.ViewDecl() | ast.Allow():
                self.stmt(0, item)
            case _:
                unhandled(item)

    def target_item(self, depth: int, ti: ast.TargetItem) -> None:
        self.begin(ti)
        self.line(depth, f"{ti.key} = {expr(ti.expr)}" + (f" {ti.unit}" if ti.unit else ""))

    def kernel(self, k: ast.KernelDecl) -> None:
        params = []
        for q in k.params:
            if q.direction is Direction.SCALAR:
                params.append(f"{q.name} : scalar {q.dtype}")
            else:
                params.append(f"{q.name} : {q.direction} {q.dtype}" + (_shape(q.shape) if q.shape is not None else ""))
        head = ("extern " if k.extern else "") + f"kernel {k.name} {k.core}" + (
            f' source "{k.source}"' if k.source is not None else "") + (
            " includes " + ", ".join(f'"{d}"' for d in k.includes) if k.includes else "")
        one = f"{head} ({', '.join(params)})"
        if len(one) <= WIDTH or not params:
            self.line(0, one)
            return
        self.line(0, f"{head} (")
        for text in params:
            self.line(1, f"{text},")
        self.line(0, ")")

    # ---- statements ----
    def stmt(self, depth: int, s: object) -> None:
        self.begin(s)
        match s:
            case ast.TensorDecl():
                dims = [("runtime " if s.runtime and s.runtime[i] else "") + expr(d) for i, d in enumerate(s.shape)]
                self.line(depth, f"tensor {s.name} : {s.dtype}[{', '.join(dims)}]" + (" external" if s.external else "")
                          + (" created" if s.created else "") + (" manual_dep" if s.manual_dep else ""))
            case ast.ScalarDecl():
                self.line(depth, f"scalar {s.name} : {s.dtype}" + (" external" if s.external else ""))
            case ast.ViewDecl():
                self.line(depth, f"view {s.name} = {s.base} as {_shape(s.shape)}")
            case ast.Let():
                self.line(depth, f"let {s.name} = {expr(s.expr)}")
            case ast.Assert():
                self.line(depth, f"assert {expr(s.expr)}" + (f', "{s.message}"' if s.message is not None else ""))
            case ast.ScopeStmt():
                ring = f" ring {s.ring}" if s.ring is not None else ""
                self.block(depth, f"{s.mode} scope{ring}", s.block.stmts, self.stmt, s)
            case ast.ForStmt():
                head = f"for {_axis(s.axis)}" + ("" if s.scoped else " unscoped")
                if s.carries:
                    head += " carry " + ", ".join(f"{c.name} = {c.init} then {c.next}" for c in s.carries)
                self.block(depth, head, s.block.stmts, self.stmt, s)
            case ast.PhaseStmt():
                self.block(depth, f"phase {s.name}", s.block.stmts, self.stmt, s)
            case ast.InterleaveStmt():
                self.block(depth, "interleave", s.block.stmts, self.stmt, s)
            case ast.TaskIds():
                self.line(depth, f"taskids {', '.join(s.names)}")
            case ast.Use():
                self.line(depth, f"use {s.name}")
            case ast.Task():
                self.task(depth, s)
            case ast.Allow():
                self.line(depth, f'allow({", ".join(s.codes)}, "{s.reason}")')
            case _:
                unhandled(s)

    def task(self, depth: int, t: ast.Task) -> None:
        head = f"{t.kind} {t.name}"
        if t.axes:
            head += "[" + ", ".join(_axis(a) for a in t.axes) + "]"
        head += _flags(t.flags) + _deps(t.deps)
        if not t.body and t.body_span is None:
            self.line(depth, head)
            return
        self.block(depth, head, t.body, self.body_item, t)

    def body_item(self, depth: int, b: object) -> None:
        self.begin(b)
        match b:
            case ast.Let():
                self.line(depth, f"let {b.name} = {expr(b.expr)}")
            case ast.Access():
                self.line(depth, f"{ACCESS_WORD[b.kind]} {', '.join(region(r) for r in b.regions)}")
            case ast.Untouched():
                self.line(depth, f"untouched {', '.join(b.names)}")
            case ast.ItemLoop():
                self.block(depth, f"for {_axis(b.axis)}", b.items, self.body_item, b)
            case ast.Call():
                self.line(depth, _call(b))
            case ast.Wave():
                axes = (" " + ", ".join(_axis(a) for a in b.axes)) if b.axes else ""
                kind = "parallel" if b.kind is TaskKind.PARALLEL else (
                    "spmd" + (f"({', '.join(b.spmd_axes)})" if b.spmd_axes is not None else ""))
                call = f" {_call(b.call)}" if b.call is not None else ""
                self.line(depth, f"wave {b.name}{axes} : {kind}{_flags(b.flags)}{_deps(b.deps)}{call}")
            case _:
                unhandled(b)


def unparse(module: ast.Module) -> str:
    """The canonical text of `module`."""
    return Unparser().module(module)
