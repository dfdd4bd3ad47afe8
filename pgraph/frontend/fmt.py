"""`pgraph fmt`: the canonical layout of a .pgl file, as gofmt lays out Go: whitespace only.

The formatter changes nothing but whitespace; the tokens, the comments and the author's line
breaks stay (so `parse(fmt(x)) == parse(x)`, spans aside, and `fmt(fmt(x)) == fmt(x)`):

- **indentation**: a line that starts a statement (an item, a statement of a block, a body
  item, a target item) or with a `}` is indented two spaces per open `{`; a continuation line
  of a statement keeps its indentation relative to the statement's first line (a wrapped
  `reads` list stays under its first region, a `deps(...)` line keeps its hanging indent); a
  comment on a line of its own takes the indentation of the code line below it (one level
  deeper before a `}`);
- **spacing** between tokens: one space after `,`, none after `(`/`[` nor before
  `)`/`]`/`,`; one space around `=`, comparisons, `+:`, `<=` and the declaration `:`
  (outside brackets); none around `..` nor after a unary `-`; one space between `{` or `}`
  and code on the same line. Elsewhere (`k*K` or `k * K`, `call f(` or `kernel k aiv (`) the
  author's choice between no space and a space is kept, a run of spaces becoming one;
- **alignment**, as gofmt aligns runs: where the author padded a token so that it lines up
  with the same kind of token on the lines around it (the `:` of a run of `tensor` lines,
  the `=` of `const` lines, an `external` column, the `then` of carries, trailing comments),
  the tokens of that run are put in one column, the narrowest that holds every line of the
  run (so a longer name added to a run re-aligns it). A run is a stretch of consecutive
  lines that each have a token of that kind at one source column, at least one of them
  padded; a blank line, a line without such a token, or one of another kind ends it.
  Trailing comments form runs the same way, through code lines without a comment, up to a
  blank line or a comment line; a trailing comment keeps its old column (the run's) when the code fits before
  it with two spaces, else it goes two spaces after the longest code line of its run;
- **blank lines**: runs of blank lines become one; none at the start or end of the file,
  after a line that ends with `{` or before a line that starts with `}`; trailing spaces go.

The formatter reads the source text; the parsed module says which lines start a statement.
`format_module` checks that the output has the same tokens and comments as the input (an
InternalError otherwise), so a formatting bug can never change a spec's meaning.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import attrs

from pgraph import records
from pgraph.frontend import ast
from pgraph.kinds import InternalError

__all__ = ["Comment", "comments", "format_module", "tokens"]

INDENT = "  "
#: Layouts of a text at most, each of the last one's output, before fmt settles (one or two in practice).
MAX_ROUNDS = 10

#: The tokens of the layout, in the order tried: strings, comments, multi-character operators,
#: words (names, numbers, keywords, unit suffixes), any other character.
_TOKEN = re.compile(r'"[^"\n]*"|#[^\n]*|\+:|\.\.|==|!=|<=|>=|\w+|\S')
#: Always one space on both sides (the `:` of a declaration is decided by bracket depth).
_SPACED = frozenset({"=", "==", "!=", "<=", ">=", "<", ">", "+:"})
#: Binary operators whose spacing is the author's (one space or none, the same on both sides).
_BINARY = frozenset({"+", "-", "*", "/", "%"})
#: Words after which a `-` is a sign, not a subtraction.
_SIGN_AFTER = frozenset({"in", "assert", "not", "and", "or"})


@records.value
@attrs.frozen(repr=False, eq=False)
class Comment:
    """A `#` comment: its 1-based line and column, its text (from `#` on), whether code precedes it."""

    line: int
    col: int
    text: str
    trailing: bool


def comments(text: str) -> list[Comment]:
    """Every comment of a source text, in order (a `#` inside a "string" starts none)."""
    out = []
    for n, line in enumerate(text.split("\n"), 1):
        quoted = False
        for i, ch in enumerate(line):
            if ch == '"':
                quoted = not quoted
            elif ch == "#" and not quoted:
                out.append(Comment(n, i + 1, line[i:].rstrip(), bool(line[:i].strip())))
                break
    return out


def tokens(line: str) -> list[tuple[int, str]]:
    """The layout tokens of one source line: (0-based column, text); a comment is one token."""
    return [(m.start(), m.group().rstrip() if m.group().startswith("#") else m.group())
            for m in _TOKEN.finditer(line)]


@records.shared_repr
@attrs.define(repr=False)
class _Tok:
    """One token of a line being laid out: its text, source column, kind of alignment and gap."""

    text: str
    src: int            # source column (0-based)
    gap: int            # the normalized number of spaces before it (the first token: 0)
    padded: bool        # the source had more spaces before it than `gap`
    src_gap: int = 0    # the spaces before it in the source
    joined: bool = False  # put in a run by its group (`_grouped`), not by its source column
    col: int = -1       # output column, set by the layout

    @property
    def kind(self) -> str:
        """Tokens align only with tokens of the same kind: comments, words, or the same symbol."""
        if self.text.startswith("#"):
            return "#"
        return "w" if self.text[0].isalnum() or self.text[0] in '_"' else self.text


@records.shared_repr
@attrs.define(repr=False)
class _Line:
    """One source line: its tokens (the first carries the indentation), and how it is indented."""

    toks: list[_Tok]
    head: bool           # starts a statement or with `}`: indented by depth
    depth: int           # open braces before its first token (after a leading `}`)
    src_indent: int
    indent: int = 0

    @property
    def code(self) -> list[_Tok]:
        return self.toks[:-1] if self.toks and self.toks[-1].text.startswith("#") else self.toks

    @property
    def comment_only(self) -> bool:
        return len(self.toks) == 1 and self.toks[0].text.startswith("#")


def _starts(module: ast.Module) -> set[tuple[int, int]]:
    """(line, 1-based column) of every statement, item, body item and target item of `module`."""
    out: set[tuple[int, int]] = set()

    def add(node: object) -> None:
        span = getattr(node, "span", None)
        if span is not None:
            out.add((span.line, span.col))

    def body(items: tuple[object, ...]) -> None:
        for b in items:
            add(b)
            if isinstance(b, ast.ItemLoop):
                body(b.items)

    def stmts(items: tuple[object, ...]) -> None:
        for s in items:
            add(s)
            match s:
                case ast.Entry() | ast.Fragment() | ast.ScopeStmt() | ast.ForStmt() | ast.PhaseStmt() | \
                        ast.InterleaveStmt():
                    stmts(s.block.stmts)
                case ast.Task():
                    body(s.body)
                case ast.Target():
                    for ti in s.items:
                        add(ti)

    stmts(module.items)
    return out


def _gap(prev: str, cur: str, src_gap: int, brackets: int, sign: bool) -> int:
    """The spaces between token `prev` and token `cur` (`src_gap` in the source)."""
    if cur.startswith("#"):
        return 2
    if prev in ("(", "[") or cur in (")", "]", ","):
        return 0
    if prev == ",":
        return 1
    if prev == ".." or cur == "..":
        return 0
    if prev == "-" and sign:
        return 0
    if prev in _SPACED or cur in _SPACED or "{" in (prev, cur) or "}" in (prev, cur):
        return 1
    if ":" in (prev, cur):
        return 1 if brackets == 0 else min(src_gap, 1)
    word = prev[0].isalnum() or prev[0] in '_"' or prev in (")", "]")
    if word and (cur[0].isalnum() or cur[0] in '_"'):
        return 1
    return min(src_gap, 1)


def _lines(text: str, starts: set[tuple[int, int]]) -> list[_Line | None]:
    """The source lines as _Line records (None for a blank line), braces counted."""
    out: list[_Line | None] = []
    depth = 0
    brackets = 0
    for n, raw in enumerate(text.split("\n"), 1):
        toks = tokens(raw)
        if not toks:
            out.append(None)
            continue
        first_col, first = toks[0]
        lead = depth - 1 if first == "}" else depth
        head = first == "}" or (n, first_col + 1) in starts
        laid = [_Tok(first, first_col, 0, False)]
        src_gaps = [0]
        for k in range(1, len(toks)):
            (pcol, prev), (col, tok) = toks[k - 1], toks[k]
            src_gaps.append(col - pcol - len(prev))
            if prev == "[":
                brackets += 1
            elif prev == "]":
                brackets = max(brackets - 1, 0)
            sign = prev == "-" and _is_sign(laid, k - 1)
            laid.append(_Tok(tok, col, _gap(prev, tok, src_gaps[k], brackets, sign), False))
        for k, t in enumerate(laid):  # a binary operator: the same spacing on both sides
            if 0 < k < len(laid) - 1 and t.text in _BINARY and not _is_sign(laid, k) \
                    and not laid[k + 1].text.startswith("#"):
                both = max(min(src_gaps[k], 1), min(src_gaps[k + 1], 1))
                t.gap = laid[k + 1].gap = both
        for k, t in enumerate(laid):
            t.padded = k > 0 and src_gaps[k] > max(t.gap, 1)
            t.src_gap = src_gaps[k]
        last = toks[-1][1]
        if last == "[":
            brackets += 1
        elif last == "]":
            brackets = max(brackets - 1, 0)
        depth = max(depth + sum(t == "{" for _, t in toks) - sum(t == "}" for _, t in toks), 0)
        out.append(_Line(laid, head, max(lead, 0), first_col))
    return out


def _is_sign(laid: list[_Tok], i: int) -> bool:
    """Whether the `-` or `*` at laid[i] is a sign / a dep selection's `*`, not an operator."""
    if laid[i].text not in ("-", "*"):
        return False
    if i == 0:
        return True
    before = laid[i - 1].text
    if before in (")", "]"):
        return False
    if before[0].isalnum() or before[0] == "_":
        return before in _SIGN_AFTER
    return True


def _indent(lines: list[_Line | None]) -> None:
    """Set the indentation of every line (see the module docstring)."""
    head: _Line | None = None
    for ln in lines:
        if ln is None or ln.comment_only:
            continue
        if ln.head or head is None:
            ln.indent = len(INDENT) * ln.depth
            head = ln
        else:
            ln.indent = max(head.indent + ln.src_indent - head.src_indent, head.indent)
    below: _Line | None = None
    for ln in reversed(lines):
        if ln is None:
            continue
        if not ln.comment_only:
            below = ln
            continue
        if below is None:
            ln.indent = 0
        elif below.code and below.code[0].text == "}":
            ln.indent = below.indent + len(INDENT)
        else:
            ln.indent = below.indent


#: Statement words that align with one another (a `view` or `scalar` among `tensor` lines).
_FAMILY = {"scalar": "tensor", "view": "tensor"}


def _runs(lines: list[_Line | None]) -> list[list[tuple[int, int]]]:
    """The alignment runs: lists of (line index, token index), in an order the layout can sweep.

    Code tokens chain with the same kind of token at the same source column on the next line of
    the same kind: a statement line with the next statement line that starts with the same word
    (continuation lines between them do not end the run), a continuation line with the next
    continuation line of the same statement. Comments chain at one column through code lines
    without a comment; a blank line or a comment line ends every run.
    """
    runs: list[list[tuple[int, int]]] = []
    open_runs: dict[tuple[object, str, int], list[tuple[int, int]]] = {}
    comment_runs: dict[int, list[tuple[int, int]]] = {}
    head_scope: tuple[str, object] | None = None
    head_line = -1
    for i, ln in enumerate(lines):
        if ln is None or ln.comment_only:
            runs.extend(open_runs.values())
            runs.extend(comment_runs.values())
            open_runs, comment_runs = {}, {}
            head_scope = None
            continue
        if ln.head:
            word = ln.toks[0].text
            scope: tuple[str, object] = ("head", _FAMILY.get(word, word))
            if scope != head_scope:
                runs.extend(open_runs.values())
                open_runs = {}
            else:  # the continuation runs of the statement before end here
                for key in [k for k in open_runs if k[0] != scope]:
                    runs.append(open_runs.pop(key))
            head_scope = scope
            head_line = i
        else:
            scope = ("cont", head_line)
        here: dict[tuple[object, str, int], list[tuple[int, int]]] = {}
        for j, t in enumerate(ln.toks):
            if j == 0 or (t.gap == 0 and t.kind != "#"):  # a token written tight never aligns
                continue
            if t.kind == "#":
                comment_runs.setdefault(t.src, []).append((i, j))
                for col in [c for c in comment_runs if c != t.src]:
                    runs.append(comment_runs.pop(col))
                continue
            key = (scope, t.kind, t.src)
            here[key] = [*open_runs.pop(key, []), (i, j)]
        for key in [k for k in open_runs if k[0] == scope]:  # this kind of line without the token
            runs.append(open_runs.pop(key))
        open_runs.update(here)
    runs.extend(open_runs.values())
    runs.extend(comment_runs.values())
    kept = []
    for run in runs:
        toks = [lines[i].toks[j] for i, j in run]  # type: ignore[union-attr]
        if toks[0].kind == "#" or (len(run) > 1 and any(t.padded for t in toks)):
            kept.append(run)
    kept.sort(key=lambda run: lines[run[0][0]].toks[run[0][1]].src)  # type: ignore[union-attr]
    return _in_order(_grouped(lines, kept), lines) or kept


def _groups(lines: list[_Line | None]) -> list[list[int]]:
    """Stretches of consecutive statement lines that start with the same word (`tensor`, `const`,
    `wave`...): continuation lines inside one do not end it; a blank line, a comment line or a
    statement of another kind does."""
    out: list[list[int]] = []
    cur: list[int] = []
    word: str | None = None
    for i, ln in enumerate(lines):
        if ln is None or ln.comment_only or (ln.head and _FAMILY.get(ln.toks[0].text, ln.toks[0].text) != word):
            if len(cur) > 1:
                out.append(cur)
            cur, word = [], None
            if ln is not None and ln.head and not ln.comment_only:
                cur, word = [i], _FAMILY.get(ln.toks[0].text, ln.toks[0].text)
        elif ln.head:
            cur.append(i)
    if len(cur) > 1:
        out.append(cur)
    return out


def _cell(ln: _Line, j: int) -> tuple[str, int]:
    """Token j of `ln` as a cell of its line: its text and how many tokens of that text come
    before it (the first `:` of a `tensor` line, its `external`, the first `=` of a `const`)."""
    text = ln.toks[j].text
    return text, sum(t.text == text for t in ln.toks[1:j])


def _grouped(lines: list[_Line | None], runs: list[list[tuple[int, int]]]) -> list[list[tuple[int, int]]]:
    """`runs` with every line of a group (`_groups`) that holds an aligned run's cell in it: so a
    renamed or added declaration lines up with the run it stands in, as gofmt would align it."""
    owner: dict[tuple[int, int], int] = {m: r for r, run in enumerate(runs) for m in run}
    groups = _groups(lines)
    group_of = {i: g for g, members in enumerate(groups) for i in members}
    merged: dict[int, int] = {}  # run -> the run it was merged into

    def root(r: int) -> int:
        while r in merged:
            r = merged[r]
        return r

    out = [list(run) for run in runs]
    for r, run in enumerate(runs):
        i0, j0 = run[0]
        if lines[i0].toks[j0].kind == "#":  # type: ignore[union-attr]
            continue
        cell = _cell(lines[i0], j0)  # type: ignore[arg-type]
        if any(_cell(lines[i], j) != cell for i, j in run):  # type: ignore[arg-type]
            continue
        for g in sorted({group_of[i] for i, _ in run if i in group_of}):
            for i in groups[g]:
                ln = lines[i]
                assert ln is not None
                j = next((k for k in range(1, len(ln.toks)) if _cell(ln, k) == cell), None)
                if j is None:
                    continue
                here = root(r)
                other = owner.get((i, j))
                if other is None:
                    out[here].append((i, j))
                    owner[(i, j)] = here
                    # a token already in the run's column was aligned by the author (or by fmt)
                    lines[i].toks[j].joined = ln.toks[j].src != lines[i0].toks[j0].src  # type: ignore[union-attr]
                elif root(other) != here:
                    there = root(other)
                    if {m[0] for m in out[here]} & {m[0] for m in out[there]}:
                        continue  # two tokens of one line cannot share a column
                    out[here].extend(out[there])
                    for m in out[there]:
                        owner[m] = here
                    out[there] = []
                    merged[there] = here
    return [sorted(run) for run in out if run]


def _in_order(runs: list[list[tuple[int, int]]], lines: list[_Line | None]) -> list[list[tuple[int, int]]] | None:
    """`runs` ordered so that a run comes after every run holding an earlier token of one of its
    lines (the layout's sweep needs it); None when no such order exists."""
    import graphlib

    where = {m: r for r, run in enumerate(runs) for m in run}
    order: graphlib.TopologicalSorter[int] = graphlib.TopologicalSorter()
    for r, run in enumerate(runs):
        order.add(r)
        for i, j in run:
            for k in range(1, j):
                if (i, k) in where and where[(i, k)] != r:
                    order.add(r, where[(i, k)])
    try:
        return [runs[r] for r in order.static_order()]
    except graphlib.CycleError:
        return None


def _layout(lines: list[_Line | None]) -> None:
    """Set every token's output column: in order of source columns, each run at one column."""
    done = [1] * len(lines)  # tokens placed per line (the first: at the indentation)
    for ln in lines:
        if ln is not None:
            ln.toks[0].col = ln.indent

    def natural(i: int, j: int) -> int:
        """Place line i's tokens before index j, each after the previous; the column token j would take."""
        toks = lines[i].toks  # type: ignore[union-attr]
        while done[i] <= j:
            k = done[i]
            toks[k].col = toks[k - 1].col + len(toks[k - 1].text) + toks[k].gap
            done[i] += 1
        return toks[j].col

    for run in _runs(lines):
        first = lines[run[0][0]].toks[run[0][1]]  # type: ignore[union-attr]
        if first.kind == "#":
            col = max(first.src, *(natural(i, j) for i, j in run))
        else:  # the narrowest column that keeps the run's smallest source gap
            toks = [lines[i].toks[j] for i, j in run]  # type: ignore[union-attr]
            slack = min(t.src_gap - t.gap for t in toks if not t.joined)
            col = max(natural(i, j) for i, j in run) + max(slack, 0)
        for i, j in run:
            lines[i].toks[j].col = col  # type: ignore[union-attr]
    for i, ln in enumerate(lines):
        if ln is not None and len(ln.toks) > 1:
            natural(i, len(ln.toks) - 1)


def _render(lines: list[_Line | None]) -> Iterator[str]:
    """The output lines, blank lines collapsed (see the module docstring)."""
    out: list[str] = []
    blank = False
    for ln in lines:
        if ln is None:
            blank = bool(out)
            continue
        text = ""
        for t in ln.toks:  # (a column left of the text so far would merge tokens: never)
            text = text.ljust(max(t.col, len(text) + t.gap if text else t.col)) + t.text
        if blank and not out[-1].endswith("{") and ln.toks[0].text != "}":
            out.append("")
        blank = False
        out.append(text)
    yield from out


def _starts_after(before: str, after: str, starts: set[tuple[int, int]]) -> set[tuple[int, int]]:
    """The line starts of statements in `after`, a layout of `before` (whose statement starts are
    `starts`): a layout keeps every non-blank line and moves tokens within it, so a line that
    began with a statement still does, at its first token."""
    old_rows, new_rows = before.split("\n"), after.split("\n")
    old = [n for n, row in enumerate(old_rows, 1) if row.strip()]
    new = [n for n, row in enumerate(new_rows, 1) if row.strip()]
    out = set()
    for o, n in zip(old, new):
        row = old_rows[o - 1]
        if (o, len(row) - len(row.lstrip()) + 1) in starts:
            out.add((n, len(new_rows[n - 1]) - len(new_rows[n - 1].lstrip()) + 1))
    return out


def format_module(module: ast.Module, source: str) -> str:
    """The canonical layout of `source` (which parses to `module`); see the module docstring."""
    starts = _starts(module)
    text = source
    for _ in range(MAX_ROUNDS):  # a new alignment can line up tokens by chance: lay out again until stable
        lines = _lines(text, starts)
        _indent(lines)
        _layout(lines)
        out = list(_render(lines))
        again = "\n".join(out) + "\n" if out else ""
        if again == text:
            break
        starts = _starts_after(text, again, starts)
        text = again
    if [t for ln in text.split("\n") for _, t in tokens(ln)] != [t for ln in source.split("\n") for _, t in tokens(ln)]:
        raise InternalError("pgraph fmt changed more than whitespace (a bug in pgraph.frontend.fmt)")
    return text
