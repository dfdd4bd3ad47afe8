"""`pgraph stats`: the plan's headline figures (the names a `budget` statement uses), the
biggest fan-in and fan-out, and the instance graph's own size."""

from __future__ import annotations

from pgraph.kinds import TaskKind
from pgraph.plan.base import Plan
from pgraph.plan.figures import FIGURES, figures

__all__ = ["render_stats"]


def render_stats(plan: Plan, spec: str, sim_us: int | None = None) -> str:
    """The figures table, with the spec's budget of each figure that has one.

    `sim_us` is the simulated makespan when it was computed (only when a budget asks for it).
    """
    values = figures(plan)
    if sim_us is not None:
        values["sim_us"] = sim_us
    budgets = {b.figure: b.limit for b in plan.program.budgets}
    lp = plan.layer_loop
    layers = plan.program.loops[lp].axis.size if lp is not None else 0
    out = [f"{spec}: entry {plan.program.entry}, {layers} layer(s)", "",
           f"  {'figure':<24} {'value':>10}  {'budget':>10}  unit"]
    for name, fig in FIGURES.items():
        if name not in values:
            continue
        limit = f"{budgets[name]:,}" if name in budgets else "-"
        out.append(f"  {name:<24} {values[name]:>10,}  {limit:>10}  {fig.unit}")
    if "sim_us" in budgets and "sim_us" not in values:
        out.append(f"  {'sim_us':<24} {'-':>10}  {budgets['sim_us']:>10,}  us (`pgraph sim` computes and checks it)")
    g = plan.graph
    real = [i for i in g.instances if i.kind is not TaskKind.ALLOC]
    if real:
        fan_in = max(real, key=lambda i: (len(g.pred[i.id]), -i.id))
        fan_out = max(real, key=lambda i: (len(g.succ[i.id]), -i.id))
        out += ["", f"  widest fan-in:  {len(g.pred[fan_in.id])} producer(s) of {fan_in.label}",
                f"  widest fan-out: {len(g.succ[fan_out.id])} consumer(s) of {fan_out.label}"]
    window = "every iteration" if g.full or not g.windowed else "the two-iteration window"
    out.append(f"  instance graph: {len(g.instances):,} instance(s), {g.number_of_edges():,} edge(s) ({window})")
    return "\n".join(out) + "\n"
