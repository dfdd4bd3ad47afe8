"""The builder of the instance graph: instances and edges accumulate, then freeze once.

`GraphBuilder` takes the instances in submission order (each gets the next provisional id),
their argument boxes and per-block accesses, and the edges between them; `freeze` makes the
`InstanceGraph` every planner pass and backend reads, once. Edges are `Edge` records: a
repeated entry between one producer and one consumer folds into the existing record (its
provenances merged, a declared entry counted, the first declaring span kept), and
`fan_in` adds the producers of one dep of one consumer at once (the expander's hot path).
A dep-carrying dummy none of whose deps reached a task is never submitted by the generated
code (`drop_unsubmitted_dummies`); `freeze` leaves it out and numbers the rest in order.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from pgraph.ir import program as ir
from pgraph.ir.instances import (
    NO_PROVENANCE,
    ArgBox,
    BlockAccesses,
    Edge,
    Instance,
    InstanceGraph,
    Issue,
    provenance_union,
)
from pgraph.ir.limits import drops_empty_dummies
from pgraph.kinds import DECLARED, Provenance, TaskKind
from pgraph.source import Span

_new_edge = tuple.__new__  # Edge(...) without NamedTuple's keyword handling (the hot path)

#: (allocation scope, group, loops, iterations) -> the alloc instance that makes those buffers
AllocSites = dict[tuple[int, int, tuple[int, ...], tuple[int, ...]], int]


class GraphBuilder:
    """Instances and edges of one expansion, in submission order, until `freeze`.

    Ids are positions in `instances`; every edge's ends are instances already. The builder is
    the only writer of the graph's edges: `add_edge` and `fan_in` fold repeated entries.
    """

    def __init__(self, program: ir.Program, full: bool) -> None:
        self.program = program
        self.full = full
        self.instances: list[Instance] = []
        self.by_key: dict[tuple[str, tuple[int, ...], tuple[int, ...]], int] = {}
        self.succ: dict[int, dict[int, Edge]] = {}
        self.pred: dict[int, dict[int, Edge]] = {}
        self.args: dict[int, list[ArgBox]] = {}
        self.blocks: dict[int, list[BlockAccesses]] = {}
        self.alloc_info: dict[int, tuple[int, tuple[int, ...], tuple[ir.Tensor, ...]]] = {}
        self.alloc_of: AllocSites = {}
        self.gone: set[int] = set()
        #: the empty-deps dummies among `gone` (an old compiler's drop, pgraph.ir.limits.drops_empty_dummies)
        self.empty: set[int] = set()

    # ---- instances ----
    def add_task(self, d: ir.Dispatch, iters: tuple[int, ...], index: tuple[int, ...], weight: int,
                 label: str) -> int:
        """Add one task instance of `d` (loop iterations `iters`, task index `index`); its id."""
        node = len(self.instances)
        self.instances.append(Instance(node, d.name, d.kind, iters, index, weight, d.scope, d.block_count, label,
                                       d.loops))
        self.by_key[(d.name, iters, index)] = node
        self.succ[node] = {}
        self.pred[node] = {}
        return node

    def add_alloc(self, key: ir.AllocKey, tensors: tuple[ir.Tensor, ...], values: tuple[int, ...], weight: int,
                  calls: int, label: str) -> int:
        """Add the alloc instance of allocation group `key` at loop iterations `values` (`calls`
        `alloc_tensors` calls for `tensors`); its id."""
        sid, group, loops = key
        node = len(self.instances)
        self.instances.append(Instance(node, f"alloc@scope{group}", TaskKind.ALLOC, values, (), weight, sid, calls,
                                       label, loops))
        self.alloc_info[node] = (sid, loops, tensors)
        self.succ[node] = {}
        self.pred[node] = {}
        self.alloc_of[(sid, group, loops, values)] = node
        return node

    def set_accesses(self, node: int, args: list[ArgBox], blocks: list[BlockAccesses] | None) -> None:
        """The argument boxes of task `node` and, when evaluated, its per-block accesses."""
        self.args[node] = args
        if blocks is not None:
            self.blocks[node] = blocks

    # ---- edges ----
    def add_edge(self, src: int, dst: int, prov: Provenance, span: Span | None = None) -> None:
        """One edge entry from `src` to `dst`: a new edge, or folded into the existing one
        (provenances merged; a declared entry counted; the first declaring span kept)."""
        data = self.succ[src].get(dst)
        if data is None:
            data = _new_edge(Edge, (provenance_union(NO_PROVENANCE, prov), 1 if prov in DECLARED else 0, span))
        else:
            have, entries, first = data
            data = _new_edge(Edge, (provenance_union(have, prov), entries + (1 if prov in DECLARED else 0),
                                    span if first is None else first))
        self.succ[src][dst] = data
        self.pred[dst][src] = data

    def fan_in(self, producers: Iterable[int], dst: int, prov: Provenance, span: Span | None) -> None:
        """One entry from each of `producers` (in order, repeats folding) into consumer `dst`."""
        mine, succ = self.pred[dst], self.succ
        new = _new_edge(Edge, (provenance_union(NO_PROVENANCE, prov), 1 if prov in DECLARED else 0, span))
        for node in producers:
            if node in mine:
                self.add_edge(node, dst, prov, span)
            else:  # a new edge: `add_edge` inlined
                succ[node][dst] = new
                mine[node] = new

    # ---- unsubmitted dummies ----
    def drop_unsubmitted_dummies(self) -> None:
        """Leave out every dep-carrying dummy none of whose deps reached a task: the generated
        code submits it only when some dep id is valid (pypto EmitDummyTask: `if (deps_count >
        0)`), so it is never submitted and its id stays invalid, which its consumers skip. In
        submission order, so a dummy fed only by dropped dummies goes too. A compiler before
        pypto #1987 (`pypto_pr` in the target table) drops every empty-deps dummy as well
        (`self.empty`). Called once the declared deps are in; later edges never touch a dummy."""
        p, gone, empty = self.program, self.gone, self.empty
        old = drops_empty_dummies(p.target)
        for inst in self.instances:
            if inst.kind is not TaskKind.DUMMY:
                continue
            if not p.dispatch(inst.dispatch).deps:
                if old:
                    empty.add(inst.id)
                    gone.add(inst.id)
                continue
            if not any(u not in gone for u in self.pred[inst.id]):
                gone.add(inst.id)

    # ---- the frozen graph ----
    def freeze(self, *, loop_weights: dict[int, dict[int, int]], windowed: frozenset[int],
               scope_loops: dict[int, tuple[int, ...]], issues: list[Issue]) -> InstanceGraph:
        """The InstanceGraph of what was added, without the dropped dummies (the others numbered
        in submission order, their edges kept in insertion order). The builder is spent."""
        gone = self.gone
        instances, by_key, succ, pred = self.instances, self.by_key, self.succ, self.pred
        args, blocks, alloc_info = self.args, self.blocks, self.alloc_info
        ungated: dict[tuple[str, str], list[int]] = {}
        if gone:
            keep = [inst for inst in instances if inst.id not in gone]
            new_id = {inst.id: i for i, inst in enumerate(keep)}
            instances = [inst if inst.id == new_id[inst.id] else attrs.evolve(inst, id=new_id[inst.id])
                         for inst in keep]
            by_key = {k: new_id[v] for k, v in by_key.items() if v in new_id}
            succ = {new_id[u]: {new_id[v]: d for v, d in adj.items() if v in new_id}
                    for u, adj in succ.items() if u in new_id}
            pred = {new_id[v]: {new_id[u]: d for u, d in adj.items() if u in new_id}
                    for v, adj in pred.items() if v in new_id}
            args = {new_id[k]: v for k, v in args.items() if k in new_id}
            blocks = {new_id[k]: v for k, v in blocks.items() if k in new_id}
            alloc_info = {new_id[k]: v for k, v in alloc_info.items()}
            ungated = {(self.instances[i].dispatch, self.instances[i].label):
                       [new_id[v] for v in sorted(self.succ[i]) if v not in gone] for i in sorted(gone)}
        return InstanceGraph(self.program, self.full, instances=instances, by_key=by_key, succ=succ, pred=pred,
                             args=args, blocks=blocks, loop_weights=loop_weights, alloc_info=alloc_info,
                             scope_loops=scope_loops, windowed=windowed, issues=issues,
                             dropped=[(self.instances[i].dispatch, self.instances[i].label)
                                      for i in sorted(gone - self.empty)],
                             dropped_empty=[(self.instances[i].dispatch, self.instances[i].label)
                                            for i in sorted(self.empty)],
                             ungated=ungated)
