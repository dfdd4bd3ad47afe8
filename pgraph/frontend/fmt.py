"""`pgraph fmt`: the canonical text of a .pgl file, comments and paragraph breaks kept.

The code is the unparser's (pgraph.frontend.unparse: two-space indentation, one statement
per line, canonical expressions); the comments, which the grammar ignores, are taken from
the source text and put back where they were relative to the statements:

- a comment on a line of its own goes before the first statement (or closing `}`) that
  started below it in the source, at that statement's indentation (one level deeper before
  a `}`);
- a comment after code goes at the end of the line of the statement that starts on its
  line (else of the last line written for what came before it), at its old column when the
  code is shorter than that, two spaces after the code otherwise;
- one blank source line before a statement (or before the comments above it) is kept as one
  blank line; the unparser's blank lines between multi-line items are kept too.

So `parse(fmt(x)) == parse(x)` (spans aside: comments are not in the tree) and
`fmt(fmt(x)) == fmt(x)`.
"""

from __future__ import annotations

import attrs

from pgraph import records
from pgraph.frontend import ast
from pgraph.frontend.unparse import INDENT, unparse_lines

__all__ = ["Comment", "comments", "format_module"]


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


def format_module(module: ast.Module, source: str) -> str:
    """The canonical text of `module` (parsed from `source`) with `source`'s comments."""
    lines, origin = unparse_lines(module)
    src = source.split("\n")
    blank = {n for n, t in enumerate(src, 1) if not t.strip()}
    notes = comments(source)
    leading: dict[int, list[Comment]] = {}   # emitted line index -> comments above it
    trailing: dict[int, list[Comment]] = {}  # emitted line index -> comments after it
    tail: list[Comment] = []
    anchors = [i for i, (at, kind) in enumerate(origin) if at is not None and kind in ("stmt", "close")]
    for c in notes:
        if c.trailing:
            same = next((i for i in anchors if origin[i][0] == c.line and origin[i][1] == "stmt"), None)
            if same is None:
                same = next((i for i in anchors if origin[i][0] == c.line), None)
            if same is None:
                before = [i for i, (at, _) in enumerate(origin) if at is not None and at <= c.line]
                same = before[-1] if before else None
            if same is not None:
                trailing.setdefault(same, []).append(c)
                continue
        after = next((i for i in anchors if origin[i][0] > c.line), None)  # type: ignore[operator]
        if after is None:
            tail.append(c)
        else:
            leading.setdefault(after, []).append(c)
    out: list[str] = []
    want_blank = False

    def put_blank() -> None:
        if out and out[-1] != "" and not out[-1].endswith("{"):
            out.append("")

    for i, text in enumerate(lines):
        at, kind = origin[i]
        if kind == "blank":
            want_blank = True
            continue
        above = leading.get(i, [])
        first = above[0].line if above else at
        if kind == "stmt" and first is not None and first - 1 in blank:
            want_blank = True
        if want_blank and kind == "stmt":
            put_blank()
        want_blank = False
        indent = text[:len(text) - len(text.lstrip())] + (INDENT if kind == "close" else "")
        prev_line = None
        for c in above:
            if prev_line is not None and c.line - 1 in blank and c.line - 1 > prev_line:
                put_blank()
            out.append(indent + c.text)
            prev_line = c.line
        if above and at is not None and at - 1 in blank and at - 1 > above[-1].line and kind == "stmt":
            put_blank()
        out.append(_with_trailing(text, trailing.get(i, [])))
    if tail:
        if (notes and tail[0].line - 1 in blank) or not out:
            put_blank()
        prev_line = None
        for c in tail:
            if prev_line is not None and c.line - 1 in blank and c.line - 1 > prev_line:
                put_blank()
            out.append(c.text)
            prev_line = c.line
    while out and out[-1] == "":
        out.pop()
    return "\n".join(out) + "\n" if out else ""


def _with_trailing(code: str, cs: list[Comment]) -> str:
    """`code` and its trailing comments (joined), at the first one's old column when it fits."""
    if not cs:
        return code
    text = " ".join(c.text for c in cs)
    col = cs[0].col - 1
    return (code.ljust(col) if len(code) + 2 <= col else code + "  ") + text
