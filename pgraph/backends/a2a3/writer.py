"""An indenting line writer for the generated C++ (4 spaces per level, `\\n` line ends)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from pgraph.backends.escape import c_comment


class Writer:
    """Collects lines; `block(header)` writes `header {`, indents, and closes with `}`."""

    def __init__(self, level: int = 0) -> None:
        self.lines: list[str] = []
        self.level = level

    def line(self, text: str = "") -> None:
        """One line at the current indentation (blank lines carry no spaces)."""
        self.lines.append(("    " * self.level + text) if text else "")

    def comment(self, text: str) -> None:
        """A `// text` line; `text` is escaped (pgraph.backends.escape.c_comment): spec and file
        names reach comments, and a line break or a trailing backslash would end or extend them."""
        self.line(f"// {c_comment(text)}")

    def blank(self) -> None:
        """A blank line, never two in a row and never right after an opening brace."""
        if self.lines and self.lines[-1] != "" and not self.lines[-1].endswith("{"):
            self.lines.append("")

    @contextmanager
    def block(self, header: str, closer: str = "}") -> Iterator[None]:
        """`header {` ... `}` with the body one level deeper."""
        self.line(f"{header} {{" if header else "{")
        self.level += 1
        try:
            yield
        finally:
            if self.lines and self.lines[-1] == "":
                self.lines.pop()
            self.level -= 1
            self.line(closer)

    def text(self) -> str:
        """All lines joined, with a final newline."""
        return "\n".join(self.lines) + "\n"
