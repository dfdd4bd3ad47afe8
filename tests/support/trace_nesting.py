"""The structural rules of a Chrome trace-event file that a JSON schema cannot state.

Perfetto and `chrome://tracing` draw the complete (`X`) slices of one track (pid, tid) as a
stack: two slices of a track either nest (one inside the other) or do not overlap at all; a
partial overlap is drawn wrongly or dropped. A flow event (`s`, `f`) binds to the slice of its
track that encloses its timestamp, and is lost when none does. Times are compared in integer
nanoseconds (the trace's µs values carry three decimals).
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from typing import Any


def _ns(x: float) -> int:
    return round(x * 1000)


def nesting_errors(events: list[dict[str, Any]], limit: int = 20) -> list[str]:
    """Every partial overlap on one track and every flow event outside all slices of its track
    (at most `limit` of each kind, each one line)."""
    tracks: dict[tuple[int, int], list[tuple[int, int, str]]] = defaultdict(list)
    for e in events:
        if e["ph"] == "X":
            a = _ns(e["ts"])
            tracks[(e["pid"], e["tid"])].append((a, a + _ns(e["dur"]), e["name"]))
    overlaps: list[str] = []
    for key, slices in sorted(tracks.items()):
        slices.sort(key=lambda s: (s[0], -s[1]))
        stack: list[tuple[int, int, str]] = []
        for a, b, name in slices:
            while stack and stack[-1][1] <= a:
                stack.pop()
            if stack and b > stack[-1][1]:
                top = stack[-1]
                overlaps.append(f"pid {key[0]} tid {key[1]}: '{name}' [{a}, {b}] ns overlaps '{top[2]}' "
                                f"[{top[0]}, {top[1]}] ns without nesting")
                continue
            stack.append((a, b, name))
    # a flow's enclosing slice: the last slice starting at or before it must reach it, or an outer one
    outside: list[str] = []
    starts = {k: [s[0] for s in v] for k, v in tracks.items()}
    reach = {}
    for k, v in tracks.items():   # running maximum of ends: some slice starting before t reaches t
        top, ends = -1, []
        for _a, b, _n in v:
            top = max(top, b)
            ends.append(top)
        reach[k] = ends
    for e in events:
        if e["ph"] not in ("s", "f"):
            continue
        k = (e["pid"], e["tid"])
        t = _ns(e["ts"])
        i = bisect.bisect_right(starts.get(k, []), t) - 1
        if i < 0 or reach[k][i] < t:
            outside.append(f"flow {e['ph']} id {e.get('id')} at {t} ns on pid {k[0]} tid {k[1]} lies in no slice")
    return overlaps[:limit] + outside[:limit] + (
        [f"{len(overlaps)} overlap(s), {len(outside)} flow(s) outside in all"] if overlaps or outside else [])
