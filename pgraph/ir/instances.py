"""Instance graph data: submitted tasks, their argument boxes, and the box overlap test.

`InstanceGraph` is what the expander (pgraph.ir.expand) builds and every planner pass and
backend reads: instances in submission order, a networkx DiGraph of their edges, task-level
argument boxes and per-block accesses. The overlap test is the runtime's: per dimension for
one tensor, flat row-major intervals across views of one buffer (simpler's L1 test).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Mapping, Sequence

import attrs
import networkx as nx

from pgraph.ir import program as ir

Box = tuple[tuple[int, int], ...]
BufferKey = tuple[str, tuple[int, ...]]


@attrs.frozen
class Instance:
    """One submitted task (or alloc task): dispatch, loop iterations, task index, weight.

    `loops` are the ids of the loops `iters` belong to (the dispatch's loops; for an alloc
    task, the loops of its allocation group).
    """

    id: int
    dispatch: str
    kind: str
    iters: tuple[int, ...]
    index: tuple[int, ...]
    weight: int
    scope: int
    blocks: int
    label: str
    loops: tuple[int, ...]


@attrs.frozen
class ArgBox:
    """A task-level kernel argument: buffer, bounding box in the region tensor's coordinates."""

    param: ir.Param
    tensor: str
    buffer: BufferKey
    box: Box
    indirect: bool


class InstanceGraph:
    """Instances in submission order and the DiGraph of their edges."""

    def __init__(self, program: ir.Program, full: bool) -> None:
        self.program = program
        self.full = full
        self.instances: list[Instance] = []
        self.by_key: dict[tuple[str, tuple[int, ...], tuple[int, ...]], int] = {}
        self.graph: nx.DiGraph = nx.DiGraph()
        self.args: dict[int, list[ArgBox]] = {}
        self.blocks: dict[int, list[dict[str, list[tuple[str, BufferKey, Box, bool]]]]] = {}
        self.loop_weights: dict[int, dict[int, int]] = {}
        self.alloc_info: dict[int, tuple[int, tuple[int, ...], tuple[ir.Tensor, ...]]] = {}
        #: scope id -> the loops whose iterations make separate instances of that scope
        self.scope_loops: dict[int, tuple[int, ...]] = {}

    def add_edge(self, src: int, dst: int, prov: str, span: object = None) -> None:
        """Record one edge entry; repeated explicit/carried entries of a pair are duplicates."""
        counted = 1 if prov in ("explicit", "carried") else 0
        data = self.graph.get_edge_data(src, dst)
        if data is None:
            self.graph.add_edge(src, dst, prov={prov}, entries=counted, span=span)
        else:
            data["prov"].add(prov)
            data["entries"] += counted
            if data.get("span") is None:
                data["span"] = span

    def instance(self, node: int) -> Instance:
        """The instance with id `node`."""
        return self.instances[node]


def axis_values(axes: tuple[ir.IAxis, ...]) -> Iterator[tuple[int, ...]]:
    """Every index tuple of `axes`, row-major (empty ranges give none)."""
    return itertools.product(*(range(a.lo, a.hi) for a in axes))


def boxes_overlap(a: Sequence[tuple[int, int]], ta: str, b: Sequence[tuple[int, int]], tb: str,
                  tensors: Mapping[str, ir.Tensor]) -> bool:
    """Overlap of two boxes of one buffer: per dimension for one tensor name, else flat intervals
    (views of one buffer with other shapes are compared as the runtime's L1 test does)."""
    if ta == tb:
        return all(x[0] < y[1] and y[0] < x[1] for x, y in zip(a, b))
    fa, fb = flat(a, tensors[ta].shape), flat(b, tensors[tb].shape)
    return fa[0] < fb[1] and fb[0] < fa[1]


def overlap(a: Box, ta: str, b: Box, tb: str, p: ir.Program) -> bool:
    """boxes_overlap with the program's tensor table."""
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
