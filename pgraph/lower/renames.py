"""The fix of a name declared twice (PG003): the second declaration renamed to a free name."""

from __future__ import annotations

import re

import attrs

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


#: What a rename of the second declaration cannot change the graph of: nothing uses it under the
#: new name, so it submits nothing. Anything else, renamed, comes alive: a task racing with the
#: first, a second buffer, a parameter more than the calls pass (PG009), an axis or a wave more.
INERT = frozenset({"kernel", "fragment"})


def rename_second(loaded: Loaded, name: str, span: Span, what: str) -> tuple[str, Fix | None]:
    """The hint and fix of a second declaration of `name` (a `what`) at `span`: rename it, to a
    free name. What refers to `name` keeps meaning the first declaration (the second is dropped
    today), so the rename changes no reference (renaming the first instead would send them to
    the second, or leave a reference before it undefined: PG002). A fix only for INERT kinds,
    and when the first line of `span` holds the name (the word the fix rewrites:
    `kernel NAME`, `NAME : in ...`)."""
    new = free_name(loaded, name)
    hint = (f"rename the second one (`{new}` is free); what refers to '{name}' keeps meaning the first, "
            "so rename a reference too where it means the second")
    line = span.file.line(span.line)
    end = span.end_col - 1 if span.end_line == span.line else len(line)
    at = re.search(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", line[span.col - 1:end])
    if what not in INERT or at is None:
        return hint, None
    col = span.col + at.start()
    return hint, Fix((Edit(attrs.evolve(span, col=col, end_line=span.line, end_col=col + len(name)), new),))
