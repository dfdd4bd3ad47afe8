"""The `pgraph plan` report: a text table and the JSON object (same facts)."""

from __future__ import annotations

import json
from typing import Any

from pgraph import __version__
from pgraph.diagnostics import Severity, diagnostic_json
from pgraph.plan.base import Plan

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


def render_text(plan: Plan, spec: str) -> str:
    """The human-readable report: totals per layer and overall, phases, scopes and rings."""
    f = plan.facts
    p = plan.program
    diags = plan.bag.items
    errors = sum(1 for d in diags if d.level is Severity.ERROR)
    warnings = sum(1 for d in diags if d.level is Severity.WARNING)
    notes = sum(1 for d in diags if d.level is Severity.NOTE)
    out = [f"{spec}: entry {p.entry}, {f['layers']} layer(s); {errors} error(s), {warnings} warning(s), {notes} note(s)", ""]
    rows = []
    if f.get("per_layer"):
        rows.append(["one layer", *(_fmt(f["per_layer"][k]) for k in COUNT_FIELDS)])
    rows.append([f"whole program ({f['layers']} layers)", *(_fmt(f["summary"][k]) for k in COUNT_FIELDS)])
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
    out += ["", "scopes (ring = min(depth, 3)):"]
    srow = []
    for s in f["scopes"]:
        srow.append([f"#{s['scope']} line {s['line']}", s["kind"], s["mode"], str(s["depth"]), str(s["ring"]),
                     str(s["dispatches"]), str(s["allocations"]), _fmt(s["heap_bytes"])])
    out += _table(["scope", "kind", "mode", "depth", "ring", "dispatches", "allocs", "heap bytes"], srow, align_left=3)
    return "\n".join(out) + "\n"


def report_json(plan: Plan, spec: str) -> dict[str, Any]:
    """The machine-readable report (integers only in the count objects)."""
    f = plan.facts
    return {
        "pgraph_version": __version__,
        "spec": spec,
        "entry": plan.program.entry,
        "layers": f["layers"],
        "summary": f["summary"],
        "per_layer": f["per_layer"],
        "phases": f["phases"],
        "scopes": f["scopes"],
        "diagnostics": [diagnostic_json(d) for d in plan.bag.sorted()],
    }


def render_json(plan: Plan, spec: str) -> str:
    """`report_json` as stable, indented JSON text."""
    return json.dumps(report_json(plan, spec), indent=2, sort_keys=True) + "\n"
