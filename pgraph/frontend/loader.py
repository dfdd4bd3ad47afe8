"""Read a .pgl file and its includes (relative paths, cycle detection) into one item list.

Every file pgraph reads besides the spec named on the command line (an `include`, a `--config`
file) must lie inside the spec's *project root* unless `--allow-include-outside` is given
(`project_root`); paths are compared after symlinks are resolved. Only regular files are read:
a FIFO, a device or a socket is refused after an `os.stat`, before anything opens it.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Mapping
from pathlib import Path

import attrs

from pgraph import records
from pgraph.diagnostics import DiagnosticBag, Note
from pgraph.frontend import ast
from pgraph.frontend.parser import parse_source
from pgraph.source import MAX_SOURCE_BYTES, SourceFile, Span, check_regular, read_input

__all__ = ["MAX_SOURCE_BYTES", "Loaded", "UsageError", "check_regular", "display_name", "is_inside",
           "load_program_files", "normalize_text", "outside_note", "project_root", "read_source", "read_spec", "real_path", "spec_source"]

#: Deepest chain of nested includes followed (the specs nest 2 deep).
MAX_INCLUDE_DEPTH = 100
#: A folder holding one of these names is a project root (`project_root`).
PROJECT_MARKERS = (".git", "pyproject.toml", "pgraph.toml")


class UsageError(Exception):
    """Bad command-line use (a missing file, a malformed -D): exit code 2, no diagnostics."""


@records.value
@attrs.frozen(repr=False, eq=False)
class Loaded:
    """The items of a file and of everything it includes, in textual order."""

    items: tuple[ast.Item, ...]
    root: SourceFile
    include_chain: dict[str, tuple[Span, ...]]

    def chain_notes(self, span: Span | None) -> list[Note]:
        """'in a file included from ...' notes for a diagnostic at `span`, innermost include first."""
        if span is None:
            return []
        return [Note(f"in a file included from {inc.location()}", None)
                for inc in reversed(self.include_chain.get(span.filename, ()))]


def display_name(path: Path) -> str:
    """The path as shown in diagnostics and headers: relative to the cwd when below it."""
    try:
        return str(real_path(path).relative_to(real_path(Path.cwd())))
    except ValueError:
        return str(path)


def project_root(spec: str | Path) -> Path:
    """The project root of the spec named on the command line (a resolved, absolute folder).

    The nearest folder, starting at the spec's own folder (as named, made absolute) and going
    up, that contains `.git`, `pyproject.toml` or `pgraph.toml`; when none does, the spec's
    folder. The result has its symlinks resolved, as every path compared with it has.
    """
    folder = Path(os.path.abspath(spec)).parent
    for candidate in (folder, *folder.parents):
        if any(os.path.lexists(candidate / marker) for marker in PROJECT_MARKERS):
            return Path(os.path.realpath(candidate))
    return Path(os.path.realpath(folder))


def real_path(path: Path) -> Path:
    """`path` absolute with every symlink resolved; a symlink loop is left in place, and the
    `os.stat` of `check_regular` then reports it (ELOOP) instead of the RuntimeError of
    `Path.resolve`."""
    return Path(os.path.realpath(path))


def is_inside(path: Path, root: Path) -> bool:
    """True when the resolved `path` is `root` or below it (both from `real_path`/`project_root`)."""
    return path == root or path.is_relative_to(root)


def read_source(path: Path, display: str | None = None) -> SourceFile:
    """Read `path` as UTF-8 into a SourceFile (OSError propagates to the caller).

    Through the one bounded reader (`pgraph.source.read_input`): only a regular file, at most
    MAX_SOURCE_BYTES, so a runaway generated file is an OSError (EFBIG) instead of a read that
    never ends. A leading byte-order mark is dropped and line ends become '\n' (as `read_text`
    does).
    """
    data = read_input(path, MAX_SOURCE_BYTES)
    text = data.decode("utf-8-sig").replace("\r\n", "\n").replace("\r", "\n")
    return SourceFile(display or display_name(path), text, path)


def read_spec(path: str | Path) -> SourceFile:
    """Read the spec (or config) file named on the command line; UsageError when it cannot be
    read: missing, a folder, a special file (FIFO, device, socket: refused before opening), a
    symlink loop, not UTF-8."""
    p = Path(path)
    try:
        return read_source(p)
    except FileNotFoundError:
        raise UsageError(f"no such file: {path}") from None
    except IsADirectoryError:
        raise UsageError(f"{path} is a directory, not a .pgl file") from None
    except UnicodeDecodeError:
        raise UsageError(f"{path} is not UTF-8 text") from None
    except OSError as err:
        raise UsageError(f"cannot read {path}: {err.strerror or err}") from None


def outside_note(root: Path) -> str:
    """The note that says what the project root is (PG005 outside it, the `--config` usage error)."""
    return (f"the project root is {display_name(root)} (the nearest folder, from the spec's own up, that holds "
            ".git, pyproject.toml or pgraph.toml; else the spec's folder)")


def normalize_text(text: str) -> str:
    """Source text as the reader keeps it: no byte-order mark, every line end '\n'."""
    return text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")


def spec_source(path: str | Path, sources: Mapping[Path, str] | None = None) -> SourceFile:
    """The spec named on the command line: its unsaved text from `sources` (an editor's buffers,
    keyed by resolved path: `pgraph lsp`) when it is there, else `read_spec`."""
    if sources:
        text = sources.get(real_path(Path(path)))
        if text is not None:
            return SourceFile(display_name(Path(path)), normalize_text(text), Path(path))
    return read_spec(path)


class _Loader:
    def __init__(self, bag: DiagnosticBag, root: Path, allow_outside: bool,
                 sources: Mapping[Path, str] | None = None) -> None:
        self.bag = bag
        self.root = root
        self.allow_outside = allow_outside
        self.sources = sources or {}
        self.items: list[ast.Item] = []
        self.chain: dict[str, tuple[Span, ...]] = {}

    def load(self, file: SourceFile, stack: tuple[tuple[Path, Span], ...]) -> None:
        parsed = DiagnosticBag()
        module = parse_source(file, parsed)
        chain = [Note(f"in a file included from {inc.location()}") for inc in reversed(self.chain.get(file.display, ()))]
        parsed.forward(self.bag, chain)
        if module is None:
            return
        for item in module.items:
            if not isinstance(item, ast.Include):
                self.items.append(item)
                continue
            self.include(file, item, stack)

    def include(self, file: SourceFile, item: ast.Include, stack: tuple[tuple[Path, Span], ...]) -> None:
        if not item.path.strip():
            self.bag.add("PG005", "an include names no file (the path is empty)", item.span,
                         hint='write the file to include, e.g. `include "qwen3_14b.pgl"`, or drop the line')
            return
        base = file.path.parent if file.path else Path.cwd()
        target = real_path(base / item.path)
        open_paths = [p for p, _ in stack]
        if target in open_paths or (file.path and target == real_path(file.path)):
            cycle = [*(str(p.name) for p in open_paths[open_paths.index(target):] if target in open_paths)]
            notes = [Note(f"'{p.name}' is included here", sp) for p, sp in stack[1:]]
            self.bag.add(
                "PG004",
                f"include cycle: '{item.path}' is already being included"
                + (f" ({' -> '.join([*cycle, target.name])})" if cycle else ""),
                item.span,
                notes,
                hint="remove one of the includes; constants can live in one shared file",
            )
            return
        if len(stack) > MAX_INCLUDE_DEPTH:  # each level recurses; stop before Python's limit
            self.bag.add("PG005", f"cannot read included file '{item.path}': includes nest more than "
                         f"{MAX_INCLUDE_DEPTH} files deep", item.span,
                         hint="include the shared files from one place instead of through a chain")
            return
        if not self.allow_outside and not is_inside(target, self.root):
            lexical = Path(os.path.abspath(base / item.path))
            via = f" (a symlink to {display_name(target)})" if lexical != target else ""
            self.bag.add(
                "PG005",
                f"included file '{item.path}'{via} is outside the project root; it was not read",
                item.span,
                [Note(outside_note(self.root))],
                hint="move the file into the project, or pass --allow-include-outside to read files outside it",
            )
            return
        try:
            display = display_name(target) if not Path(item.path).is_absolute() else item.path
            unsaved = self.sources.get(target)
            child = read_source(target, display) if unsaved is None else SourceFile(display, normalize_text(unsaved),
                                                                                    target)
        except (OSError, UnicodeDecodeError) as err:
            reason = "not UTF-8 text" if isinstance(err, UnicodeDecodeError) else err.strerror or err
            self.bag.add(
                "PG005",
                f"cannot read included file '{item.path}': {reason}",
                item.span,
                hint=_read_hint(err, base),
            )
            return
        self.chain[child.display] = (*(sp for _, sp in stack[1:]), item.span)
        self.load(child, (*stack, (target, item.span)))


def _read_hint(err: Exception, base: Path) -> str:
    """The fix for an include that cannot be read, by the reason."""
    if isinstance(err, UnicodeDecodeError):
        return "save the file as UTF-8 text"
    if isinstance(err, OSError) and err.errno == errno.ELOOP:
        return "the path is a chain of symlinks that loops: point one of them at the real file"
    if isinstance(err, OSError) and err.errno == errno.EINVAL:
        return "include a regular .pgl file (pgraph does not read FIFOs, devices or sockets)"
    if isinstance(err, IsADirectoryError):
        return "include a .pgl file inside the folder, not the folder"
    return f"paths are relative to the including file's folder ({base.name or '.'})"


def load_program_files(root: SourceFile, bag: DiagnosticBag, project: Path | None = None,
                       allow_outside: bool = False, sources: Mapping[Path, str] | None = None) -> Loaded | None:
    """Parse `root` and its includes; None when a syntax error stops parsing.

    An include that resolves (symlinks followed) outside `project` (default: the project root
    of `root`, `project_root`) is PG005 and is not read, unless `allow_outside`. An included
    file whose resolved path is a key of `sources` is read from there (an editor's unsaved text).
    """
    if project is None:
        project = project_root(root.path) if root.path is not None else real_path(Path.cwd())
    loader = _Loader(bag, project, allow_outside, sources)
    # The first stack entry is the root itself (its span is a placeholder, never reported).
    root_path = real_path(root.path) if root.path is not None else Path(root.display)
    stack: tuple[tuple[Path, Span], ...] = ((root_path, Span(root, 1, 1, 1, 1)),)
    loader.load(root, stack)
    if bag.has_errors:
        return None
    return Loaded(tuple(loader.items), root, loader.chain)
