"""Text and JSON rendering of `pgraph sim` results, and the side-by-side comparison (`--vs`)."""

from __future__ import annotations

import json
from typing import Any

from .config import SimConfig


def _f(x: float, nd: int = 1) -> str:
    return f"{x:,.{nd}f}"


def _table(headers: list[str], rows: list[list[str]], left: int = 1) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]

    def line(cells: list[str]) -> str:
        return "  " + "  ".join(c.ljust(w) if i < left else c.rjust(w)
                                for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    return [line(headers), *(line(r) for r in rows)]


def render_text(s: dict[str, Any], spec: str, cfg: SimConfig, path_steps: int = 12) -> str:
    """The human-readable report of one run (`summarize` output)."""
    lt = s["layers"]
    wb = s["weight_bound"]
    n = s["tasks_by_shape"]
    head = (f"{spec}: simulated on a2a3 ({cfg['machine.clusters']} clusters, {cfg['machine.scheduler_threads']} "
            f"scheduler threads): {s['tasks']:,} tasks ({n.get('aic', 0) + n.get('aiv', 0) + n.get('mix', 0):,} on "
            f"cores, {n.get('dummy', 0):,} dummies, {n.get('alloc', 0):,} alloc), {s['blocks']:,} blocks, "
            f"{lt['layers']} layer(s)")
    out = [head, ""]
    rows = [["makespan", _f(s["makespan_us"]) + " us"]]
    if lt["layers"]:
        rows.append(["per layer (median of increments)", _f(lt["steady_us"]) + " us"])
        rows.append(["first layer completes at", _f(lt["first_layer_end_us"]) + " us"])
    if wb.get("bytes_per_layer"):
        rows.append(["weight-streaming bound per layer",
                     f"{_f(wb['us_per_layer'])} us ({wb['bytes_per_layer'] / 1e9:.3f} GB of matmul weights at "
                     f"{cfg['cost.hbm_gbps']:g} GB/s)"])
    rows.append(["orchestrator blocked (back-pressure)", _f(s["orchestrator_blocked_us"]) + " us"])
    rng = s.get("range")
    if rng:
        rows.insert(1, ["makespan range (cost-model variants)",
                        f"{_f(rng['lo_us'])} .. {_f(rng['hi_us'])} us over {len(rng['variants'])} variant(s) "
                        "and the shipped figures (below)"])
    out += _table(["", ""], rows, left=2)[1:]
    if s["stall"]:
        st = s["stall"]
        code = f" (orch_error_code {st['code']})" if st["code"] else ""
        out += ["", f"STALL at {_f(st['time_us'], 3)} us{code}: {st['reason']}"]
        out += [f"  {d}" for d in st["details"][:60]]
        if len(st["details"]) > 60:
            out.append(f"  ... {len(st['details']) - 60} more line(s) in --format json")
    cp = s["critical_path"]
    parts = cp["parts"]
    total = s["makespan_us"] or 1.0
    out += ["", f"critical path: {cp['length']} task(s); where its {_f(total)} us go:"]
    prow = [[label, _f(parts[key]), f"{100 * parts[key] / total:.1f} %"] for key, label in (
        ("kernel_us", "kernels running"), ("completion_us", "completion (FIN, polling, fanout)"),
        ("scheduler_wait_us", "ready, not yet started (scheduler, doorbell, setup)"),
        ("cohort_wait_us", "ready, a sync_start cohort waiting for its units (drain)"),
        ("core_wait_us", "ready, no idle core of its shape"),
        ("before_ready_us", "before the first task is ready (orchestrator)"))]
    out += _table(["part", "us", "share"], prow)
    steps = sorted(cp["steps"], key=lambda r: -(r["kernel_us"] + r["core_wait_us"] + r["scheduler_wait_us"]
                                                + r["cohort_wait_us"] + r["completion_us"]))[:path_steps]
    if steps:
        out += ["", f"  the {len(steps)} longest critical-path steps:"]
        srow = [[r["task"], r["shape"], str(r["blocks"]), _f(r["kernel_us"]), _f(r["cohort_wait_us"]),
                 _f(r["core_wait_us"]), _f(r["scheduler_wait_us"]), _f(r["completion_us"]), _f(r["done"])]
                for r in steps]
        out += _table(["task", "shape", "blocks", "kernel", "cohort wait", "core wait", "sched wait", "completion",
                       "done at"], srow)
    out += _cohort_lines(s["cohorts"])
    w = s["waits_total_us"]
    out += ["", "waits, summed over all tasks (us): "
            f"data {_f(w['data'])}, orchestrator {_f(w['orchestrator'])}, sync_start cohort {_f(w['cohort'])}, "
            f"core {_f(w['core'])}, scheduler {_f(w['scheduler'])}"]
    drows = []
    for r in s["by_dispatch"]:
        if r["shape"] == "alloc":
            continue
        k = r["tasks"]
        drows.append([r["dispatch"], r["shape"], f"{k:,}", _f(r["kernel_us"] / k), _f(r["data"] / k),
                      _f(r["orchestrator"] / k), _f(r["cohort"] / k), _f(r["core"] / k), _f(r["scheduler"] / k),
                      _f(r["min_slack_us"])])
    if drows:
        out += ["", "per declaration (mean per task, us):"]
        out += _table(["dispatch", "shape", "tasks", "kernel", "data w.", "orch w.", "cohort w.", "core w.", "sched w.",
                       "min slack"], drows)
    if rng:
        out += ["", "makespan under the cost model's documented variants (pgraph/ir/a2a3_variants.toml):"]
        vrows = [["as shipped (a2a3_timing.toml)", _f(rng["nominal_us"]), ""]]
        vrows += [[r["variant"], "stalled" if r["makespan_us"] is None else _f(r["makespan_us"]),
                   "" if r["makespan_us"] is None else f"{100 * (r['makespan_us'] / rng['nominal_us'] - 1):+.1f} %"]
                  for r in rng["variants"]]
        out += _table(["variant", "makespan (us)", "vs shipped"], vrows)
    u = s["utilisation"]
    threads = ", ".join(f"{100 * x:.0f} %" for x in u["threads"])
    out += ["", f"utilisation: AIC mean {100 * u['aic_mean']:.1f} % (min {100 * u['aic_min']:.1f}, max "
            f"{100 * u['aic_max']:.1f}); AIV mean {100 * u['aiv_mean']:.1f} % (min {100 * u['aiv_min']:.1f}, max "
            f"{100 * u['aiv_max']:.1f}); scheduler threads busy {threads}"]
    return "\n".join(out) + "\n"


def _cohort_lines(rows: list[dict[str, Any]], shown: int = 5) -> list[str]:
    """The sync_start cohorts that waited longest for their units, and who held them."""
    rows = sorted((r for r in rows if r["wait_us"] > 0), key=lambda r: (-r["wait_us"], r["from"]))
    if not rows:
        return []
    out = ["", f"sync_start cohorts that waited for their units ({len(rows)} drain(s); the {min(shown, len(rows))} "
               "longest; no other task was placed on those core kinds meanwhile):"]
    for r in rows[:shown]:
        held = []
        for h in r["holders"][:3]:
            how = (f"staged early, waiting on {', '.join(h['waits_on'][:3])}" if h["staged"] and h["waits_on"]
                   else "staged early" if h["staged"] else "running")
            held.append(f"{h['task']} ({how}; ends {_f(h['end'])} us)")
        more = f", and {len(r['holders']) - 3} more" if len(r["holders"]) > 3 else ""
        out.append(f"  {r['task']} waited {_f(r['wait_us'])} us from {_f(r['from'])} us; its units were held by "
                   + (", ".join(held) + more if held else "no task (placements only)"))
    return out


def render_json(s: dict[str, Any], spec: str, cfg: SimConfig) -> str:
    """The summary as JSON (sorted keys), with the figures used and their sources."""
    data = dict(s)
    data["spec"] = spec
    data["figures"] = {k: {"value": f.value, "source": f.source} for k, f in sorted(cfg.figures.items())}
    return json.dumps(data, indent=1, sort_keys=True, default=_inf) + "\n"


def _inf(x: object) -> object:
    raise TypeError(f"not JSON serialisable: {x!r}")


#: the rows of the comparison: (label, getter)
COMPARE_ROWS: tuple[tuple[str, Any], ...] = (
    ("makespan (us)", lambda s: s["makespan_us"]),
    ("per layer, median (us)", lambda s: s["layers"].get("steady_us", 0.0)),
    ("critical path: kernels (us)", lambda s: s["critical_path"]["parts"]["kernel_us"]),
    ("critical path: completion (us)", lambda s: s["critical_path"]["parts"]["completion_us"]),
    ("critical path: scheduler wait (us)", lambda s: s["critical_path"]["parts"]["scheduler_wait_us"]),
    ("critical path: cohort wait (us)", lambda s: s["critical_path"]["parts"]["cohort_wait_us"]),
    ("critical path: core wait (us)", lambda s: s["critical_path"]["parts"]["core_wait_us"]),
    ("critical path: tasks", lambda s: float(s["critical_path"]["length"])),
    ("tasks", lambda s: float(s["tasks"])),
    ("blocks", lambda s: float(s["blocks"])),
    ("AIC utilisation (%)", lambda s: 100 * s["utilisation"]["aic_mean"]),
    ("AIV utilisation (%)", lambda s: 100 * s["utilisation"]["aiv_mean"]),
    ("cohort wait, all tasks (us)", lambda s: s["waits_total_us"]["cohort"]),
    ("core wait, all tasks (us)", lambda s: s["waits_total_us"]["core"]),
    ("scheduler wait, all tasks (us)", lambda s: s["waits_total_us"]["scheduler"]),
)


def compare(a: dict[str, Any], b: dict[str, Any]) -> list[dict[str, Any]]:
    """Rows of the side-by-side comparison: label, A, B, B - A, relative change."""
    rows = []
    for label, get in COMPARE_ROWS:
        x, y = float(get(a)), float(get(b))
        rows.append({"metric": label, "a": x, "b": y, "diff": y - x, "rel": (y - x) / x if x else 0.0})
    return rows


def render_range(span: dict[str, Any]) -> list[str]:
    """The comparison under each cost-model variant, its range and whether its sign holds."""
    out = ["", "makespan B - A under the cost model's documented variants (pgraph/ir/a2a3_variants.toml):"]
    rows = []
    for r in span["rows"]:
        if r["diff"] is None:
            rows.append([r["variant"], "stalled" if r["a"] is None else _f(r["a"]),
                         "stalled" if r["b"] is None else _f(r["b"]), "-"])
        else:
            rows.append([r["variant"], _f(r["a"]), _f(r["b"]), ("+" if r["diff"] > 0 else "") + _f(r["diff"])])
    out += _table(["variant", "A", "B", "B - A"], rows)
    nominal = span["nominal_us"]
    way = "B faster" if nominal < 0 else "B slower" if nominal > 0 else "no change"
    out.append(f"B - A ranges over {_f(span['lo_us'])} .. {_f(span['hi_us'])} us (as shipped "
               f"{('+' if nominal > 0 else '') + _f(nominal)} us, {way})")
    if span["holds"]:
        out.append(f"the sign holds under every variant: {way} across the range")
    else:
        out.append(f"the sign does NOT hold: {way} as shipped, but not under " + ", ".join(span["flips"]))
    return out


def render_compare(a: dict[str, Any], b: dict[str, Any], name_a: str, name_b: str,
                   span: dict[str, Any] | None = None) -> str:
    """The comparison as text: one line per metric, the range under the cost model's variants
    (when computed), plus the stall state of each side."""
    rows = [[r["metric"], _f(r["a"]), _f(r["b"]), ("+" if r["diff"] > 0 else "") + _f(r["diff"]),
             f"{100 * r['rel']:+.2f} %"] for r in compare(a, b)]
    out = [f"A = {name_a}", f"B = {name_b}", ""]
    out += _table(["", "A", "B", "B - A", "change"], rows)
    if span is not None:
        out += render_range(span)
    for label, s in (("A", a), ("B", b)):
        if s["stall"]:
            out.append(f"{label} stalled: {s['stall']['reason']}")
    return "\n".join(out) + "\n"
