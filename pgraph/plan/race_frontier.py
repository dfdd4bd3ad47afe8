"""Races of one buffer with many conflicting pairs, found without listing the pairs.

`races.conflicting_keys` lists every overlapping conflicting instance pair of a buffer and the
race rule then asks the happens-before of each: a tensor that 5,000 ordered InOut writers
update has 12.5 million pairs, all ordered. Here the touches are visited in submission order
(a topological order: every edge runs from an earlier submit to a later one) over the cells of
the buffer (the boxes of one shape cut along every distinct coordinate, or the flat element
intervals of views of several shapes), and each cell keeps a forest of the touches seen:

- the frontier: touches not yet known to happen before a later touch of the cell;
- under every touch, the touches found to happen before it (its children).

A new touch b asks each frontier touch x whether x happens before b. If so, x and everything
under it happen before b (a path x -> b, and every child reaches x), so x moves under b and is
never asked again about b. If not, x races with b when their kinds conflict and their boxes
overlap (checked exactly), and x's children are asked in turn. Reads never meet reads and
atomic adds never meet atomic adds: each forest node carries the (dispatch, kind) bits of its
subtree, and a subtree holding nothing b conflicts with is not entered. A totally ordered
stream of writers costs one question per touch; races cost what they report.

Bounded witnesses: at most `limit + 1` racing instance pairs are kept per (earlier dispatch,
later dispatch) of the buffer; once a dispatch pair has them, its bits leave the set b asks for,
so a grid of n unordered writers of one tile costs O(n * limit), not n^2/2. The race verdict of
every dispatch pair (does it race at all) is exact; the pairs of a dispatch pair with at most
`limit` races are all of them (the same as the reference's), beyond that `limit + 1` of them.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable, Sequence
from typing import Any

from pgraph.ir.instances import Box, flat, overlap
from pgraph.ir.program import Program
from pgraph.kinds import AccessKind

#: (instance, kind, box, tensor name) of one touch of a buffer (races.NodeTouch).
NodeTouch = tuple[int, AccessKind, Box, str]

_CODE = {AccessKind.READ: 0, AccessKind.WRITE: 1, AccessKind.ATOMIC: 2}
#: kind code -> the kind codes it conflicts with (a write with anything, an atomic add with a read)
_CONFLICTS = {0: (1, 2), 1: (0, 1, 2), 2: (0, 1)}

#: Cells per touch, on average, the grid of a buffer may give its touches: past it, dimensions
#: leave the grid and segments merge (the touches of a cell are then compared exactly, box
#: against box). Fewer, larger cells cost fewer visits and longer frontiers.
CELLS_PER_TOUCH = 4


class _Node:
    """A touch in the forest of one cell: instance, dispatch index, kind code, the touch's box
    and tensor, the touches under it, and the (dispatch, kind) bits of its subtree."""

    __slots__ = ("touch", "node", "disp", "code", "box", "tensor", "children", "mask")

    def __init__(self, touch: int, node: int, disp: int, code: int, box: Box, tensor: str) -> None:
        self.touch = touch
        self.node = node
        self.disp = disp
        self.code = code
        self.box = box
        self.tensor = tensor
        self.children: list[_Node] = []
        self.mask = 1 << (3 * disp + code)


def _span(cuts: list[int], lo: int, hi: int) -> tuple[int, int]:
    """The segments [first, last) of the cut points `cuts` that the interval [lo, hi) meets."""
    return bisect.bisect_right(cuts, lo) - 1, bisect.bisect_left(cuts, hi)


def _thin(cuts: list[int], intervals: Sequence[tuple[int, int]], budget: int) -> tuple[list[int], bool]:
    """`cuts` with segments merged (every s-th cut kept, and the last) so that `intervals` meet
    about `budget` segments in all; and whether any were merged."""
    total = sum(b - a for a, b in (_span(cuts, lo, hi) for lo, hi in intervals))
    if total <= budget:
        return cuts, False
    stride = -(-total // budget)
    return sorted({*cuts[::stride], cuts[-1]}), True


def _segments(touches: Sequence[NodeTouch], p: Program) -> tuple[Callable[[NodeTouch], list[int]], bool]:
    """The cells of each touch (a function) and whether two touches sharing a cell overlap for
    sure (every dimension in the grid uncut, one shape) or must be compared exactly.

    One shape: the grid of every distinct coordinate of every dimension; past CELLS_PER_TOUCH
    cells per touch on average, dimensions leave the grid (the one whose leaving saves most
    first), then segments of the last one merge. Several shapes (views): the flat bounding
    intervals, cut at every end, merged the same way."""
    budget = CELLS_PER_TOUCH * len(touches)
    shapes = {p.tensors[t[3]].shape for t in touches}
    if len(shapes) > 1:
        flats = {t[3]: p.tensors[t[3]].shape for t in touches}
        ivs = [flat(t[2], flats[t[3]]) for t in touches]
        bounds, _ = _thin(sorted({v for iv in ivs for v in iv}), ivs, budget)
        where_flat = {id(t): iv for t, iv in zip(touches, ivs)}

        def flat_cells(t: NodeTouch) -> list[int]:
            return list(range(*_span(bounds, *where_flat[id(t)])))

        return flat_cells, False
    rank = len(next(iter(shapes)))
    if rank == 0:
        return (lambda t: [0]), True
    cuts = [sorted({v for t in touches for v in t[2][d]}) for d in range(rank)]
    spans = [[_span(cuts[d], *t[2][d]) for t in touches] for d in range(rank)]

    def cost(dims: Sequence[int]) -> int:
        total = 0
        for k in range(len(touches)):
            n = 1
            for d in dims:
                lo, hi = spans[d][k]
                n *= hi - lo
            total += n
        return total

    dims = list(range(rank))
    while len(dims) > 1 and cost(dims) > budget:  # drop the dimension that saves the most
        dims.remove(min(dims, key=lambda d: (cost([e for e in dims if e != d]), d)))
    thinned = False
    if len(dims) == 1:
        d = dims[0]
        cuts[d], thinned = _thin(cuts[d], [t[2][d] for t in touches], budget)
        if thinned:
            spans[d] = [_span(cuts[d], *t[2][d]) for t in touches]
    radix = [len(cuts[d]) for d in dims]
    where = {id(t): k for k, t in enumerate(touches)}

    def grid_cells(t: NodeTouch) -> list[int]:
        k = where[id(t)]
        ranges = [range(*spans[d][k]) for d in dims]
        out = []
        for coord in itertools.product(*ranges):
            c = 0
            for v, r in zip(coord, radix):
                c = c * r + v
            out.append(c)
        return out

    return grid_cells, len(dims) == rank and not thinned


def frontier_races(touches: Sequence[NodeTouch], p: Program, dispatch_of: Callable[[int], str],
                   before: Callable[[int, int], bool], limit: int) -> list[tuple[int, int]]:
    """The racing instance pairs (a < b) of one buffer: overlapping touches of conflicting kinds
    with no path between them, at most `limit + 1` per (dispatch of a, dispatch of b); sorted.

    `touches` are the buffer's touches (empty boxes allowed: they touch nothing), `before(a, b)`
    the happens-before (a < b), `dispatch_of` an instance's dispatch name.
    """
    live = []
    for t in touches:
        for lo, hi in t[2]:
            if lo >= hi:
                break
        else:
            live.append(t)
    if not live:
        return []
    live.sort(key=lambda t: t[0])  # stable: each instance's touches in access order
    cells_of, exact = _segments(live, p)
    dindex: dict[str, int] = {}
    disp_of_node: dict[int, int] = {}
    for t in live:
        if t[0] not in disp_of_node:
            disp_of_node[t[0]] = dindex.setdefault(dispatch_of(t[0]), len(dindex))
    n_disp = len(dindex)
    every = [sum(1 << (3 * a + k) for a in range(n_disp) for k in _CONFLICTS[code]) for code in range(3)]
    saturated: dict[int, int] = {}  # later dispatch -> bits of the earlier dispatches done with it
    found: dict[tuple[int, int], list[tuple[int, int]]] = {}
    pairs: set[tuple[int, int]] = set()
    forests: dict[int, dict[tuple[int, int], list[Any]]] = {}  # cell -> (dispatch, kind) -> [nodes, mask]
    asked: dict[int, bool] = {}  # instance -> whether it happens before `node` (one instance's touches)
    current = -1
    for k, t in enumerate(live):
        node, kind, box, tensor = t
        if node != current:
            current = node
            asked = {node: True}

            def ordered(a: int, _asked: dict[int, bool] = asked, _node: int = node) -> bool:
                got = _asked.get(a)
                if got is None:
                    got = _asked[a] = before(a, _node)
                return got

        code = _CODE[kind]
        disp = disp_of_node[node]
        conflicts = _CONFLICTS[code]
        tested: set[int] = set()  # touches compared with this one (in an earlier cell)
        for cell in cells_of(t):
            b = _Node(k, node, disp, code, box, tensor)
            frontier = forests.get(cell)
            if frontier is None:
                frontier = forests[cell] = {}
            want = every[code] & ~saturated.get(disp, 0)
            emptied = []
            for gkey, group in frontier.items():
                if not group[1] & want:
                    continue
                keep: list[_Node] = []
                mask = 0
                for x in group[0]:
                    if x.mask & want and ordered(x.node):
                        b.children.append(x)  # x, and all under it, happen before b
                        b.mask |= x.mask
                        continue
                    keep.append(x)
                    if not x.mask & want:
                        mask |= x.mask
                        continue
                    # x does not happen before b: x races with b if they conflict; so may those under x
                    stack: list[Any] = [x]
                    while stack:
                        y = stack.pop()
                        if y is None:  # the children of the node below have been searched
                            y = stack.pop()
                            left = 1 << (3 * y.disp + y.code)
                            for c in y.children:
                                left |= c.mask
                            y.mask = left  # what is still under y
                            continue
                        if y.code in conflicts and (saturated.get(disp, 0) >> (3 * y.disp)) & 1 == 0 \
                                and y.touch not in tested:
                            tested.add(y.touch)
                            pair = (y.node, node)
                            if pair not in pairs and (exact or overlap(y.box, y.tensor, box, tensor, p)):
                                pairs.add(pair)
                                got = found.setdefault((y.disp, disp), [])
                                got.append(pair)
                                if len(got) > limit:
                                    saturated[disp] = saturated.get(disp, 0) | 7 << (3 * y.disp)
                                    want = every[code] & ~saturated[disp]
                        if not y.children:
                            continue
                        rest = []
                        below = []
                        for c in y.children:
                            if c.mask & want:
                                if ordered(c.node):
                                    b.children.append(c)  # c happens before b: asked through b from now on
                                    b.mask |= c.mask
                                    continue
                                below.append(c)
                            rest.append(c)
                        y.children = rest
                        stack.append(y)
                        stack.append(None)
                        stack.extend(below)
                    mask |= x.mask  # after the search below x, which may have moved nodes under b
                group[0] = keep
                group[1] = mask
                if not keep:
                    emptied.append(gkey)
            for gkey in emptied:
                del frontier[gkey]
            mine = frontier.get((disp, code))
            if mine is None:
                frontier[(disp, code)] = [[b], b.mask]
            else:
                mine[0].append(b)
                mine[1] |= b.mask
    return sorted(pairs)
