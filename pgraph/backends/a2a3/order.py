"""The items of one generated block, in the order they are written.

Both the naming pass (`naming`) and the emission (`blocks`) walk a block through
`block_items`, so the names are chosen in exactly the order the code that uses them is written.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

from pgraph.ir import program as ir
from pgraph.kinds import NodeKind

from .context import Context
from .layout import Key, Node, Path


class Phase(NamedTuple):
    """A `---- phase <name> ----` comment before the first dispatch of a phase."""

    name: str


class Declare(NamedTuple):
    """The TaskId arrays and carries of the block that precede its child `before`."""

    before: Key


class Submit(NamedTuple):
    """One dispatch, or one round-robin group of an `interleave` block (`ir.interleave_groups`)."""

    group: tuple[ir.Dispatch, ...]


class Alloc(NamedTuple):
    """One allocation site (`ir.alloc_key`); `manual` when it holds a manual scope's buffers."""

    key: ir.AllocKey
    manual: bool


class Scope(NamedTuple):
    """A nested scope block."""

    node: Node


class Loop(NamedTuple):
    """A scope-level `for` loop."""

    node: Node


Item = Phase | Declare | Submit | Alloc | Scope | Loop


def block_items(ctx: Context, node: Node, path: Path) -> Iterator[Item]:
    """The items of block `node` (at `path`, its own key included) in the order they are written.

    The storages before a child come first (each (path, child) once: a manual scope's batch
    declares the TaskIds of its scope before the batch); a phase comment when the phase of the
    dispatches changes; the members of an `interleave` block are gathered into their groups.
    """
    p = ctx.p
    declared: set[Key] = set()

    def declare(before: Key) -> Iterator[Declare]:
        """The storages before `before`, the first time only."""
        if before not in declared:
            declared.add(before)
            yield Declare(before)

    phase = None
    kids = node.children
    i = 0
    while i < len(kids):
        child = kids[i]
        i += 1
        if child.kind is NodeKind.DISPATCH:
            d = p.dispatch(child.name)
            if d.phase and d.phase != phase:
                yield Phase(d.phase)
            phase = d.phase
            yield from declare(child.key)
            if d.interleave is None:
                yield Submit((d,))
                continue
            members = [d]
            while (i < len(kids) and kids[i].kind is NodeKind.DISPATCH
                   and p.dispatch(kids[i].name).interleave == d.interleave):
                yield from declare(kids[i].key)
                members.append(p.dispatch(kids[i].name))
                i += 1
            for group in ir.interleave_groups(members):
                yield Submit(tuple(group))
            phase = members[-1].phase
            continue
        yield from declare(child.key)
        if child.kind is NodeKind.ALLOC:
            key = ctx.alloc_keys[child.name]
            if key[1] != key[0]:  # a manual scope's batch: its TaskIds come first, as pypto emits them
                yield from declare((NodeKind.SCOPE, key[1]))
            yield Alloc(key, key[1] != key[0])
            continue
        phase = None  # a scope or a loop: the next dispatch names its phase again
        yield Scope(child) if child.kind is NodeKind.SCOPE else Loop(child)
