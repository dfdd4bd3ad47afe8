"""Source files, spans and caret rendering for diagnostics."""

from __future__ import annotations

from pathlib import Path

import attrs

from pgraph import records


@records.value
@attrs.frozen(repr=False, eq=False)
class SourceFile:
    """One `.pgl` text as read from disk (or given inline).

    `display` is the name shown in diagnostics: the path as the user gave it,
    never made absolute, so output stays identical across working directories.
    """

    display: str
    text: str
    path: Path | None = None

    @property
    def lines(self) -> list[str]:
        """The text split into lines, without line terminators.

        Only '\n' ends a line, as in the parser's line numbers: `str.splitlines` would also
        split at form feeds, U+0085 and U+2028 inside comments and shift every later caret.
        """
        lines = [line.removesuffix("\r") for line in self.text.split("\n")]
        return lines[:-1] if lines[-1] == "" else lines

    def line(self, number: int) -> str:
        """Return 1-based line `number`, or '' when out of range."""
        lines = self.lines
        return lines[number - 1] if 1 <= number <= len(lines) else ""


@records.value
@attrs.frozen(repr=False, eq=False)
class Span:
    """A region of a source file: 1-based line and column, end inclusive-exclusive.

    `end_line`/`end_col` point one past the last character, as Lark's meta does.
    """

    file: SourceFile = attrs.field(eq=False, repr=False)
    line: int
    col: int
    end_line: int
    end_col: int

    @property
    def filename(self) -> str:
        """The display name of the file the span is in."""
        return self.file.display

    def location(self) -> str:
        """`file:line:col`, the prefix of a rendered diagnostic."""
        return f"{self.file.display}:{self.line}:{self.col}"

    def render(self) -> list[str]:
        """The source line of the span's start with carets under the span.

        Multi-line spans underline to the end of their first line.
        """
        text = self.file.line(self.line)
        if not text and self.line > len(self.file.lines):
            return []
        start = max(self.col - 1, 0)
        end = self.end_col - 1 if self.end_line == self.line else len(text)
        end = max(end, start + 1)
        pad = "".join(c if c == "\t" else " " for c in text[:start])  # tabs kept: carets line up
        return [f"{self.line:>5} | {text}", "      | " + pad + "^" * (end - start)]


def span_from_meta(file: SourceFile, meta: object) -> Span:
    """Build a Span from a Lark `meta` (rule) or `Token` (terminal)."""
    line = getattr(meta, "line", None)
    if line is None:
        return Span(file, 1, 1, 1, 1)
    return Span(
        file,
        int(line),
        int(getattr(meta, "column", 1)),
        int(getattr(meta, "end_line", line) or line),
        int(getattr(meta, "end_column", getattr(meta, "column", 1) + 1) or 1),
    )
