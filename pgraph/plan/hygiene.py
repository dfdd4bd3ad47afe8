"""Graph hygiene notes: duplicate dep entries folded into one edge."""

from __future__ import annotations

from collections import defaultdict

import attrs

from pgraph import records
from pgraph.diagnostics import Note
from pgraph.fastpath import reference_mode
from pgraph.kinds import PROVENANCE_FLAGS, AccessKind, CarryKind, Storage, TaskKind
from pgraph.plan.base import Fact, Pass, Plan, layer_share
from pgraph.plan.reach import Reach


@records.value
@attrs.frozen(repr=False, eq=False)
class DuplicateDeps(Fact):
    """Duplicate dep entries folded into existing edges, per layer."""

    per_layer: int


@records.value
@attrs.frozen(repr=False, eq=False)
class RedundantEdges(Fact):
    """Explicit edges of the reported instances that another path implies."""

    total: int


class DuplicateDepsPass(Pass):
    """PG016: a dep list whose entries name one producer task more than once (folded)."""

    name = "duplicate-deps"
    produces = (DuplicateDeps,)

    def run(self, plan: Plan) -> None:
        g = plan.graph
        per_dispatch: dict[str, int] = defaultdict(int)
        spans: dict[str, object] = {}
        for _u, v, data in g.edges():
            extra = data.entries - 1
            inst = g.instances[v]
            if extra <= 0 or not (plan.in_layer(inst) or plan.layer_loop is None or not inst.iters):
                continue
            per_dispatch[inst.dispatch] += extra * layer_share(plan, inst)
            spans.setdefault(inst.dispatch, data.span)
        total = sum(per_dispatch.values())
        for name in sorted(per_dispatch, key=lambda n: plan.program.dispatch(n).order):
            d = plan.program.dispatch(name)
            scope = "per layer" if d.loops else "in the entry"
            plan.bag.add(
                "PG016",
                f"{per_dispatch[name]} duplicate dep entr{'y' if per_dispatch[name] == 1 else 'ies'} of '{name}' "
                f"{'folds' if per_dispatch[name] == 1 else 'fold'} into existing edges ({scope})",
                spans[name],  # type: ignore[arg-type]
                [Note(f"{total} duplicate entries fold away per layer in this program")] if d.loops else [],
                hint="harmless: several selected tiles map to one task (e.g. every tile of an SPMD wave)",
            )
        plan.put(DuplicateDeps(total))


@records.value
@attrs.frozen(repr=False, eq=False)
class ExplicitEdges(Fact):
    """The explicit and carried edges (u, v), in `InstanceGraph.edges` order (shared by the
    redundant-edge and funnel passes: a --full prefill has 1.5 million edges to classify)."""

    edges: list[tuple[int, int]]


def _explicit_edges(plan: Plan) -> list[tuple[int, int]]:
    if plan.has(ExplicitEdges):
        return plan.get(ExplicitEdges).edges
    out = [(u, v) for u, adj in plan.graph.succ.items() for v, data in adj.items()
           if PROVENANCE_FLAGS[data.prov][0]]
    plan.put(ExplicitEdges(out))
    return out


def _reported(plan: Plan, node: int) -> bool:
    return plan.reported(plan.graph.instances[node])


class RedundantEdgePass(Pass):
    """PG115: an explicit/carried edge u -> v implied by another path u -> w -> ... -> v."""

    name = "redundant-edges"
    requires = (Reach,)
    produces = (RedundantEdges,)

    def run(self, plan: Plan) -> None:
        reach = plan.get(Reach)
        g = plan.graph
        groups: dict[tuple[str, str], list[tuple[int, int]]] = defaultdict(list)
        implied: dict[int, set[int]] = {}
        reported: dict[int, bool] = {}
        for u, v in _explicit_edges(plan):
            ok = reported.get(v)
            if ok is None:
                ok = reported[v] = _reported(plan, v)
            if not ok:
                continue
            if v not in implied:
                implied[v] = reach.implied_predecessors(v)
            if u in implied[v]:
                groups[(g.instances[u].dispatch, g.instances[v].dispatch)].append((u, v))
        total = 0
        p = plan.program
        for (du, dv), pairs in sorted(groups.items(), key=lambda kv: (p.dispatch(kv[0][1]).order, kv[0][0])):
            # one real edge per real consumer a window copy stands for (its predecessor's copy to it)
            total += sum(layer_share(plan, g.instances[v]) for _, v in pairs)
            u, v = pairs[0]
            span = g.succ[u][v].span
            plan.bag.add("PG115", f"{len(pairs)} edge(s) {du} -> {dv} are implied by other paths "
                         f"(e.g. {g.instances[u].label} -> {g.instances[v].label})", span,
                         hint="harmless for ordering; dropping it saves a fanout entry and a dep-array slot")
        plan.put(RedundantEdges(total))


class FunnelPass(Pass):
    """PG116: one producer fans out to many consumers that all already wait on a common node.

    Route the producer into that node instead: n edges become 1 and ordering is kept
    transitively (the #682 seeds: 305 edges -> 4).

    Only a common predecessor x submitted after the producer u is a fix (x < u would route
    backwards; and x > u never precedes u, ids being a topological order), so the candidates
    are the later predecessors of the consumer with the fewest predecessors, taken in id
    order, each tested against the other consumers' predecessor dicts until one misses it:
    the first candidate that all consumers share is the answer. A producer whose consumers
    share nothing later than it (an attention tile's KV cache rows: every later query tile
    waits on them, each on its own rows besides) costs one scan of that consumer's list,
    not an intersection of every consumer's (~R^3 over a prefill's R row tiles). Under
    PGRAPH_REFERENCE=1 the reference answers: that intersection, then its first later member.
    """

    name = "funnel"
    requires = (Reach,)
    threshold = 8

    def run(self, plan: Plan) -> None:
        g = plan.graph
        out_edges: dict[int, list[int]] = defaultdict(list)
        for u, v in _explicit_edges(plan):
            out_edges[u].append(v)
        p = plan.program
        seen: set[tuple[str, str]] = set()
        for u, consumers in sorted(out_edges.items()):
            if len(consumers) < self.threshold or not _reported(plan, u):
                continue
            x = (_common_later_reference(plan, u, consumers) if reference_mode("funnel-latest")
                 else self._first_common_later(plan, u, consumers))
            if x is None:
                continue
            key = (g.instances[u].dispatch, g.instances[x].dispatch)
            if key in seen:
                continue
            seen.add(key)
            d = p.dispatch(g.instances[u].dispatch)
            plan.bag.add("PG116", f"'{g.instances[u].label}' has {len(consumers)} consumers that all already "
                         f"wait on '{g.instances[x].label}'", d.span,
                         hint=f"make '{g.instances[x].dispatch}' depend on '{d.name}' and drop the "
                              f"{len(consumers)} direct edges: ordering is kept transitively")

    @staticmethod
    def _first_common_later(plan: Plan, u: int, consumers: list[int]) -> int | None:
        """The lowest id x > u, not an alloc task nor a task of u's declaration, that precedes
        every consumer directly; None when there is none."""
        g = plan.graph
        pred = g.pred
        insts = g.instances
        p = plan.program
        tileset = p.dispatch(insts[u].dispatch).tileset
        first = min(consumers, key=lambda v: len(pred[v]))
        others = [pred[v] for v in consumers if v != first]
        for x in sorted(w for w in pred[first] if w > u):
            if insts[x].kind is TaskKind.ALLOC or not all(x in ps for ps in others):
                continue
            if p.dispatch(insts[x].dispatch).tileset == tileset:
                continue  # another task of the same declaration: a dep on itself is no fix
            return x
        return None


def _common_later_reference(plan: Plan, u: int, consumers: list[int]) -> int | None:
    """`FunnelPass._first_common_later` by its definition: the predecessors every consumer
    shares (alloc tasks and u left out), the lowest that is later than u, does not precede it
    and is of another declaration."""
    g = plan.graph
    p = plan.program
    reach = plan.get(Reach)
    common: set[int] | None = None
    for v in consumers:
        preds = {w for w in g.pred[v] if w != u and g.instances[w].kind is not TaskKind.ALLOC}
        common = preds if common is None else common & preds
    for x in sorted(common or ()):
        if x < u or reach.before(x, u):
            continue
        if p.dispatch(g.instances[x].dispatch).tileset != p.dispatch(g.instances[u].dispatch).tileset:
            return x
    return None


class DeadTaskPass(Pass):
    """PG117: a compute task none of whose written buffers is read later (externals count as read)."""

    name = "dead-tasks"

    def run(self, plan: Plan) -> None:
        g = plan.graph
        p = plan.program
        #: buffer key -> the one task reading it, or -1 when two or more do
        reader: dict[tuple[str, tuple[int, ...]], int] = {}
        writes: dict[int, set[tuple[str, tuple[int, ...]]]] = defaultdict(set)
        lo = [lp.axis.lo for lp in p.loops]
        reads = (AccessKind.READ, AccessKind.ATOMIC)
        for node, blocks in g.blocks.items():
            inst = g.instances[node]
            # later iterations' readers may not be expanded: only first-iteration writers are judged
            judged = all(it == lo[lid] for lid, it in zip(inst.loops, inst.iters))
            for block in blocks:
                for kind, items in block.items():
                    if kind in reads:
                        for item in items:
                            key = item[1]
                            other = reader.get(key)
                            if other is None:
                                reader[key] = node
                            elif other != node:
                                reader[key] = -1
                    if judged and items and kind is not AccessKind.READ:
                        writes[node].update(item[1] for item in items)
        dead: dict[str, set[str]] = {}
        for node, keys in writes.items():
            inst = g.instances[node]
            live = False
            for key in keys:
                if p.tensors[key[0]].storage is Storage.EXTERNAL or reader.get(key, node) != node:
                    live = True
                    break
            if not live:
                dead.setdefault(inst.dispatch, set()).update(k[0] for k in keys)
        for name in sorted(dead, key=lambda n: p.dispatch(n).order):
            plan.bag.add("PG117", f"'{name}' writes only {', '.join(sorted(dead[name]))}, which nothing reads afterwards",
                         p.dispatch(name).span, hint="drop the task, or read its output")


class UnusedTensorPass(Pass):
    """PG118: a declared tensor no task accesses (and no view or indirect region uses)."""

    name = "unused-tensors"

    def run(self, plan: Plan) -> None:
        p = plan.program
        used: set[str] = set()
        for d in p.dispatches:
            for acc in d.accesses:
                used.add(acc.region.tensor)
                used.update(acc.region.indirect or ())
            for a in d.args:
                if a.region is not None:
                    used.add(a.region.tensor)
                    used.update(a.region.indirect or ())
        for c in p.carries.values():
            if c.kind is CarryKind.TENSOR and c.name in used:
                used.update((c.init, c.next))
        for t in list(p.tensors.values()):
            if t.base and t.name in used:
                used.add(t.base)
        for t in sorted(p.tensors.values(), key=lambda t: (t.span.filename, t.span.line)):
            if t.name not in used:
                plan.bag.add("PG118", f"tensor '{t.name}' is declared but never accessed", t.span,
                             hint="remove it, or pass it to the kernel that should use it")
