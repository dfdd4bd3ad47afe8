"""`pgraph sim --plot OUT.svg`: the swimlane and the critical path of one run as an SVG picture.

Written directly as SVG text (no plotting library: nothing to install, the output is
byte-identical across runs). Layout, top to bottom:

- the critical path: one bar per step, from the step's ready time to its completion, split in
  its parts (waiting for the orchestrator, cohort wait, core wait, scheduler wait, kernel,
  completion; `analysis.critical_path`), the colours of the legend;
- the scheduler threads `AICPU_0..` (their phases) and the orchestrator;
- one lane per core, `AIC_n` then `AIV_n`: each block from kernel start to end, grey, or red
  when its task is on the critical path.

Every bar has a `<title>` (shown as a tooltip by browsers): task, block, start and end in µs.
The x axis is µs, with ticks at a round step.
"""

from __future__ import annotations

import math
from typing import Any
from xml.sax.saxutils import escape

from pgraph.backends.escape import comment_text

from .engine import Result

LANE_H = 6        # px per lane
PATH_H = 14       # px of the critical-path row
WIDTH = 1600      # px of the time axis
LEFT = 90         # px of the lane labels
PART_COLOURS = (("before_ready_us", "#bbbbbb", "before ready (orchestrator)"),
                ("cohort_wait_us", "#9467bd", "cohort wait (sync_start: its units held)"),
                ("core_wait_us", "#ff7f0e", "core wait (no idle core)"),
                ("scheduler_wait_us", "#1f77b4", "scheduler wait (dispatch, doorbell, setup)"),
                ("kernel_us", "#d62728", "kernel"),
                ("completion_us", "#2ca02c", "completion (FIN, polling, fanout)"))
PHASE_COLOURS = {"complete": "#2ca02c", "dispatch": "#1f77b4", "dummy": "#8c564b", "early_dispatch": "#17becf",
                 "drain": "#9467bd"}


def _text(s: str) -> str:
    return escape(comment_text(s))


def _step(span: float) -> float:
    """A round tick step giving 5 to 12 ticks over `span` µs."""
    if span <= 0:
        return 1.0
    raw = span / 8
    mag = 10 ** math.floor(math.log10(raw))
    for f in (1, 2, 5, 10):
        if f * mag >= raw:
            return float(f * mag)
    return float(10 * mag)


def render_svg(res: Result, summary: dict[str, Any]) -> str:
    """The picture of `res` (its `analysis.summarize` output gives the critical path) as SVG text."""
    m = res.machine
    span = max(res.makespan, 1e-9)
    scale = WIDTH / span

    def x(t: float) -> float:
        return LEFT + max(0.0, min(t, span)) * scale

    steps = summary["critical_path"]["steps"]
    on_path = {s["task"] for s in steps}
    top = 40
    path_y = top
    threads_y = path_y + PATH_H + 10
    orch_y = threads_y + m.threads * LANE_H
    cores_y = orch_y + LANE_H + 10
    height = cores_y + m.ncores * LANE_H + 60
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{LEFT + WIDTH + 20}" height="{height}" '
           f'font-family="sans-serif" font-size="9">',
           f'<text x="{LEFT}" y="14" font-size="12">{_text(res.graph.source or "pgraph sim")}: makespan '
           f'{res.makespan:,.1f} us, critical path {len(steps)} task(s)</text>']
    # legend
    lx = LEFT
    for _key, colour, label in PART_COLOURS:
        out.append(f'<rect x="{lx}" y="22" width="8" height="8" fill="{colour}"/>'
                   f'<text x="{lx + 11}" y="30">{_text(label)}</text>')
        lx += 12 + 5 * len(label)
    # critical path
    out.append(f'<text x="4" y="{path_y + 10}">critical path</text>')
    for s in steps:
        t0 = s["ready"] if s["ready"] != float("inf") else s["start"]
        t0 -= s["before_ready_us"]
        for key, colour, _label in PART_COLOURS:
            d = s.get(key, 0.0)
            if d <= 0:
                continue
            out.append(f'<rect x="{x(t0):.2f}" y="{path_y}" width="{max(d * scale, 0.3):.2f}" height="{PATH_H}" '
                       f'fill="{colour}"><title>{_text(s["task"])}: {key[:-3].replace("_", " ")} {d:,.2f} us'
                       f'</title></rect>')
            t0 += d
    # scheduler threads and the orchestrator
    for th, phases in enumerate(res.thread_phases):
        y = threads_y + th * LANE_H
        out.append(f'<text x="4" y="{y + LANE_H - 1}">AICPU_{th}</text>')
        for kind, a, b, _n in phases:
            if b > a:
                out.append(f'<rect x="{x(a):.2f}" y="{y}" width="{max((b - a) * scale, 0.2):.2f}" '
                           f'height="{LANE_H - 1}" fill="{PHASE_COLOURS.get(kind, "#777777")}"/>')
    out.append(f'<text x="4" y="{orch_y + LANE_H - 1}">orchestrator</text>')
    subs = sorted((s.submit_start, s.submit) for s in res.tasks if s.submit_start != float("inf"))
    merged: list[list[float]] = []
    for a, b in subs:   # back-to-back submits drawn as one bar
        if merged and a <= merged[-1][1] + 1e-9:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    for a, b in merged:
        out.append(f'<rect x="{x(a):.2f}" y="{orch_y}" width="{max((b - a) * scale, 0.2):.2f}" '
                   f'height="{LANE_H - 1}" fill="#7f7f7f"/>')
    # cores
    for c in range(m.ncores):
        y = cores_y + c * LANE_H
        if c % 4 == 0 or c == m.clusters:
            out.append(f'<text x="4" y="{y + LANE_H - 1}">{m.lane(c)}</text>')
        for a, b, tid in res.core_spans[c]:
            t = res.graph.tasks[tid]
            hot = t.name in on_path
            out.append(f'<rect x="{x(a):.2f}" y="{y}" width="{max((b - a) * scale, 0.2):.2f}" '
                       f'height="{LANE_H - 1}" fill="{"#d62728" if hot else "#9e9e9e"}"><title>{_text(t.name)} '
                       f'{a:,.2f}-{b:,.2f} us</title></rect>')
    # time axis
    axis_y = cores_y + m.ncores * LANE_H + 8
    out.append(f'<line x1="{LEFT}" y1="{axis_y}" x2="{LEFT + WIDTH}" y2="{axis_y}" stroke="black"/>')
    step = _step(span)
    k = 0
    while k * step <= span + 1e-9:
        tx = x(k * step)
        out.append(f'<line x1="{tx:.2f}" y1="{axis_y}" x2="{tx:.2f}" y2="{axis_y + 4}" stroke="black"/>'
                   f'<text x="{tx:.2f}" y="{axis_y + 14}" text-anchor="middle">{k * step:,.0f}</text>')
        k += 1
    out.append(f'<text x="{LEFT + WIDTH / 2}" y="{axis_y + 28}" text-anchor="middle">time (us)</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
