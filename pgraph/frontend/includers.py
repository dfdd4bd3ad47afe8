"""The files of a project that include a given .pgl file: the contexts of an include-only file.

A file of shared declarations (`specs/decode_common.pgl`: tensors and kernels whose shapes use
constants of `specs/qwen3_14b.pgl`) has no entry and names what its includer defines, so it
cannot be planned alone. `pgraph check` and `pgraph lsp` check it in the context of every spec
that includes it (pgraph.commands.context): the project root (`loader.project_root`) is scanned
for .pgl files, each file that mentions `include` is parsed, and the files that reach the given
one through their includes, directly or through other files, and declare an entry of their own
are its contexts.

The scan skips hidden folders (`.git`, `.venv`), `__pycache__` and `node_modules`, follows no
folder symlink, reads at most MAX_SCANNED files, and ignores files that cannot be read or parsed
(they are other files' problems, reported when those are checked).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from pgraph.diagnostics import DiagnosticBag
from pgraph.frontend import ast
from pgraph.frontend.loader import normalize_text, read_source, real_path
from pgraph.frontend.parser import parse_source
from pgraph.source import SourceFile

__all__ = ["MAX_SCANNED", "declares_entry", "find_includers"]

#: Most .pgl files read by one scan (the repository holds about 200).
MAX_SCANNED = 5000
_SKIPPED = frozenset({"__pycache__", "node_modules"})


def declares_entry(module: ast.Module) -> bool:
    """Whether the file declares an `entry` of its own."""
    return any(isinstance(item, ast.Entry) for item in module.items)


def _pgl_files(root: Path) -> list[Path]:
    """The .pgl files below `root`, in a stable order (see the module docstring for what is skipped)."""
    out: list[Path] = []
    for folder, dirs, files in os.walk(root, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _SKIPPED)
        out.extend(Path(folder) / f for f in sorted(files) if f.endswith(".pgl"))
        if len(out) >= MAX_SCANNED:
            return out[:MAX_SCANNED]
    return out


def find_includers(target: Path, root: Path, sources: Mapping[Path, str] | None = None) -> list[Path]:
    """The files below `root` that include `target` (directly or through other files) and declare
    an entry: resolved paths, sorted. `sources` holds unsaved editor text by resolved path."""
    target = real_path(target)
    sources = sources or {}
    included_by: dict[Path, set[Path]] = {}
    entries: set[Path] = set()
    for path in _pgl_files(root):
        real = real_path(path)
        try:
            text = sources.get(real)
            file = SourceFile(str(path), normalize_text(text), real) if text is not None else read_source(path)
        except (OSError, UnicodeDecodeError):
            continue
        if "include" not in file.text:
            continue
        module = parse_source(file, DiagnosticBag())
        if module is None:
            continue
        if declares_entry(module):
            entries.add(real)
        for item in module.items:
            if isinstance(item, ast.Include) and item.path.strip():
                included_by.setdefault(real_path(real.parent / item.path), set()).add(real)
    seen: set[Path] = set()
    todo = [target]
    while todo:
        for parent in included_by.get(todo.pop(), ()):
            if parent not in seen and parent != target:
                seen.add(parent)
                todo.append(parent)
    return sorted(p for p in seen if p in entries)
