"""The old-compiler mode (PG123): what a compiler before pypto #1987 does to empty-deps dummies.

Before pypto #1987 (12aa8bdb2, fixing #1976) `EmitDummyTask`'s `deps_count > 0` guard was
statically false for `task_dummy(deps=[])`: the dummy was never submitted, its TaskId stayed
invalid, and every consumer skipped it (docs/upstream.md §6.6, §10.5: decode's seed_dummy
"gated nothing until it was given a real dependency"). A target that says so (`pypto_pr = N`
with N < 1987 in the `target` table, or `--compat pypto<1987`) is expanded that way
(pgraph.expand drops those dummies, and the dep-carrying dummies fed only by them, whose
guard is then false at run time), so every later pass plans the old compiler's graph: the
counts, the rings, the early-dispatch table and the races.

This pass reports each dropped empty-deps dummy that something waited on: the consumers that
lose their gate on it, the ones among them that become early-dispatch candidates (the evict
idiom no longer evicts them: they take the early window from the critical sibling), and every
race of those consumers in the old compiler's graph (each also a PG100/PG101 error of the race
pass). An empty-deps dummy has no predecessor, so no order between two real tasks passes
through it (nor through a dummy fed by it alone, which has no real predecessor either): the
order it gives is the early-dispatch gate alone, and dropping it can add no race; the note says
so after the race pass has checked the old compiler's graph.
"""

from __future__ import annotations

from collections import defaultdict

import attrs

from pgraph import records
from pgraph.diagnostics import Note
from pgraph.ir.limits import drops_empty_dummies
from pgraph.plan.base import Fact, Pass, Plan
from pgraph.plan.early_dispatch import EarlyState, EarlyStatus
from pgraph.plan.races import Races


@records.value
@attrs.frozen(repr=False, eq=False)
class Ungated(Fact):
    """Under a compiler that drops empty-deps dummies: dummy dispatch -> the instances that waited
    on one of its (dropped) instances, ascending; the dep-carrying dummies dropped with them are
    listed as well. Empty for the current compiler."""

    consumers: dict[str, list[int]]
    #: the dispatches whose dummies are dropped because they have no deps (the rest: dropped
    #: because every dep was one of those)
    empty: list[str]


def ungated(plan: Plan) -> Ungated:
    """The Ungated fact of `plan`'s graph."""
    g = plan.graph
    if not drops_empty_dummies(plan.program.target):
        return Ungated({}, [])
    consumers: dict[str, set[int]] = defaultdict(set)
    for (dispatch, _label), waiting in g.ungated.items():
        consumers[dispatch].update(waiting)
    empty = list(dict.fromkeys(d for d, _ in g.dropped_empty))
    return Ungated({d: sorted(v) for d, v in consumers.items()}, empty)


def _names(plan: Plan, nodes: list[int]) -> list[str]:
    """The dispatches of `nodes`, once each, in program order."""
    p, g = plan.program, plan.graph
    return sorted({g.instances[n].dispatch for n in nodes}, key=lambda n: p.dispatch(n).order)


class OldCompilerPass(Pass):
    """PG123: an empty-deps dummy that the target's older compiler drops, and what its consumers lose."""

    name = "old-compiler"
    requires = (EarlyStatus, Races)
    produces = (Ungated,)

    def run(self, plan: Plan) -> None:
        fact = ungated(plan)
        plan.put(fact)
        if not fact.empty:
            return
        p, g = plan.program, plan.graph
        status = plan.get(EarlyStatus).status
        races = plan.get(Races).races
        dropped_with = {d for d in fact.consumers if d not in fact.empty}
        pr = p.target["pypto_pr"]
        for name in fact.empty:
            d = p.dispatch(name)
            nodes = fact.consumers.get(name, [])
            # what fed only by this dummy went with it, and what waited on those
            carried = [x for x in dropped_with if any(dep.target == d.tileset for dep in p.dispatch(x).deps)]
            for x in carried:
                nodes = nodes + fact.consumers.get(x, [])
            cons = _names(plan, nodes)
            if not cons:
                continue  # nothing waited on it: PG104 says what it costs today
            early = _names(plan, [n for n in nodes if status.get(n, (EarlyState.DUMMY, []))[0] is EarlyState.CANDIDATE])
            hit = set(nodes)
            found = [r for r in races if r.first in hit or r.second in hit]
            notes = [Note(f"pypto before #1987 (the target's pypto_pr = {pr}) never submits an empty "
                          "`task_dummy(deps=[])`: its TaskId stays invalid and every consumer skips it "
                          "(EmitDummyTask's `deps_count > 0` guard, fixed by #1987)")]
            if carried:
                notes.append(Note(f"dropped with it (every dep of theirs was this dummy): {', '.join(sorted(carried))}"))
            if early:
                notes.append(Note(f"now early-dispatch candidates (the dummy evicted them from the early window): "
                                  f"{', '.join(early)}"))
            if found:
                pairs = sorted({(g.instances[r.first].dispatch, g.instances[r.second].dispatch) for r in found})
                shown = ", ".join(f"'{a}' / '{b}'" for a, b in pairs[:5])
                more = f" and {len(pairs) - 5} more" if len(pairs) > 5 else ""
                notes.append(Note(f"races that result (PG100/PG101): {shown}{more}"))
            else:
                notes.append(Note("no race results: the dummy has no predecessor, so no order between tasks "
                                  "passed through it"))
            plan.bag.add(
                "PG123", f"the target's compiler drops the empty-deps dummy '{name}': {', '.join(cons)} "
                f"lose their gate on it", d.span, notes,
                hint="give the dummy a real dep (the task it should follow), as the decode layer did, so the old "
                     "compiler submits it; or plan for pypto #1987 and later (drop `pypto_pr` / `--compat`)")
