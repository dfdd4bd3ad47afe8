"""An indenting line accumulator for the generated C++ (4 spaces per level, `\\n` line ends).

Every emission function builds its own `Writer` and returns its `lines`, indented from level 0;
the caller places them with `extend`, which indents them to its level. A blank line is kept
only where the whole file would keep it: never two in a row, never right after an opening
brace, never before a closing one. A fragment's leading blank is kept in its lines, so that
the caller decides it against its own previous line (`extend` goes through `blank`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from pgraph.backends.escape import c_comment


class Decl(str):
    """A line declaring the C++ variable `name`, which gets `(void)name;` when nothing reads it."""

    name: str

    def __new__(cls, text: str, name: str) -> Decl:
        """The line `text`, tagged with the declared `name`."""
        out = super().__new__(cls, text)
        out.name = name
        return out


class Writer:
    """Collects lines; `block(header)` writes `header {`, indents, and closes with `}`."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.level = 0

    def line(self, text: str) -> None:
        """One line at the current indentation."""
        self.lines.append("    " * self.level + text)

    def decl(self, text: str, name: str) -> None:
        """One line that declares `name` (see `Decl`)."""
        self.lines.append(Decl("    " * self.level + text, name))

    def comment(self, text: str) -> None:
        """A `// text` line; `text` is escaped (pgraph.backends.escape.c_comment): spec and file
        names reach comments, and a line break or a trailing backslash would end or extend them."""
        self.line(f"// {c_comment(text)}")

    def blank(self) -> None:
        """A blank line, never two in a row and never right after an opening brace."""
        if not self.lines or (self.lines[-1] != "" and not self.lines[-1].endswith("{")):
            self.lines.append("")

    def extend(self, lines: Iterable[str]) -> None:
        """Another fragment's lines, one level per current level deeper; its blanks through `blank`."""
        pad = "    " * self.level
        for ln in lines:
            if ln == "":
                self.blank()
            elif isinstance(ln, Decl):
                self.lines.append(Decl(pad + ln, ln.name))
            else:
                self.lines.append(pad + ln)

    @contextmanager
    def block(self, header: str) -> Iterator[None]:
        """`header {` ... `}` with the body one level deeper (a bare `{` for an empty header)."""
        self.line(f"{header} {{" if header else "{")
        self.level += 1
        try:
            yield
        finally:
            if self.lines and self.lines[-1] == "":
                self.lines.pop()
            self.level -= 1
            self.line("}")

    def text(self) -> str:
        """All lines joined, with a final newline."""
        return "\n".join(self.lines) + "\n"
