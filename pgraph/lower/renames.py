"""The fix of a name declared twice (PG003): the second declaration renamed to a free name."""

from __future__ import annotations

import re

from pgraph.diagnostics import Edit, Fix
from pgraph.frontend.loader import Loaded
from pgraph.source import Span

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def free_name(loaded: Loaded, name: str) -> str:
    """`name_2` (or `name_3`, ...): the first such word that no loaded file holds anywhere, so it
    collides with no declaration, keyword or reference."""
    files = {id(it.span.file): it.span.file for it in loaded.items}
    files[id(loaded.root)] = loaded.root
    words = {w for f in files.values() for w in _WORD.findall(f.text)}
    n = 2
    while f"{name}_{n}" in words:
        n += 1
    return f"{name}_{n}"


def rename_second(loaded: Loaded, name: str, span: Span) -> tuple[str, Fix | None]:
    """The hint and fix of a second declaration of `name` at `span`: rename it, to a free name.
    What refers to `name` keeps meaning the first declaration (the second is dropped today), so
    the rename changes no reference (renaming the first instead would send them to the second,
    or leave a reference before it undefined: PG002). No fix when `span` is not the name itself."""
    new = free_name(loaded, name)
    hint = (f"rename the second one (`{new}` is free); what refers to '{name}' keeps meaning the first, "
            "so rename a reference too where it means the second")
    if span.line != span.end_line or span.file.line(span.line)[span.col - 1:span.end_col - 1] != name:
        return hint, None
    return hint, Fix((Edit(span, new),))
