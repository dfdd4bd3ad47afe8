"""The `pgraph plan` report: a text table and the JSON object (same facts)."""

from __future__ import annotations

from typing import Any

from pgraph import __version__
from pgraph.diagnostics import Severity, diagnostic_json
from pgraph.plan.base import Plan
from pgraph.plan.counts import Counts
from pgraph.plan.critical_path import CriticalPath
from pgraph.plan.early_dispatch import EarlyTable
from pgraph.plan.hygiene import RedundantEdges
from pgraph.plan.races import Races
from pgraph.plan.rings import RingTable
from pgraph.plan.scope_table import ScopeTable

COUNT_FIELDS = ("tasks", "dummy_tasks", "blocks", "explicit_edges", "inferred_edges")


def _fmt(n: int) -> str:
    return f"{n:,}"


def _table(headers: list[str], rows: list[list[str]], align_left: int = 1) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]

    def line(cells: list[str]) -> str:
        out = []
        for i, (c, w) in enumerate(zip(cells, widths)):
            out.append(c.ljust(w) if i < align_left else c.rjust(w))
        return "  " + "  ".join(out).rstrip()

    return [line(headers), *(line(r) for r in rows)]


def report_facts(plan: Plan) -> dict[str, Any]:
    """The facts of the report, by the keys of its JSON form (read from the passes' typed facts)."""
    counts = plan.get(Counts)
    early = plan.get(EarlyTable)
    rings = plan.get(RingTable)
    return {
        "summary": counts.summary,
        "per_layer": counts.per_layer,
        "layers": counts.layers,
        "phases": counts.phases,
        "scopes": plan.get(ScopeTable).rows,
        "early_dispatch": early.rows,
        "early_dispatch_open_point": early.open_point,
        "critical_path": plan.get(CriticalPath).value,
        "rings": rings.rings,
        "tensormap": rings.tensormap,
        "races": len(plan.get(Races).races),
        "redundant_edges": plan.get(RedundantEdges).total,
    }


def render_text(plan: Plan, spec: str, notes: bool = False) -> str:
    """The human-readable report: totals per layer and overall, phases, scopes and rings.

    A long list of producers (the unflagged producers that break the early-resolve chain) is
    summarised as a count and the first few; `notes` (`plan --notes`) prints every one.

    The early-dispatch caveat is one short line; its open point (the runtime's rule, unverified
    on device) is stated in docs/planner.md and in the JSON report (`early_dispatch_open_point`)."""
    f = report_facts(plan)
    p = plan.program
    diags = plan.bag.items
    errors = sum(1 for d in diags if d.level is Severity.ERROR)
    warnings = sum(1 for d in diags if d.level is Severity.WARNING)
    note_count = sum(1 for d in diags if d.level is Severity.NOTE)
    allowed = f", {len(plan.bag.allowed)} allowed" if plan.bag.allowed else ""
    layers = f"{f['layers']} layer(s)" if f["layers"] else "no layer loop"
    out = [f"{spec}: entry {p.entry}, {layers}; {errors} error(s), {warnings} warning(s), {note_count} note(s)"
           f"{allowed}", ""]
    rows = []
    if f.get("per_layer"):
        rows.append(["one layer", *(_fmt(f["per_layer"][k]) for k in COUNT_FIELDS)])
    whole = f"whole program ({f['layers']} layers)" if f["layers"] else "whole program"
    rows.append([whole, *(_fmt(f["summary"][k]) for k in COUNT_FIELDS)])
    out += _table(["", "tasks", "dummies", "blocks", "explicit edges", "inferred edges"], rows)
    if f.get("per_layer"):
        out.append(f"  ({f['per_layer']['duplicate_dep_entries']} duplicate dep entries per layer fold into those edges)")
    out += ["", "phases:"]
    prow = []
    for row in f["phases"]:
        layer = row.get("per_layer")
        prow.append([row["phase"],
                     _fmt(layer["tasks"]) if layer else "-", _fmt(layer["dummy_tasks"]) if layer else "-",
                     _fmt(layer["blocks"]) if layer else "-",
                     _fmt(row["tasks"]), _fmt(row["dummy_tasks"]), _fmt(row["blocks"])])
    out += _table(["phase", "tasks/layer", "dummies/layer", "blocks/layer", "tasks", "dummies", "blocks"], prow)
    out += _early_section(f)
    out += _critical_section(f, full=notes)
    out += _rings_section(f)
    out += ["", "scopes (ring = min(depth, 3)):"]
    srow = []
    for s in f["scopes"]:
        srow.append([f"#{s['scope']} line {s['line']}", s["kind"], s["mode"], str(s["depth"]), str(s["ring"]),
                     str(s["dispatches"]), str(s["allocations"]), _fmt(s["heap_bytes"])])
    out += _table(["scope", "kind", "mode", "depth", "ring", "dispatches", "allocs", "heap bytes"], srow, align_left=3)
    return "\n".join(out) + "\n"


def _early_section(f: dict[str, Any]) -> list[str]:
    if not f.get("early_dispatch"):
        return []
    rows = []
    for r in f["early_dispatch"]:
        n = sum(r["instances"].values())
        state = r["state"] + (f" ({n} tasks)" if n > 1 else "")
        rows.append([r["dispatch"], "yes" if r["early_flag"] else "-", state, ", ".join(r["blocked_by"]) or "-"])
    out = ["", "early dispatch (one layer and the entry; simpler: every direct producer flagged, dummies never):"]
    out += _table(["task", "early flag", "consumer state", "blocked by unflagged"], rows, align_left=4)
    out.append("  (candidates also need every producer fully published at run time; the rule is the runtime "
               "code's, unverified on device: docs/planner.md)")
    return out


def _critical_section(f: dict[str, Any], full: bool = False) -> list[str]:
    cp = f.get("critical_path")
    if not cp:
        return []
    out = ["", f"critical path: {_fmt(cp['length_us'])} cost units"
           + (f" ({_fmt(cp['per_layer_us'])} per layer)" if cp.get("per_layer_us") is not None else "")
           + "; cost = ceil(blocks / cores) x per-block cost, from `cost` lines (µs when calibrated"
           " from a swimlane) or the uncalibrated defaults aic 10, aiv 5, mix 20, dummy 0"]
    steps = [s for s in cp["path"] if s["kind"] != "alloc"]
    if cp.get("per_layer_us") is not None:
        out.append(f"  (the window: {f['layers']} identical layers are expanded as L=0 and L=1, and L=1 stands for "
                   f"layers 1..{f['layers'] - 1}; `--full` expands them all)")
    out.append("  " + " -> ".join(f"{s['task']} ({s['cost_us']}" + (
        f", {s['wait_us']} of it waiting for a unit '{s['waits_for']}' can hold staged, PG119"
        if s.get("wait_us") else "") + ")" for s in steps))
    mod = cp.get("modelled")
    if mod:
        msteps = [m for m in mod["path"] if m["kind"] != "alloc"]
        shown = msteps if len(msteps) <= 14 else msteps[:6] + [None] + msteps[-6:]
        out.append(f"  under the a2a3 cost model `pgraph sim` uses ({mod['figures']}; each task alone: roofline or "
                   f"`cost` line, plus one scheduling hop): {_fmt(round(mod['length_us']))} us over {len(msteps)} task(s)")
        out.append("  " + " -> ".join("..." if m is None else f"{m['task']} ({m['us']:,.1f})" for m in shown))
    for key, what in (("first_broken_early_link", "from the entry"), ("first_broken_early_link_in_layer", "in a layer")):
        link = cp.get(key)
        if link:
            reason = link["reason"]
            if full and "blocking" in link:
                reason = "unflagged producer(s): " + ", ".join(link["blocking"])
            out.append(f"  early-resolve chain breaks first {what} at {link['from']} -> {link['to']}: {reason}")
    return out


def _rings_section(f: dict[str, Any]) -> list[str]:
    if not f.get("rings"):
        return []
    rows = []
    for r in f["rings"]:
        rows.append([str(r["ring"]), ",".join(f"#{s}" for s in r["scopes"]),
                     _fmt(r["layer_tasks"]), f"{_fmt(r['peak_tasks_with_carry'])} / {_fmt(r['task_window'] - 1)}",
                     _fmt(r["layer_heap"]), f"{_fmt(r['peak_heap_with_carry'])} / {_fmt(r['heap_limit'])}",
                     f"{_fmt(r['peak_dep_pool'])} / {_fmt(r['dep_pool_limit'])}"])
    out = ["", "rings and capacity (one layer; peak while scopes are open, previous carried iteration included):"]
    out += _table(["ring", "scopes", "tasks/layer", "peak tasks / window-1", "heap B/layer", "peak heap B / limit",
                   "peak dep pool / limit"], rows)
    tm = f["tensormap"]
    out.append(f"  TensorMap entries live at peak: {_fmt(tm['peak_entries'])} / {_fmt(tm['limit'])} (global)")
    return out


def report_json(plan: Plan, spec: str) -> dict[str, Any]:
    """The machine-readable report (integers only in the count objects)."""
    f = report_facts(plan)
    return {
        "pgraph_version": __version__,
        "spec": spec,
        "entry": plan.program.entry,
        "layers": f["layers"],
        "summary": f["summary"],
        "per_layer": f["per_layer"],
        "phases": f["phases"],
        "scopes": f["scopes"],
        "early_dispatch": f["early_dispatch"],
        "early_dispatch_open_point": f["early_dispatch_open_point"],
        "critical_path": f["critical_path"],
        "rings": f["rings"],
        "tensormap": f["tensormap"],
        "races": f["races"],
        "redundant_edges": f["redundant_edges"],
        "diagnostics": [diagnostic_json(d) for d in plan.bag.sorted()],
        **({"allowed": [dict(diagnostic_json(d), allowed_by=w.origin(), reason=w.reason)
                        for d, w in sorted(plan.bag.allowed, key=lambda dw: dw[0].sort_key())]}
           if plan.bag.allowed else {}),
    }


def render_json(plan: Plan, spec: str) -> str:
    """`report_json` as stable, indented JSON text."""
    import json  # (only the JSON report needs it: ~2 ms of a start)

    return json.dumps(report_json(plan, spec), indent=2, sort_keys=True) + "\n"
