"""Fragments (`fragment NAME { ... }` / `use NAME`) and entry selection, for the lowering.

A `use` splices the fragment's statements in place while the Lowerer walks the entry, so the
Program IR never contains a fragment: backends see the same dispatches as if the statements
had been written at the use site. This module keeps the fragment table, the stack of `use`
statements being expanded, the chains that were expanded (for diagnostics raised later, by
expansion or planner passes), and the choice of the program's entry among the files.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import attrs

from pgraph import records
from pgraph.diagnostics import Note
from pgraph.frontend import ast
from pgraph.source import Span

#: A chain of `use` statements, outermost first: the entry's `use a`, then a's `use b`, ...
Chain = tuple[ast.Use, ...]


def inside(span: Span, outer: Span) -> bool:
    """True when `span` lies within `outer` (same file, start and end included)."""
    return (
        span.filename == outer.filename
        and (outer.line, outer.col) <= (span.line, span.col)
        and (span.end_line, span.end_col) <= (outer.end_line, outer.end_col)
    )


def _key(chain: Chain) -> tuple[tuple[str, int, int], ...]:
    return tuple((u.span.filename, u.span.line, u.span.col) for u in chain)


@records.shared_repr
@attrs.define(repr=False)
class FragmentTable:
    """The program's fragments by name, and what the walk has expanded so far.

    `active` is the chain being expanded right now (outermost first); `expanded` records every
    chain that reached each fragment, in walk order, without repeats.
    """

    decls: dict[str, ast.Fragment] = attrs.Factory(dict)
    active: list[ast.Use] = attrs.Factory(list)
    expanded: dict[str, list[Chain]] = attrs.Factory(dict)

    def cycle(self, use: ast.Use) -> list[str] | None:
        """`['a', 'b', 'a']` when expanding `use` would re-enter a fragment being expanded."""
        names = [u.name for u in self.active]
        if use.name not in names:
            return None
        return [*names[names.index(use.name):], use.name]

    @contextmanager
    def expanding(self, use: ast.Use) -> Iterator[None]:
        """Push `use` while its fragment's statements are lowered (and record the chain)."""
        self.active.append(use)
        chain = tuple(self.active)
        seen = self.expanded.setdefault(use.name, [])
        if _key(chain) not in {_key(c) for c in seen}:
            seen.append(chain)
        try:
            yield
        finally:
            self.active.pop()

    def reused(self, span: Span, first: Span) -> ast.Use | None:
        """The earlier `use` that already declared what `span` declares again, or None.

        A name declared twice at the very same place means the fragment being expanded (or
        one of the fragments using it) was used before: the answer is that earlier use.
        """
        if not self.active or (span.filename, span.line, span.col) != (first.filename, first.line, first.col):
            return None
        current = _key(tuple(self.active))
        for depth in range(len(self.active), 0, -1):
            for chain in self.expanded.get(self.active[depth - 1].name, ()):
                key = _key(chain)
                if key == current[:depth]:
                    continue
                # an earlier chain: name its first use that differs from the current chain
                differ = [i for i, (a, b) in enumerate(zip(key, current, strict=False)) if a != b]
                return chain[differ[0] if differ else -1]
        return None

    def notes(self, span: Span) -> list[Note]:
        """'fragment X is used here' notes for a diagnostic at `span` (a DiagnosticBag hook).

        While a fragment is being expanded, a diagnostic inside it gets the notes of the
        current chain, innermost use first. Later (dep scopes, expansion, planner passes), a
        diagnostic inside a fragment gets the notes of every chain that expanded it.
        """
        if self.active:
            innermost = self.decls.get(self.active[-1].name)
            if innermost is not None and inside(span, innermost.span):
                return _chain_notes(tuple(self.active))
        frag = next((f for f in self.decls.values() if inside(span, f.span)), None)
        if frag is None:
            return []
        return [n for chain in self.expanded.get(frag.name, ()) for n in _chain_notes(chain)]


def _chain_notes(chain: Chain) -> list[Note]:
    return [Note(f"fragment '{u.name}' is used here", u.span) for u in reversed(chain)]


@records.value
@attrs.frozen(repr=False, eq=False)
class EntryChoice:
    """The outcome of entry selection: the entry, or the candidates that made it ambiguous."""

    entry: ast.Entry | None
    ambiguous: tuple[ast.Entry, ...] = ()


def choose_entry(entries: Sequence[ast.Entry], root: str) -> EntryChoice:
    """The program's entry among the first entry of each file (`root` is the root's display name).

    The root file's entry wins and entries of included files are ignored (a variant may
    include a spec for its constants, kernels and fragments). Without one in the root, the
    entry of the only included file that has one is used; several make it ambiguous.
    """
    own = [e for e in entries if e.span.filename == root]
    if own:
        return EntryChoice(own[0])
    if len(entries) == 1:
        return EntryChoice(entries[0])
    return EntryChoice(None, tuple(entries))
