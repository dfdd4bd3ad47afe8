"""Early-dispatch eligibility by the runtime's rule (PG105, PG106) and the dummy-effect rule (PG104).

simpler (`wire_fanin_task`, `propagate_dispatch_fanin`): a consumer with at least one
producer becomes an early-dispatch candidate iff every direct WAIT producer (explicit,
carried, inferred) is flagged `allow_early_resolve` (alloc tasks always are; pypto never
flags dummies), and its shape is AIC, AIV or MIX. One unflagged producer disqualifies it
for good. At run time each flagged producer must also be fully published
(published_block_count == logical_block_num) before it counts.
"""

from __future__ import annotations

import enum
from collections import defaultdict
from typing import Any

import attrs

from pgraph import records
from pgraph.diagnostics import Edit, Fix, Note, Severity
from pgraph.ir.instances import Instance
from pgraph.kinds import PROVENANCE_FLAGS, WAIT, Flag, TaskKind
from pgraph.plan.base import Fact, Pass, Plan, layer_share


class EarlyState(enum.StrEnum):
    """What the runtime's early-dispatch rule makes of one task (simpler wire_fanin_task)."""

    DUMMY = "dummy"            # never a candidate
    READY = "ready"            # no producer: ready at submit
    CANDIDATE = "candidate"    # every direct WAIT producer flagged: may be staged early
    INELIGIBLE = "ineligible"  # an unflagged producer: never staged early
    MIXED = "mixed"            # (table rows only) instances of one dispatch differ


@records.value
@attrs.frozen(repr=False, eq=False)
class EarlyStatus(Fact):
    """Per instance (alloc tasks excluded): its EarlyState and the unflagged producers blocking it
    (`classify`); per instance id (alloc tasks included): whether it carries allow_early_resolve
    (`flagged`: alloc tasks always, dummies never, a task when its dispatch is flagged `early`)."""

    status: dict[int, tuple[EarlyState, list[int]]]
    flagged: list[bool]


@records.value
@attrs.frozen(repr=False, eq=False)
class EarlyTable(Fact):
    """The early-dispatch table of the report (one row per dispatch of a layer and the entry)."""

    rows: list[dict[str, Any]]
    open_point: str

OPEN_POINT = ("the reference doc's wording 'flagged or already complete' is not what the runtime code does: a "
              "completed but unflagged producer still disqualifies the consumer (wire_fanin_task seeds "
              "dispatch_fanin only if every WAIT producer is flagged); reported by the code, unverified on device")


def producers(plan: Plan, node: int) -> list[int]:
    """Direct WAIT producers of `node` that are real tasks (alloc tasks excluded)."""
    g = plan.graph
    instances = g.instances
    return sorted(u for u, data in g.pred[node].items()
                  if not data.prov.isdisjoint(WAIT) and instances[u].kind is not TaskKind.ALLOC)


def flagged(plan: Plan, inst: Instance) -> bool:
    """True when `inst` carries allow_early_resolve (alloc tasks always; dummies never)."""
    if inst.kind is TaskKind.ALLOC:
        return True
    if inst.kind is TaskKind.DUMMY:
        return False
    return plan.program.dispatch(inst.dispatch).early


def classify(plan: Plan, node: int, ignore: int | None = None) -> tuple[EarlyState, list[int]]:
    """(state, blocking producers) of one instance; `ignore` leaves one producer out (PG104)."""
    inst = plan.graph.instances[node]
    if inst.kind is TaskKind.DUMMY:
        return EarlyState.DUMMY, []
    prods = [u for u in producers(plan, node) if u != ignore]
    if not prods:
        return EarlyState.READY, []
    blocking = [u for u in prods if not flagged(plan, plan.graph.instances[u])]
    return (EarlyState.INELIGIBLE, blocking) if blocking else (EarlyState.CANDIDATE, [])


def _scope_of_report(plan: Plan, inst: Instance) -> bool:
    """Instances the table shows: the representative layer, plus everything outside loops."""
    return plan.reported(inst)


class EarlyDispatchPass(Pass):
    """Produces EarlyStatus and EarlyTable; PG105 for consumers blocked by one producer, PG106 for idle flags."""

    name = "early-dispatch"
    produces = (EarlyStatus, EarlyTable)

    def run(self, plan: Plan) -> None:
        g = plan.graph
        status, flags = self.all_states(plan)
        plan.put(EarlyStatus(status, flags))
        table: dict[str, dict[str, Any]] = {}
        for inst in g.instances:
            if inst.kind is TaskKind.ALLOC or not _scope_of_report(plan, inst):
                continue
            state, blocking = status[inst.id]
            row = table.get(inst.dispatch)
            if row is None:
                row = table[inst.dispatch] = {"dispatch": inst.dispatch, "states": defaultdict(int),
                                              "blocked_by": set(), "early": flagged(plan, inst),
                                              "order": plan.program.dispatch(inst.dispatch).order}
            row["states"][state] += layer_share(plan, inst)  # the real tasks a window copy stands for
            for u in blocking:
                row["blocked_by"].add(g.instances[u].dispatch)
        rows = []
        for row in sorted(table.values(), key=lambda r: r["order"]):
            states = dict(sorted(row["states"].items()))
            state = next(iter(states)) if len(states) == 1 else EarlyState.MIXED
            rows.append({"dispatch": row["dispatch"], "early_flag": row["early"], "state": state,
                         "instances": states, "blocked_by": sorted(row["blocked_by"])})
        plan.put(EarlyTable(rows, OPEN_POINT))
        self.blocked_notes(plan, status)
        self.idle_flags(plan, status)

    @staticmethod
    def all_states(plan: Plan) -> tuple[dict[int, tuple[EarlyState, list[int]]], list[bool]]:
        """`classify` of every instance (alloc tasks excluded) and `flagged` of every instance id,
        with the flags looked up once per dispatch."""
        g = plan.graph
        instances = g.instances
        early = {d.name: d.early for d in plan.program.dispatches}
        unflagged = [inst.kind is TaskKind.DUMMY or (inst.kind is not TaskKind.ALLOC and not early[inst.dispatch])
                     for inst in instances]
        status: dict[int, tuple[EarlyState, list[int]]] = {}
        alloc = [inst.kind is TaskKind.ALLOC for inst in instances]
        for inst in instances:
            if inst.kind is TaskKind.ALLOC:
                continue
            if inst.kind is TaskKind.DUMMY:
                status[inst.id] = (EarlyState.DUMMY, [])
                continue
            prods = []
            for u, data in g.pred[inst.id].items():
                if PROVENANCE_FLAGS[data.prov][1] and not alloc[u]:
                    prods.append(u)
            prods.sort()
            if not prods:
                status[inst.id] = (EarlyState.READY, [])
                continue
            blocking = [u for u in prods if unflagged[u]]
            status[inst.id] = (EarlyState.INELIGIBLE, blocking) if blocking else (EarlyState.CANDIDATE, [])
        return status, [not u for u in unflagged]

    def blocked_notes(self, plan: Plan, status: dict[int, tuple[EarlyState, list[int]]]) -> None:
        """PG105 per producer declaration (a tile set: all waves of `out_proj` are one producer)."""
        g = plan.graph
        p = plan.program
        by_producer: dict[str, set[str]] = defaultdict(set)
        for node, (state, blocking) in status.items():
            inst = g.instances[node]
            if state is not EarlyState.INELIGIBLE or not _scope_of_report(plan, inst):
                continue
            names = {p.dispatch(g.instances[u].dispatch).tileset for u in blocking}
            if len(names) == 1 and not self.evict_dummy(plan, next(iter(names))):
                by_producer[names.pop()].add(inst.dispatch)
        for prod in sorted(by_producer, key=lambda n: p.tilesets[n].span.line):
            ts = p.tilesets[prod]
            consumers = sorted(by_producer[prod], key=lambda n: p.dispatch(n).order)
            dummy = ts.kind is TaskKind.DUMMY
            why = f"dummy '{prod}' is never flagged" if dummy else f"'{prod}' is not flagged `early`"
            plan.bag.add("PG105", f"{why}: {', '.join(consumers)} cannot be dispatched early", ts.span,
                         hint=(f"flag '{prod}' `early` if its consumers should take the early window"
                               if not dummy else "intended when this dummy evicts them from the early window"))

    @staticmethod
    def evict_dummy(plan: Plan, tileset: str) -> bool:
        """An empty-deps dummy: PG104 already reports what it does to early dispatch."""
        ts = plan.program.tilesets[tileset]
        return ts.kind is TaskKind.DUMMY and not plan.program.dispatch(ts.dispatches[0]).deps

    def idle_flags(self, plan: Plan, status: dict[int, tuple[EarlyState, list[int]]]) -> None:
        g = plan.graph
        p = plan.program
        consumers: dict[str, set[str]] = defaultdict(set)
        useful: set[str] = set()
        instances = g.instances
        for u, adj in g.succ.items():
            iu = instances[u]
            if iu.kind in (TaskKind.ALLOC, TaskKind.DUMMY):
                continue
            targets = consumers[iu.dispatch]
            for v, data in adj.items():
                if not PROVENANCE_FLAGS[data.prov][1]:
                    continue
                targets.add(instances[v].dispatch)
                got = status.get(v)
                if got is not None and got[0] is EarlyState.CANDIDATE:
                    useful.add(iu.dispatch)
        for d in p.dispatches:
            if not d.early or d.kind is TaskKind.DUMMY or d.name in useful:
                continue
            cons = sorted(consumers.get(d.name, set()), key=lambda n: p.dispatch(n).order)
            text = f"its consumers ({', '.join(cons)}) are ineligible anyway" if cons else "nothing waits on it"
            plan.bag.add("PG106", f"the `early` flag on '{d.name}' has no effect: {text}", d.span,
                         hint="flag-free producers do no harm; find the unflagged producer that blocks the consumers "
                              "(see PG105) if early dispatch was the intent")


class DummyEffectPass(Pass):
    """PG104, one rule with a severity table:

    - error: a dummy carries `early` (pypto's task_dummy accepts only deps=);
    - note: an empty-deps dummy whose only effect is to make consumers ineligible (evict idiom);
    - warning: an empty-deps dummy whose consumers would be ineligible anyway, or that nothing waits on;
    - warning: a dummy whose deps all resolve to nothing (the generated code drops it).
    """

    name = "dummy-effect"
    requires = (EarlyStatus,)

    def run(self, plan: Plan) -> None:
        p = plan.program
        g = plan.graph
        by_dispatch: dict[str, list[Instance]] = defaultdict(list)
        for inst in g.instances:
            if inst.kind is TaskKind.DUMMY and (_scope_of_report(plan, inst)):
                by_dispatch[inst.dispatch].append(inst)
        dropped: dict[str, list[str]] = defaultdict(list)
        idle_dropped = dict.fromkeys(n for n, lb in g.dropped_empty if not g.ungated.get((n, lb)))
        for name in idle_dropped:  # PG123 reports the ones something waited on
            plan.bag.add("PG104", f"dummy '{name}' has no deps and nothing waits on it; the target's compiler "
                         "(before pypto #1987) does not even submit it", p.dispatch(name).span,
                         severity=Severity.WARNING,
                         hint="drop it; when it is the placeholder value of a TaskId slot, say so with "
                              "`allow(PG104, \"reason\")` on the line above it")
        for name, label in g.dropped:
            dropped[name].append(label)
            by_dispatch.setdefault(name, [])
        for name in sorted(by_dispatch, key=lambda n: p.dispatch(n).order):
            d = p.dispatch(name)
            insts = by_dispatch[name]
            if d.early:
                spans = [s for f, s in d.flag_spans if f is Flag.EARLY]
                plan.bag.add("PG104", f"dummy '{name}' carries `early`: a dummy cannot be flagged", d.span,
                             severity=Severity.ERROR,
                             hint="pypto's task_dummy takes only deps= and never sets allow_early_resolve; drop `early`",
                             fix=Fix(tuple(Edit.delete(s) for s in spans)) if spans else None)
                continue
            if d.deps:
                if dropped.get(name):
                    where = dropped[name][0]
                    more = f" and {len(dropped[name]) - 1} more" if len(dropped[name]) > 1 else ""
                    plan.bag.add("PG104", f"every dep of dummy '{name}' is invalid at run time at {where}{more}, so "
                                 "the generated code does not submit it there and it orders nothing", d.span,
                                 severity=Severity.WARNING,
                                 hint="a dep-carrying dummy is submitted only if some dep is valid (`if (count > 0)`); "
                                      "give it a dep that exists there, or remove it")
                continue
            self.empty_deps(plan, name, insts)

    def empty_deps(self, plan: Plan, name: str, insts: list[Instance]) -> None:
        p, g = plan.program, plan.graph
        evicted: set[str] = set()
        consumers: set[str] = set()
        status = plan.get(EarlyStatus).status
        n_producers: dict[int, int] = {}
        for inst in insts:
            for v, data in g.succ[inst.id].items():
                consumers.add(g.instances[v].dispatch)
                if self.candidate_without(plan, v, inst, bool(data.prov & WAIT), status, n_producers):
                    evicted.add(g.instances[v].dispatch)
        order = lambda n: p.dispatch(n).order  # noqa: E731
        self.report_empty(plan, name, consumers, evicted, order)

    @staticmethod
    def candidate_without(plan: Plan, v: int, dummy: Instance, waits: bool,
                          status: dict[int, tuple[EarlyState, list[int]]], n_producers: dict[int, int]) -> bool:
        """`classify(plan, v, ignore=dummy.id)` is CANDIDATE, from v's EarlyStatus in O(1): the dummy
        (never flagged) is one of v's blocking producers exactly when it is a WAIT producer of v."""
        state, blocking = status.get(v, (EarlyState.DUMMY, []))
        if state is EarlyState.DUMMY:
            return False
        if v not in n_producers:
            n_producers[v] = len(producers(plan, v))
        others = n_producers[v] - (1 if waits else 0)
        return others > 0 and len(blocking) - (1 if waits else 0) == 0

    @staticmethod
    def report_empty(plan: Plan, name: str, consumers: set[str], evicted: set[str], order: Any) -> None:
        """The PG104 note or warning of an empty-deps dummy, by what its consumers become."""
        d = plan.program.dispatch(name)
        if not consumers:
            plan.bag.add("PG104", f"dummy '{name}' has no deps and nothing waits on it: it only costs a dispatch hop",
                         d.span, severity=Severity.WARNING,
                         hint="an empty-deps dummy is submitted as a real, immediately ready task (pypto #1987); "
                              "drop it; when it is the placeholder value of a TaskId slot, say so with "
                              "`allow(PG104, \"reason\")` on the line above it")
            return
        if evicted:
            plan.bag.add("PG104", f"dummy '{name}' fences nothing (no deps, ready on submit); its effect is the "
                         f"evict idiom: it makes {', '.join(sorted(evicted, key=order))} ineligible for early dispatch",
                         d.span, [Note("older compilers dropped an empty-deps dummy altogether (pypto #1594 -> #1987)")],
                         severity=Severity.NOTE,
                         hint="intended when those tasks must leave the early window to a critical sibling")
            return
        plan.bag.add("PG104", f"dummy '{name}' fences nothing and its consumers "
                     f"({', '.join(sorted(consumers, key=order))}) are ineligible for early dispatch anyway: it does "
                     "nothing", d.span, severity=Severity.WARNING,
                     hint="drop it, or give it the deps it was meant to fence")
