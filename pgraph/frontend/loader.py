"""Read a .pgl file and its includes (relative paths, cycle detection) into one item list."""

from __future__ import annotations

import errno
from pathlib import Path

import attrs

from pgraph.diagnostics import DiagnosticBag, Note
from pgraph.frontend import ast
from pgraph.frontend.parser import parse_source
from pgraph.source import SourceFile, Span

#: Deepest chain of nested includes followed (the specs nest 2 deep).
MAX_INCLUDE_DEPTH = 100
#: Largest .pgl file read (the HEAD spec and its includes are about 40 KB together).
MAX_SOURCE_BYTES = 16 * 2**20


class UsageError(Exception):
    """Bad command-line use (a missing file, a malformed -D): exit code 2, no diagnostics."""


@attrs.frozen
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
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def read_source(path: Path, display: str | None = None) -> SourceFile:
    """Read `path` as UTF-8 into a SourceFile (OSError propagates to the caller).

    A leading byte-order mark is dropped and line ends become '\n' (as `read_text` does). At
    most MAX_SOURCE_BYTES are read, so `/dev/zero` or a runaway generated file is an OSError
    (EFBIG) instead of a read that never ends.
    """
    with path.open("rb") as fh:
        data = fh.read(MAX_SOURCE_BYTES + 1)
    if len(data) > MAX_SOURCE_BYTES:
        raise OSError(errno.EFBIG, f"larger than {MAX_SOURCE_BYTES // 2**20} MiB")
    text = data.decode("utf-8-sig").replace("\r\n", "\n").replace("\r", "\n")
    return SourceFile(display or display_name(path), text, path)


def read_spec(path: str | Path) -> SourceFile:
    """Read the spec file named on the command line; UsageError when it cannot be read."""
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
        raise UsageError(f"cannot read {path}: {err.strerror}") from None


class _Loader:
    def __init__(self, bag: DiagnosticBag) -> None:
        self.bag = bag
        self.items: list[ast.Item] = []
        self.chain: dict[str, tuple[Span, ...]] = {}

    def load(self, file: SourceFile, stack: tuple[tuple[Path, Span], ...]) -> None:
        parsed = DiagnosticBag()
        module = parse_source(file, parsed)
        chain = [Note(f"in a file included from {inc.location()}") for inc in reversed(self.chain.get(file.display, ()))]
        for d in parsed.items:
            self.bag.add(d.code, d.message, d.span, [*d.notes, *chain], d.hint, d.severity, d.fix)
        if module is None:
            return
        for item in module.items:
            if not isinstance(item, ast.Include):
                self.items.append(item)
                continue
            self.include(file, item, stack)

    def include(self, file: SourceFile, item: ast.Include, stack: tuple[tuple[Path, Span], ...]) -> None:
        base = file.path.parent if file.path else Path.cwd()
        target = (base / item.path).resolve()
        open_paths = [p for p, _ in stack]
        if target in open_paths or (file.path and target == file.path.resolve()):
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
        try:
            display = display_name(target) if not Path(item.path).is_absolute() else item.path
            child = read_source(target, display)
        except (OSError, UnicodeDecodeError) as err:
            reason = "not UTF-8 text" if isinstance(err, UnicodeDecodeError) else err.strerror or err
            self.bag.add(
                "PG005",
                f"cannot read included file '{item.path}': {reason}",
                item.span,
                hint=f"paths are relative to the including file's folder ({base.name or '.'})",
            )
            return
        self.chain[child.display] = (*(sp for _, sp in stack[1:]), item.span)
        self.load(child, (*stack, (target, item.span)))


def load_program_files(root: SourceFile, bag: DiagnosticBag) -> Loaded | None:
    """Parse `root` and its includes; None when a syntax error stops parsing."""
    loader = _Loader(bag)
    # The first stack entry is the root itself (its span is a placeholder, never reported).
    root_path = root.path.resolve() if root.path is not None else Path(root.display)
    stack: tuple[tuple[Path, Span], ...] = ((root_path, Span(root, 1, 1, 1, 1)),)
    loader.load(root, stack)
    if bag.has_errors:
        return None
    return Loaded(tuple(loader.items), root, loader.chain)
