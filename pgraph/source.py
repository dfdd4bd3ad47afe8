"""Source files, spans and caret rendering for diagnostics; the one bounded reader of input files.

Every file pgraph reads because a command line or a spec names it (the spec, its includes, a
`--config`, `sim --timing`/`--calibration`/`--calibrate`, a deps.json of `import`/`diff`, the
files of `fmt`, the files `pgraph lsp` is asked about) goes through `open_input` /
`read_input`: only a regular file is opened (a FIFO, a device such as /dev/zero, a socket or a
folder is refused after an `os.stat`, before any open, and again on the opened descriptor, so
one swapped in between is refused too); the open does not block; and at most the caller's
limit of bytes is read, so a file that grows without end is an error (EFBIG) instead of a read
that never ends.
"""

from __future__ import annotations

import errno
import io
import os
import stat
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


# ---- the bounded reader of input files --------------------------------------------------------

#: Largest .pgl file read (the HEAD spec and its includes are about 40 KB together).
MAX_SOURCE_BYTES = 16 * 2**20
#: Largest TOML table read (`sim --timing`, `--calibration`: the shipped a2a3.toml is 4 KB).
MAX_TABLE_BYTES = 16 * 2**20
#: Largest JSON capture read (a deps.json, a chip_swimlane_records.json): a 40-layer prefill
#: capture of 1.4M tasks is about 1.2 GB.
MAX_CAPTURE_BYTES = 4 * 2**30


def file_kind(mode: int) -> str:
    """'a FIFO', 'a character device', ... for an `st_mode` that is not a regular file."""
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory")):
        if test(mode):
            return name
    return "not a regular file"


def check_regular(path: str | Path) -> None:
    """OSError unless `path` is a regular file (`os.stat`, so nothing is opened): ENOENT for a
    missing file, ELOOP for a symlink loop, EISDIR for a folder, EINVAL ("is a FIFO", "is a
    character device", ...) for a special file, which an open could block on or disturb."""
    mode = os.stat(path).st_mode
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
    if not stat.S_ISREG(mode):
        raise OSError(errno.EINVAL, f"is {file_kind(mode)}, not a regular file")


class BoundedReader(io.RawIOBase):
    """A binary reader of one regular file that fails (OSError EFBIG) once more than `limit`
    bytes have been read; `open_input` makes one."""

    def __init__(self, raw: io.BufferedReader, limit: int) -> None:
        super().__init__()
        self._raw = raw
        self._limit = limit
        self._read = 0

    def readable(self) -> bool:
        """Always True."""
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        """Fill `buffer` from the file; EFBIG past the limit."""
        view = memoryview(buffer).cast("B")
        want = min(len(view), self._limit + 1 - self._read)
        if want <= 0:
            want = 1
        n = self._raw.readinto(view[:want])
        self._read += n or 0
        if self._read > self._limit:
            raise OSError(errno.EFBIG, f"larger than {_size(self._limit)}")
        return n or 0

    def close(self) -> None:
        """Close the file."""
        self._raw.close()
        super().close()


def _size(n: int) -> str:
    return f"{n // 2**30} GiB" if n >= 2**30 and n % 2**30 == 0 else f"{n // 2**20} MiB"


def open_input(path: str | Path, limit: int) -> io.BufferedReader:
    """Open the input file `path` for reading bytes, at most `limit` of them (see the module
    docstring). OSError: missing (ENOENT), a folder (EISDIR), a special file (EINVAL, refused
    before it is opened), a symlink loop (ELOOP), unreadable (EACCES); a read past `limit` is
    EFBIG."""
    check_regular(path)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise OSError(errno.EINVAL, f"is {file_kind(mode)}, not a regular file")
        raw = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    return io.BufferedReader(BoundedReader(raw, limit), buffer_size=2**20)


def read_input(path: str | Path, limit: int) -> bytes:
    """The bytes of the input file `path` (`open_input`: a regular file, at most `limit` bytes)."""
    with open_input(path, limit) as fh:
        return fh.read()


def input_error(err: OSError | UnicodeDecodeError) -> str:
    """The words of a failed read for a message: 'is a character device, not a regular file',
    'No such file or directory', 'not UTF-8 text'."""
    if isinstance(err, UnicodeDecodeError):
        return "not UTF-8 text"
    return str(err.strerror or err)
