"""`pgraph fmt FILE... [--check]`: rewrite .pgl files in the canonical layout (pgraph.frontend.fmt).

Exit codes: 0 every file is (now) canonical; 1 a file has a syntax error (PG001, nothing
written), or with `--check` a file would change (nothing written); 2 usage error (a file
that cannot be read or written). Files are rewritten atomically and only when they change;
a file that starts with a UTF-8 byte-order mark keeps it (the reader drops it).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from pgraph.diagnostics import DiagnosticBag
from pgraph.frontend.fmt import format_module
from pgraph.frontend.loader import read_spec
from pgraph.frontend.parser import parse_source
from pgraph.source import MAX_SOURCE_BYTES, open_input

__all__ = ["format_text", "run"]

_BOM = "\ufeff"


def _has_bom(path: Path) -> bool:
    """Whether the file starts with the UTF-8 byte-order mark (False when it cannot be read)."""
    try:
        with open_input(path, MAX_SOURCE_BYTES) as f:
            return f.read(3) == b"\xef\xbb\xbf"
    except OSError:
        return False


def format_text(text: str, name: str, bag: DiagnosticBag) -> str | None:
    """The canonical text of one file's `text`; None (PG001 in `bag`) on a syntax error."""
    from pgraph.source import SourceFile

    module = parse_source(SourceFile(name, text), bag)
    return None if module is None else format_module(module, text)


def run(args: argparse.Namespace, emit: Callable[[DiagnosticBag], None],
        write: Callable[[Path, str], None]) -> int:
    """Format or check every file of `args.files`; see the module docstring for exit codes."""
    bag = DiagnosticBag()
    changed = []
    for name in args.files:
        src = read_spec(name)
        text = format_text(src.text, src.display, bag)
        if text is None or text == src.text:
            continue
        changed.append(name)
        if not args.check:
            write(Path(name), _BOM + text if _has_bom(Path(name)) else text)
    if bag.pending:  # a literal too large: the planner's PG018 (pgraph.findings); its reporters load only then
        from pgraph.pipeline import owned_bag

        bag.forward(reported := owned_bag())
        bag = reported
    if bag.items:
        emit(bag)
    verb = "would reformat" if args.check else "reformatted"
    for name in changed:
        print(f"{verb} {name}", file=sys.stderr if args.check else sys.stdout)
    if bag.has_errors:
        return 1
    return 1 if args.check and changed else 0
