"""Run-time race detector: shadow state per buffer, happens-before by instance-graph reachability.

As the executor runs each block it reports the block's declared accesses. Per buffer the
shadow state keeps the accesses not yet superseded (the last writers, the atomic adds and the
readers since). A new access checks every earlier overlapping access it conflicts with
(read/write, write/write, atomic/read, atomic/write; read/read and atomic/atomic commute)
and requires the earlier task to be an ancestor of the new one in the graph being executed.
Blocks of one SPMD task run concurrently, so two blocks of one task conflict too, except
inside a sync_start grid (one unit with an internal barrier) and on indirect regions (the
declared box is a may-touch bound; the rows the blocks write are disjoint by construction).
A write that covers earlier entries of the same tensor retires them (they are reported first).
"""

from __future__ import annotations

import math

import attrs
import networkx as nx

from pgraph import records
from pgraph.ir.instances import BlockAccess, BlockAccesses, Box, BufferKey, InstanceGraph, covers
from pgraph.ir.program import Program
from pgraph.kinds import AccessKind

Access = BlockAccess

@records.value
@attrs.frozen(repr=False, eq=False)
class RaceReport:
    """Two unordered conflicting accesses: `first` was submitted before `second`."""

    first: int
    second: int
    first_block: int | None
    second_block: int | None
    first_kind: str
    second_kind: str
    tensor: str
    buffer: BufferKey
    overlap: Box

    def render(self, graph: InstanceGraph) -> str:
        """Multi-line text: both tasks, tensor, overlapping box, the missing edge, spans."""
        p = graph.program
        a, b = graph.instances[self.first], graph.instances[self.second]
        da, db = p.dispatch(a.dispatch), p.dispatch(b.dispatch)
        region = ", ".join(f"{lo}:{hi}" for lo, hi in self.overlap)
        where = "" if not self.buffer[1] else f" (buffer of iteration {','.join(map(str, self.buffer[1]))})"
        lines = [
            f"race: {a.label}{_blk(self.first_block)} {self.first_kind}s and {b.label}{_blk(self.second_block)} "
            f"{self.second_kind}s {self.tensor}[{region}]{where} with no path between them",
        ]
        if self.first == self.second:
            lines.append("  two blocks of one SPMD task overlap; split the regions or make the writes atomic")
        else:
            lines.append(f"  missing edge: {a.label} -> {b.label} (add `deps({a.dispatch})` to '{b.dispatch}')")
        lines.append(f"  {da.span.location()}: note: '{a.dispatch}' declared here")
        if db is not da:
            lines.append(f"  {db.span.location()}: note: '{b.dispatch}' declared here")
        return "\n".join(lines)


def _blk(block: int | None) -> str:
    return "" if block is None else f" block {block}"


class RaceFound(Exception):
    """Raised by a detector built with `stop_at_first` on its first report."""

    def __init__(self, report: RaceReport) -> None:
        super().__init__("race")
        self.report = report


def ancestor_sets(graph: nx.DiGraph, count: int) -> list[int]:
    """Bitset of strict ancestors of every node 0..count-1 (int bit u set: u reaches the node)."""
    order = list(nx.topological_sort(graph))
    anc = [0] * count
    for v in order:
        acc = 0
        for u in graph.predecessors(v):
            acc |= anc[u] | (1 << u)
        anc[v] = acc
    return anc


def _overlap_box(a: Box, b: Box) -> Box | None:
    out = []
    for (alo, ahi), (blo, bhi) in zip(a, b, strict=False):
        lo, hi = max(alo, blo), min(ahi, bhi)
        if lo >= hi:
            return None
        out.append((lo, hi))
    return tuple(out)


def _flat(box: Box, shape: tuple[int, ...]) -> tuple[int, int]:
    # Deliberately not pgraph.ir.instances.flat: the cross-view overlap is the rule the
    # mutation test compares with the planner's race rule, so each side has its own.
    strides = [math.prod(shape[i + 1:]) for i in range(len(shape))]
    return (sum(lo * s for (lo, _), s in zip(box, strides, strict=False)),
            sum((hi - 1) * s for (_, hi), s in zip(box, strides, strict=False)) + 1)


# shadow entry: (node, block, tensor, box, indirect)
_Entry = tuple[int, "int | None", str, Box, bool]

#: which earlier access kinds a new access of each kind must be ordered after
_CHECK = {"read": ("write", "atomic"), "atomic": ("read", "write"), "write": ("read", "write", "atomic")}


def _hit(a: Box, b: Box) -> bool:
    for (alo, ahi), (blo, bhi) in zip(a, b, strict=False):  # noqa: SIM110  (hot path: no generator)
        if alo >= bhi or blo >= ahi:
            return False
    return True


class RaceDetector:
    """Shadow state of one execution. `check_block` raises RaceFound when `stop_at_first`."""

    def __init__(self, ig: InstanceGraph, graph: nx.DiGraph | None = None, stop_at_first: bool = False) -> None:
        self.program: Program = ig.program
        self.anc = ancestor_sets(graph if graph is not None else ig.graph, len(ig.instances))
        self.stop_at_first = stop_at_first
        self.state: dict[BufferKey, dict[str, list[_Entry]]] = {}
        self.reports: list[RaceReport] = []
        self._seen: set[tuple[int, int, BufferKey]] = set()

    def _overlap(self, etensor: str, ebox: Box, tensor: str, box: Box) -> Box | None:
        if etensor == tensor:
            return _overlap_box(ebox, box)
        a = _flat(ebox, self.program.tensors[etensor].shape)
        b = _flat(box, self.program.tensors[tensor].shape)
        lo, hi = max(a[0], b[0]), min(a[1], b[1])
        return None if lo >= hi else ((lo, hi),)

    def check_block(self, node: int, block: int | None, accesses: BlockAccesses, sync_start: bool) -> None:
        """Check and record one block's declared accesses (kinds 'read', 'write', 'atomic')."""
        for kind in (AccessKind.READ, AccessKind.ATOMIC, AccessKind.WRITE):
            for tensor, key, box, indirect in accesses.get(kind, []):
                self._access(node, block, kind, tensor, key, box, indirect, sync_start)

    def _access(self, node: int, block: int | None, kind: str, tensor: str, key: BufferKey, box: Box,
                indirect: bool, sync_start: bool) -> None:
        if any(hi <= lo for lo, hi in box):
            return
        state = self.state.get(key)
        if state is None:
            state = self.state[key] = {"read": [], "write": [], "atomic": []}
        anc = self.anc[node]
        for ekind in _CHECK[kind]:
            for e in state[ekind]:
                enode, eblock, etensor, ebox, eind = e
                if enode == node:
                    if eblock == block or sync_start or eind or indirect:
                        continue
                elif (anc >> enode) & 1 or (self.anc[enode] >> node) & 1:
                    continue
                if etensor == tensor and not _hit(ebox, box):
                    continue
                ov = self._overlap(etensor, ebox, tensor, box)
                if ov is not None:
                    self._report(e, ekind, node, block, kind, tensor, key, ov)
        if kind == "write":
            for ekind in ("read", "write", "atomic"):
                lst = state[ekind]
                if lst:
                    state[ekind] = [e for e in lst
                                    if not (e[2] == tensor and (e[0], e[1]) != (node, block) and covers(box, e[3]))]
        state[kind].append((node, block, tensor, box, indirect))

    def _report(self, e: _Entry, ekind: str, node: int, block: int | None, kind: str, tensor: str, key: BufferKey,
                ov: Box) -> None:
        enode, eblock = e[0], e[1]
        if enode <= node:
            rep = RaceReport(enode, node, eblock, block, ekind, kind, tensor, key, ov)
        else:
            rep = RaceReport(node, enode, block, eblock, kind, ekind, tensor, key, ov)
        sig = (rep.first, rep.second, key)
        if sig in self._seen:
            return
        self._seen.add(sig)
        self.reports.append(rep)
        if self.stop_at_first:
            raise RaceFound(rep)
