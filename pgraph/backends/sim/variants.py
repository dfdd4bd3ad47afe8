"""The cost model's documented variants (`pgraph/ir/a2a3_variants.toml`) and the range of a run under them.

`pgraph sim` reports the makespan as shipped and under each variant (`makespan_range`); a
comparison (`--vs`) reports B - A under each and whether its sign holds under all of them
(`compare_range`). A variant is a set of `--set` overrides of the a2a3 figures; a figure the
user overrode (`--set`, `--timing`, `--vs-set`) keeps the user's value in every variant, so a
variant never undoes what the user asked for.
"""

from __future__ import annotations

import tomllib
from typing import Any

import attrs

from pgraph import records
from pgraph.ir.cost_model import variants_text

from .config import SimConfig, load_config
from .engine import simulate
from .records import SimGraph


@records.value
@attrs.frozen(repr=False, eq=False)
class Variant:
    """One documented variant: a name, what it changes, its `--set` overrides and their source."""

    name: str
    what: str
    sets: tuple[str, ...]
    source: str


def load_variants() -> tuple[Variant, ...]:
    """The variants of `a2a3_variants.toml` (the cost model's package data), in file order."""
    text = variants_text()
    return tuple(Variant(v["name"], v["what"], tuple(v["sets"]), v["source"]) for v in tomllib.loads(text)["variant"])


def variant_config(cfg: SimConfig, v: Variant) -> SimConfig:
    """`cfg` under variant `v`: its overrides, except of figures `cfg` does not take from the timing table."""
    shipped = load_config()
    keep = [s for s in v.sets if cfg.source(s.partition("=")[0]) == shipped.source(s.partition("=")[0])]
    return cfg.with_overrides(tuple(keep))


def makespans(graph: SimGraph, cfg: SimConfig, calibration: dict[str, float] | None,
              variants: tuple[Variant, ...]) -> list[dict[str, Any]]:
    """Per variant: its name and the makespan (µs) of `graph` under it (None when it stalls)."""
    out = []
    for v in variants:
        res = simulate(graph, variant_config(cfg, v), calibration)
        out.append({"variant": v.name, "what": v.what, "makespan_us": None if res.stall else res.makespan})
    return out


def makespan_range(nominal: float, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The range of the makespan over the shipped figures and every variant that did not stall."""
    values = [nominal, *(r["makespan_us"] for r in rows if r["makespan_us"] is not None)]
    return {"lo_us": min(values), "hi_us": max(values), "nominal_us": nominal, "variants": rows,
            "stalled": [r["variant"] for r in rows if r["makespan_us"] is None]}


def _sign(x: float) -> int:
    return (x > 0) - (x < 0)


def compare_range(a: float, b: float, rows_a: list[dict[str, Any]], rows_b: list[dict[str, Any]]) -> dict[str, Any]:
    """B - A as shipped and under each variant: its range, and whether its sign holds under every
    variant (`holds`; `flips`: the variants under which it does not, or where a side stalled)."""
    nominal = b - a
    rows, flips = [], []
    for ra, rb in zip(rows_a, rows_b, strict=True):
        if ra["makespan_us"] is None or rb["makespan_us"] is None:
            rows.append({"variant": ra["variant"], "a": ra["makespan_us"], "b": rb["makespan_us"], "diff": None})
            flips.append(ra["variant"])
            continue
        d = rb["makespan_us"] - ra["makespan_us"]
        rows.append({"variant": ra["variant"], "a": ra["makespan_us"], "b": rb["makespan_us"], "diff": d})
        if _sign(d) != _sign(nominal):
            flips.append(ra["variant"])
    diffs = [nominal, *(r["diff"] for r in rows if r["diff"] is not None)]
    return {"nominal_us": nominal, "lo_us": min(diffs), "hi_us": max(diffs), "rows": rows,
            "holds": not flips, "flips": flips}
