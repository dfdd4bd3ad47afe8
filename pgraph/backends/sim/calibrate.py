"""Per-kernel costs fitted from a captured swimlane: `chip_swimlane_records.json` + `deps.json`.

Formats (simpler, docs/upstream.md §2.7, §2.8): the records file has
`metadata.clock_freq_hz` (a2a3: 50e6), `metadata.core_types[core_id]` ("aic"/"aiv" or
"AIC"/"AIV") and `aicore_tasks` rows `[core_id, task_token_raw, reg_task_id, start, end]`
in cycles; deps.json has `tasks[]` with `task_id` (the PTO2TaskId raw value, as a string)
and `kernel_ids` `[aic, aiv0, aiv1]` (-1 = inactive). A row is one block's subtask on one
core; its kernel is the task's AIC kernel id on an AIC core, else its AIV kernel id.

The fit per kernel function id is the median of its rows' durations (robust to the
swimlane's own outliers). A spec kernel gets the median of its func id; a MIX kernel (one
AIC and one AIV func id) gets the larger of its two parts, since a block ends when all of
its subtasks have. Func ids map to kernel names through the spec (first use in submit
order, as the a2a3 backend assigns them).
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from pgraph.backends.escape import comment_text
from pgraph.source import MAX_CAPTURE_BYTES, read_input

from .records import SimGraph


def _load(path: Path, what: str) -> Any:
    try:
        return json.loads(read_input(path, MAX_CAPTURE_BYTES).decode("utf-8"))
    except OSError as err:
        raise ValueError(f"cannot read {what} {path}: {err.strerror or err}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{what} {path} is not JSON: {err}") from None


def durations_by_func(records: dict[str, Any], deps: dict[str, Any]) -> dict[int, list[float]]:
    """Per kernel func id, the durations (µs) of every AICore row of the capture (ValueError on a bad file)."""
    try:
        meta = records["metadata"]
        freq = float(meta["clock_freq_hz"])
        types = [str(t).lower() for t in meta["core_types"]]
        rows = records["aicore_tasks"]
        tasks = {str(t["task_id"]): [int(k) for k in t["kernel_ids"]] for t in deps["tasks"]}
    except (KeyError, TypeError, ValueError) as err:
        raise ValueError(f"the capture lacks a field simpler writes: {err}") from None
    if freq <= 0:
        raise ValueError("metadata.clock_freq_hz must be positive")
    out: dict[int, list[float]] = {}
    for row in rows:
        try:
            core, token, _reg, start, end = row[:5]
            kids = tasks[str(token)]
            kind = types[int(core)]
        except (ValueError, IndexError, KeyError, TypeError):
            continue  # a row of a task deps.json does not list (alloc tasks, or a truncated capture)
        fid = kids[0] if kind.startswith("aic") else (kids[1] if kids[1] >= 0 else kids[2])
        if fid < 0:
            continue
        out.setdefault(fid, []).append((float(end) - float(start)) / freq * 1e6)
    return out


def fit(by_func: dict[int, list[float]], graph: SimGraph) -> dict[str, dict[str, Any]]:
    """Per spec kernel: `us` (the fit), the rows used, their min/median/max, the func ids."""
    func_ids: dict[str, tuple[int, ...]] = {}
    for t in graph.tasks:
        if t.kernel is not None and t.func_ids:
            func_ids.setdefault(t.kernel, t.func_ids)
    out: dict[str, dict[str, Any]] = {}
    for kernel, fids in sorted(func_ids.items()):
        parts = [by_func[f] for f in fids if by_func.get(f)]
        if not parts:
            continue
        medians = [statistics.median(p) for p in parts]
        allv = [x for p in parts for x in p]
        out[kernel] = {"us": max(medians), "rows": len(allv), "min": min(allv), "max": max(allv),
                       "func_ids": list(fids)}
    return out


def calibrate_files(records: Path, deps: Path, graph: SimGraph) -> dict[str, dict[str, Any]]:
    """Fit per-kernel costs from the two capture files (ValueError with a message on bad input)."""
    return fit(durations_by_func(_load(records, "swimlane records"), _load(deps, "deps.json")), graph)


def render_calibration(fitted: dict[str, dict[str, Any]], records: str, deps: str) -> str:
    """The calibration TOML that `pgraph sim --calibration` reads."""
    lines = [f"# fitted by `pgraph sim --calibrate {comment_text(Path(records).name)} "
             f"{comment_text(Path(deps).name)}`: median AICore",
             "# duration per block of each kernel (us); rows = subtask rows used", "[kernels]"]
    for kernel, row in fitted.items():
        fids = ", ".join(str(f) for f in row["func_ids"])
        lines.append(f"{kernel} = {{ us = {row['us']:.4f}, rows = {row['rows']}, min = {row['min']:.4f}, "
                     f"max = {row['max']:.4f}, func_ids = [{fids}] }}")
    return "\n".join(lines) + "\n"
