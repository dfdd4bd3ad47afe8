"""What the expansion met: regions with a negative extent (PG006) or outside their tensor (PG007),
expressions that cannot be evaluated (PG018), dep selections written backwards (PG006), deps that
select nothing (PG015) or tiles outside
the tile space (PG026)."""

from __future__ import annotations

from pgraph.diagnostics import Note
from pgraph.ir.instances import DepIssue, EvalIssue, RegionIssue
from pgraph.kinds import unhandled
from pgraph.plan.base import Pass, Plan


class ExpansionIssuesPass(Pass):
    """Reports `InstanceGraph.issues` (each once per source position)."""

    name = "expansion-issues"

    def run(self, plan: Plan) -> None:
        p = plan.program
        bag = plan.bag
        for issue in plan.graph.issues:
            match issue:
                case RegionIssue(kind="negative"):
                    bag.add("PG006", f"{issue.where}: slice {issue.lo}..{issue.hi} of '{issue.tensor}' has a negative "
                            "extent", issue.span)
                case RegionIssue():
                    bag.add("PG007", f"{issue.where}: '{issue.tensor}' is indexed {issue.lo}..{issue.hi} in a "
                            f"dimension of size {issue.size}", issue.span,
                            hint="check the tile constants and the index expressions")
                case EvalIssue():
                    bag.add("PG018", f"{issue.where}: {issue.message}", issue.span)
                case DepIssue(kind="backwards"):
                    bag.add("PG006", f"'{issue.consumer}' selects {issue.tileset} tiles {issue.var} in "
                            f"{issue.lo}..{issue.hi}: a selection written backwards has a negative extent",
                            issue.span, hint=f"write the bounds low to high ({issue.hi}..{issue.lo} selects "
                                             f"{issue.lo - issue.hi} tile(s)), or an empty range on purpose "
                                             f"as {issue.lo}..{issue.lo}")
                case DepIssue(kind="empty"):
                    bag.add("PG015", f"'{issue.consumer}' depends on an empty set of '{issue.tileset}' tiles",
                            issue.span, hint="an empty range is legal but orders nothing; check the bounds")
                case DepIssue():
                    ts = p.tilesets[issue.tileset]
                    axis = next(a for a in ts.axes if a.var == issue.var)
                    bag.add("PG026", f"'{issue.consumer}' selects {ts.name} tiles {issue.var} in {issue.lo}..{issue.hi}, "
                            f"outside {axis.lo}..{axis.hi}", issue.span, [Note(f"'{ts.name}' declared here", ts.span)],
                            hint="a dep names logical tiles of the tile space; check the index arithmetic")
                case _:
                    unhandled(issue)
