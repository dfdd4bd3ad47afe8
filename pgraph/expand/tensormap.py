"""TensorMap inference of auto-scope tasks through an interval index per buffer (the fast path
of `edges.inferred_edges`, which stays the reference under PGRAPH_REFERENCE=1).

The reference keeps, per buffer, the list of live TensorMap entries (registered OUTPUT_EXISTING,
INOUT and atomic-add arguments not yet replaced by a covering INOUT) and tests every lookup
against every entry: a stage of W disjoint writers followed by W readers costs W^2 overlap
tests. Here the live entries of a buffer whose arguments all have one shape are indexed by
their interval in one dimension (the one with the most distinct intervals among that buffer's
arguments), in classes of interval length (powers of two), each a list sorted by the interval
start: a lookup of [lo, hi) scans, per class, only the entries starting in
(lo - longest + 1, hi). The candidates get the reference's exact test (`tensormap_overlap`)
and are taken in registration order, so edges, their order and the replaced entries are the
reference's. A buffer reached through views of different shapes is indexed by the flat
bounding intervals (simpler compares such views by those; a per-dimension overlap of one
shape implies theirs).
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence

from pgraph.ir import program as ir
from pgraph.ir.instances import ArgBox, Instance, covers, flat, tensormap_overlap
from pgraph.ir.queries import Box, BufferKey
from pgraph.kinds import Direction, Provenance, ScopeMode, TaskKind

#: (box, producer instance, tensor name) of one live TensorMap entry.
Entry = tuple[Box, int, str]


class LiveIndex:
    """The live entries of one buffer, indexed by their interval in dimension `dim` (all of one
    shape). `lookup` returns the entries that may overlap a box, in registration order; every
    entry with a side empty is left out (it overlaps nothing, so no lookup finds it)."""

    def __init__(self, dim: int | None, shapes: dict[str, tuple[int, ...]] | None = None) -> None:
        self.dim = dim
        self.shapes = shapes  # views of several shapes: indexed by flat bounding interval
        self.entries: dict[int, Entry] = {}     # registration number -> entry
        self.ivs: dict[int, tuple[int, int]] = {}  # registration number -> its interval
        self.classes: dict[int, list[tuple[int, int]]] = {}  # length class -> sorted (lo, number)
        self.longest: dict[int, int] = {}       # length class -> the longest interval it held
        self.seq = 0

    def _interval(self, box: Box, tensor: str) -> tuple[int, int]:
        if self.shapes is not None:
            return flat(box, self.shapes[tensor])
        return (0, 1) if self.dim is None else box[self.dim]

    def add(self, entry: Entry) -> None:
        """Register `entry` (after every entry already registered)."""
        box = entry[0]
        for lo, hi in box:
            if lo >= hi:
                return  # touches no element: no lookup ever finds it
        lo, hi = self._interval(box, entry[2])
        n = self.seq
        self.seq += 1
        self.entries[n] = entry
        self.ivs[n] = (lo, hi)
        k = (hi - lo).bit_length()
        cls = self.classes.get(k)
        if cls is None:
            cls = self.classes[k] = []
            self.longest[k] = 0
        self.longest[k] = max(self.longest[k], hi - lo)
        if not cls or cls[-1] < (lo, n):
            cls.append((lo, n))
        else:
            bisect.insort(cls, (lo, n))

    def remove(self, n: int) -> None:
        """Drop entry number `n` (replaced by a covering INOUT)."""
        del self.entries[n]
        lo, hi = self.ivs.pop(n)
        cls = self.classes[(hi - lo).bit_length()]
        i = bisect.bisect_left(cls, (lo, n))
        del cls[i]

    def lookup(self, box: Box, tensor: str) -> list[tuple[int, Entry]]:
        """(number, entry) of every entry whose interval meets that of `box` of `tensor`, by
        registration: across layouts (flat intervals) exactly the entries `tensormap_overlap`
        finds; within one, those that also meet it in the indexed dimension."""
        for lo, hi in box:
            if lo >= hi:
                return []
        lo, hi = self._interval(box, tensor)
        ivs = self.ivs
        found: list[int] = []
        entries = self.entries
        for k, cls in self.classes.items():
            if not cls:
                continue
            i = bisect.bisect_left(cls, (lo - self.longest[k] + 1, -1))
            while i < len(cls):
                start, n = cls[i]
                if start >= hi:
                    break
                if ivs[n][1] > lo:
                    found.append(n)
                i += 1
        found.sort()
        return [(n, entries[n]) for n in found]


def _dimension(boxes: list[Box]) -> int | None:
    """The dimension with the most distinct intervals among `boxes` (None for rank 0)."""
    rank = len(boxes[0])
    if not rank:
        return None
    return max(range(rank), key=lambda d: (len({b[d] for b in boxes}), -d))


def inferred_edges(p: ir.Program, instances: Sequence[Instance], args: dict[int, list[ArgBox]],
                   alloc_node: Callable[[BufferKey], int | None]) -> Iterator[tuple[int, int, Provenance]]:
    """`edges.inferred_edges` with a `LiveIndex` per single-shape buffer: the same CREATOR and
    INFERRED edges (producer, consumer, provenance), in the same order. `alloc_node(buffer)` is
    the alloc task (or, for a `created` tensor, the creating task) that created a buffer
    instance (None for external buffers)."""
    auto = []
    boxes: dict[BufferKey, list[Box]] = defaultdict(list)
    shapes: dict[BufferKey, set[tuple[int, ...]]] = defaultdict(set)
    names: dict[BufferKey, dict[str, tuple[int, ...]]] = defaultdict(dict)
    for inst in instances:
        if inst.kind in (TaskKind.ALLOC, TaskKind.DUMMY) or p.scopes[inst.scope].mode is ScopeMode.MANUAL:
            continue
        auto.append(inst)
        for arg in args.get(inst.id, []):
            boxes[arg.buffer].append(arg.box)
            shape = p.tensors[arg.tensor].shape
            shapes[arg.buffer].add(shape)
            names[arg.buffer][arg.tensor] = shape
    indexes: dict[BufferKey, LiveIndex] = {}
    views: dict[str, tuple[int, ...]] = {}
    for buf, bs in boxes.items():
        if len(shapes[buf]) == 1:
            indexes[buf] = LiveIndex(_dimension(bs))
        else:  # views of several shapes: flat bounding intervals (simpler's test across layouts)
            views.update(names[buf])
            indexes[buf] = LiveIndex(None, views)
    for inst in auto:
        me = inst.id
        register = []
        for arg in args.get(me, []):
            alloc = alloc_node(arg.buffer)
            if alloc == me:
                continue  # the creating OUTPUT of a `created` buffer: no edge, no entry
            if alloc is not None:
                yield alloc, me, Provenance.CREATOR
            if ir.manual_dep(p, arg.buffer[0]):
                continue  # `manual_dep`: the creator edge only; no lookup, no TensorMap entry
            direction = arg.param.direction
            if direction is not Direction.OUT:  # INPUT and INOUT look up; OUTPUT_EXISTING does not
                index = indexes[arg.buffer]
                shape = p.tensors[arg.tensor].shape
                for n, (box, producer, tname) in index.lookup(arg.box, arg.tensor):
                    if producer == me:
                        continue
                    same = tname == arg.tensor or p.tensors[tname].shape == shape
                    # across layouts the test is the flat intervals' overlap, which the index found
                    if not same or tensormap_overlap(box, tname, arg.box, arg.tensor, p):
                        yield producer, me, Provenance.INFERRED
                        if direction is not Direction.IN and same and covers(arg.box, box):
                            index.remove(n)  # an INOUT that covers the entry (same layout) replaces it
            if direction is not Direction.IN:
                register.append((arg.buffer, arg.box, arg.tensor))
        for buf, box, tname in register:
            indexes[buf].add((box, me, tname))
