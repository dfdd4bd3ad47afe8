"""Instance graph data: submitted tasks, their argument boxes, what expansion found, box overlap.

`InstanceGraph` is what the expander (`pgraph.expand`) builds and every planner pass and
backend reads: instances in submission order, a networkx DiGraph of their edges (each with
its provenance set), task-level argument boxes and per-block accesses, and the issues the
expansion met (a region leaving its tensor, an empty dep), which `pgraph.plan` reports.
The overlap test is the runtime's: per dimension for one tensor, flat row-major intervals
across views of one buffer (simpler's L1 test).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, NamedTuple

import attrs

from pgraph import records
from pgraph.ir import program as ir
from pgraph.ir.queries import Box, BufferKey, axis_values
from pgraph.kinds import AccessKind, Provenance, TaskKind
from pgraph.source import Span

if TYPE_CHECKING:
    import networkx as nx

__all__ = ["ArgBox", "BlockAccess", "Box", "BufferKey", "Edge", "Instance", "InstanceGraph", "axis_values"]


@records.value
@attrs.frozen(repr=False, eq=False)
class Instance:
    """One submitted task (or alloc task): dispatch, loop iterations, task index, weight.

    `loops` are the ids of the loops `iters` belong to (the dispatch's loops; for an alloc
    task, the loops of its allocation group). `weight` is how many real tasks it stands for
    under window expansion; `blocks` is the SPMD block count (for an alloc instance: the
    number of `alloc_tensors` calls its group takes).
    """

    id: int
    dispatch: str
    kind: TaskKind
    iters: tuple[int, ...]
    index: tuple[int, ...]
    weight: int
    scope: int
    blocks: int
    label: str
    loops: tuple[int, ...]


class ArgBox(NamedTuple):
    """A task-level kernel argument: buffer, bounding box over the blocks in the region tensor's coordinates.

    A NamedTuple: a --full prefill makes 1.1 million of them (an attrs class costs 3x to build).
    """

    param: ir.Param
    tensor: str
    buffer: BufferKey
    box: Box
    indirect: bool


class BlockAccess(NamedTuple):
    """One access of one block: tensor name, buffer instance, box, indirect (a may-overlap bound).

    A NamedTuple: hot loops unpack it (`for tensor, key, box, indirect in accesses`).
    """

    tensor: str
    buffer: BufferKey
    box: Box
    indirect: bool


#: The accesses of one block, by kind.
BlockAccesses = dict[AccessKind, list[BlockAccess]]


def empty_accesses() -> BlockAccesses:
    """A fresh {read: [], write: [], atomic: []}."""
    return {AccessKind.READ: [], AccessKind.WRITE: [], AccessKind.ATOMIC: []}


# ---- what the expansion found (pgraph.plan.expansion_checks reports these) ----


@records.value
@attrs.frozen(repr=False, eq=False)
class RegionIssue:
    """A region of an instance with a negative extent ('negative') or outside its tensor ('bounds')."""

    kind: str
    span: Span
    where: str
    tensor: str
    lo: int
    hi: int
    size: int


@records.value
@attrs.frozen(repr=False, eq=False)
class EvalIssue:
    """An expression of an instance that cannot be evaluated (division by zero, ...)."""

    span: Span
    where: str
    message: str


@records.value
@attrs.frozen(repr=False, eq=False)
class DepIssue:
    """A dep that selects no tile ('empty'), tiles outside the tile space ('range'), or a range
    written backwards (`[5..2]`, `[a +: -1]`: 'backwards', `lo` > `hi`)."""

    kind: str
    span: Span
    consumer: str
    tileset: str
    var: str = ""
    lo: int = 0
    hi: int = 0


Issue = RegionIssue | EvalIssue | DepIssue


class Edge(NamedTuple):
    """One edge of the instance graph: what the entries between one producer and one consumer say.

    `prov` is the set of provenances of its entries (one shared frozenset per combination,
    `provenance_union`), `entries` the declared (explicit or carried) dep entries folded into it
    (a TaskId named twice in one consumer's lists is two entries, pypto keeps both; the
    TensorMap and creator entries count none), `span` the first dep that declared it (None for
    an inferred or creator edge). Immutable: `pgraph.expand.builder.GraphBuilder` folds a
    repeated entry by replacing the record, and the frozen `InstanceGraph` holds the last one.
    A NamedTuple: a --full prefill makes 1.5 million of them.
    """

    prov: frozenset[Provenance]
    entries: int
    span: Span | None


class InstanceGraph:
    """Instances in submission order and the edges between them, built once and then read.

    Made by `pgraph.expand.builder.GraphBuilder.freeze` (the expander's builder) with every
    field; the planner passes and backends read it. The edges live in `succ` and `pred` (node ->
    neighbour -> `Edge`, networkx's own adjacency layout); `graph` is a networkx DiGraph over
    those same dicts, made when first asked for, so that `pgraph check` and `plan` never import
    networkx (about 0.2 s of start-up) while the backends and tests keep its read API.
    """

    def __init__(self, program: ir.Program, full: bool, *, instances: list[Instance],
                 by_key: dict[tuple[str, tuple[int, ...], tuple[int, ...]], int],
                 succ: dict[int, dict[int, Edge]], pred: dict[int, dict[int, Edge]],
                 args: dict[int, list[ArgBox]], blocks: dict[int, list[BlockAccesses]],
                 loop_weights: dict[int, dict[int, int]],
                 alloc_info: dict[int, tuple[int, tuple[int, ...], tuple[ir.Tensor, ...]]],
                 scope_loops: dict[int, tuple[int, ...]], windowed: frozenset[int], issues: list[Issue],
                 dropped: list[tuple[str, str]], dropped_empty: list[tuple[str, str]] | None = None,
                 ungated: dict[tuple[str, str], list[int]] | None = None) -> None:
        self.program = program
        self.full = full
        self.instances = instances
        #: (dispatch, loop iterations, task index) -> instance id
        self.by_key = by_key
        self.succ = succ
        self.pred = pred
        self._nx: nx.DiGraph | None = None
        #: instance id -> its task-level argument boxes (tasks only, not dummies or allocs)
        self.args = args
        #: instance id -> per block, its accesses by kind
        self.blocks = blocks
        #: loop id -> expanded iteration -> the iterations it stands for
        self.loop_weights = loop_weights
        #: alloc instance id -> (scope id, loops of its group, the tensors it allocates)
        self.alloc_info = alloc_info
        #: scope id -> the loops whose iterations make separate instances of that scope
        self.scope_loops = scope_loops
        #: loops expanded as a two-iteration window (their iterations are identical)
        self.windowed = windowed
        #: what the expansion met, in the order it met it (one per source position and kind)
        self.issues = issues
        #: (dispatch, label) of the dep-carrying dummies left out because no dep reached a task
        #: (the generated code does not submit them: `if (deps_count > 0)`)
        self.dropped = dropped
        #: (dispatch, label) of the empty-deps dummies left out because the target's compiler
        #: drops them (`pypto_pr` below #1987: pgraph.ir.limits.drops_empty_dummies)
        self.dropped_empty = dropped_empty or []
        #: (dispatch, label) of every dummy left out -> the instances that waited on it (ids
        #: after the renumbering; a consumer that is itself left out is not listed)
        self.ungated = ungated or {}

    @property
    def graph(self) -> nx.DiGraph:
        """The edges as a networkx DiGraph sharing `succ`/`pred` (imports networkx on first use);
        its edge data are `Edge` records."""
        if self._nx is None:
            import networkx as nx

            g = nx.DiGraph()
            g._node = {n: {} for n in self.succ}
            g._adj = g._succ = self.succ
            g._pred = self.pred
            self._nx = g
        return self._nx

    def edges(self) -> Iterator[tuple[int, int, Edge]]:
        """Every edge (u, v, data), by producer and then consumer insertion order."""
        for u, adj in self.succ.items():
            for v, data in adj.items():
                yield u, v, data

    def number_of_edges(self) -> int:
        """How many edges the graph has."""
        return sum(len(adj) for adj in self.succ.values())

    def instance(self, node: int) -> Instance:
        """The instance with id `node`."""
        return self.instances[node]

    def loop_weight(self, lid: int, value: int) -> int:
        """How many iterations of loop `lid` the expanded iteration `value` stands for."""
        return self.loop_weights.get(lid, {}).get(value, 1)

    def extra_weight(self, inst: Instance, inside: Sequence[int]) -> int:
        """Real tasks `inst` stands for per instance of the loops `inside` (its own loops not in `inside`)."""
        w = 1
        for lid, it in zip(inst.loops, inst.iters):
            if lid not in inside:
                w *= self.loop_weight(lid, it)
        return w


NO_PROVENANCE: frozenset[Provenance] = frozenset()
_PROVENANCE_SETS: dict[tuple[frozenset[Provenance], Provenance], frozenset[Provenance]] = {}


def provenance_union(have: frozenset[Provenance], prov: Provenance) -> frozenset[Provenance]:
    """`have | {prov}`, one shared object per distinct set (an edge holds one of a handful)."""
    if prov in have and type(have) is frozenset:
        return have
    key = (frozenset(have), prov)
    out = _PROVENANCE_SETS.get(key)
    if out is None:
        out = _PROVENANCE_SETS[key] = frozenset(have) | {prov}
    return out


def boxes_overlap(a: Sequence[tuple[int, int]], ta: str, b: Sequence[tuple[int, int]], tb: str,
                  tensors: Mapping[str, ir.Tensor]) -> bool:
    """True when two boxes of one buffer share an element (exact). Per dimension when both names
    have one shape (a tensor, or a view of the same shape); else the flat bounding intervals
    first, then the boxes' contiguous runs. A box with an empty side (`x[2:2, :]`) touches no
    element and overlaps nothing."""
    if ta == tb or tensors[ta].shape == tensors[tb].shape:
        for (alo, ahi), (blo, bhi) in zip(a, b):  # noqa: SIM110  (hot path: no generator)
            if alo >= bhi or blo >= ahi or alo >= ahi or blo >= bhi:
                return False
        return True
    for lo, hi in (*a, *b):
        if lo >= hi:
            return False
    sa, sb = tensors[ta].shape, tensors[tb].shape
    fa, fb = flat(a, sa), flat(b, sb)
    if not (fa[0] < fb[1] and fb[0] < fa[1]):
        return False
    ra, rb = runs(a, sa), runs(b, sb)
    if ra is None or rb is None:
        return True  # too many runs to list: the bounding intervals meet, assume they overlap
    i = j = 0
    while i < len(ra) and j < len(rb):
        if ra[i][0] < rb[j][1] and rb[j][0] < ra[i][1]:
            return True
        if ra[i][1] <= rb[j][1]:
            i += 1
        else:
            j += 1
    return False


#: Most contiguous runs `runs` lists for an exact overlap test of two views of one buffer.
MAX_RUNS = 1 << 16


def runs(box: Sequence[tuple[int, int]], shape: tuple[int, ...]) -> list[tuple[int, int]] | None:
    """The sorted flat [start, end) runs of a non-empty box (None beyond MAX_RUNS)."""
    strides = [math.prod(shape[i + 1:]) for i in range(len(shape))]
    k = len(shape) - 1
    while k > 0 and tuple(box[k]) == (0, shape[k]):
        k -= 1  # trailing whole dimensions fuse into the run of dimension k
    count = math.prod(hi - lo for lo, hi in box[:k])
    if count > MAX_RUNS:
        return None
    width = (box[k][1] - box[k][0]) * strides[k]
    starts = [box[k][0] * strides[k]]
    for d in range(k):
        starts = [s + i * strides[d] for s in starts for i in range(box[d][0], box[d][1])]
    return sorted((s, s + width) for s in starts)


def tensormap_overlap(a: Box, ta: str, b: Box, tb: str, p: ir.Program) -> bool:
    """The runtime's overlap test (simpler check_overlap, docs/upstream.md §3.3): per
    dimension when both views have one layout (L2: same dtype, ndims and strides), else the flat
    intervals [start, start + extent) (L1), which may meet where no element is shared."""
    if ta == tb or p.tensors[ta].shape == p.tensors[tb].shape:
        return boxes_overlap(a, ta, b, tb, p.tensors)
    for lo, hi in (*a, *b):
        if lo >= hi:
            return False
    fa, fb = flat(a, p.tensors[ta].shape), flat(b, p.tensors[tb].shape)
    return fa[0] < fb[1] and fb[0] < fa[1]


def overlap(a: Box, ta: str, b: Box, tb: str, p: ir.Program) -> bool:
    """boxes_overlap with the program's tensor table (an exact test: races, slabs)."""
    return boxes_overlap(a, ta, b, tb, p.tensors)


def flat(box: Sequence[tuple[int, int]], shape: tuple[int, ...]) -> tuple[int, int]:
    """Flat element bounding interval of a box in a row-major tensor (the runtime's L1 test)."""
    strides = [math.prod(shape[i + 1:]) for i in range(len(shape))]
    lo = sum(b[0] * s for b, s in zip(box, strides))
    hi = sum((b[1] - 1) * s for b, s in zip(box, strides)) + 1
    return lo, hi


def covers(outer: Box, inner: Box) -> bool:
    """True when box `outer` contains box `inner` (same tensor coordinates)."""
    return all(o[0] <= i[0] and i[1] <= o[1] for o, i in zip(outer, inner))


def box_intersection(a: Box, b: Box) -> Box:
    """The common part of two boxes of one tensor (empty sides where they do not meet)."""
    return tuple((max(x[0], y[0]), min(x[1], y[1])) for x, y in zip(a, b))


def created_by(p: ir.Program, instances: Sequence[Instance], args: dict[int, list[ArgBox]]) -> dict[BufferKey, int]:
    """Each buffer instance of a `created` tensor -> the instance that creates it: the first, in
    submission order, passed it (its submit makes the buffer; plan/created.py checks that it
    writes the whole buffer and is its only creating writer)."""
    made: dict[BufferKey, int] = {}
    if not any(t.created for t in p.tensors.values()):
        return made
    for inst in instances:
        for arg in args.get(inst.id, []):
            if arg.buffer not in made and p.tensors[arg.buffer[0]].created:
                made[arg.buffer] = inst.id
    return made
