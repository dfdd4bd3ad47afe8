"""HBM as a shared resource: max-min fair bandwidth among the blocks that are streaming.

Each streaming block has bytes left and a cap (bytes/µs: `cost.core_gbps` per core it
occupies). The total is `cost.hbm_gbps`. Rates are re-computed by water-filling whenever a
stream starts or ends; between those instants every rate is constant, so the next
completion time is exact. The engine owns the event queue; `Hbm` only says when its next
completion is (`next_time`) and which streams finish at a given time (`finish_at`).
"""

from __future__ import annotations

import math


class Hbm:
    """Max-min fair sharing of `total` bytes/µs among streams, each capped."""

    EPS = 1e-6  # bytes: a stream with less left than this is done (float rounding)

    def __init__(self, total_bytes_per_us: float) -> None:
        self.total = total_bytes_per_us
        self.left: dict[int, float] = {}
        self.cap: dict[int, float] = {}
        self.rate: dict[int, float] = {}
        self.now = 0.0
        #: bumped at every re-computation; the engine drops completion events of older versions
        self.version = 0
        self.busy_bytes = 0.0

    def advance(self, t: float) -> None:
        """Move every stream forward to time `t` at its current rate."""
        dt = t - self.now
        if dt > 0:
            for key, r in self.rate.items():
                moved = r * dt
                self.left[key] -= moved
                self.busy_bytes += moved
        self.now = max(self.now, t)

    def add(self, key: int, nbytes: float, cap: float, t: float) -> None:
        """Start stream `key` of `nbytes` at time `t`."""
        self.advance(t)
        self.left[key] = nbytes
        self.cap[key] = cap
        self._rates()

    def finish_at(self, t: float) -> list[int]:
        """Streams done at time `t` (removed); rates re-computed for the others."""
        self.advance(t)
        done = [k for k, v in self.left.items() if v <= self.EPS * max(1.0, self.cap[k])]
        for k in done:
            del self.left[k], self.cap[k], self.rate[k]
        self._rates()
        return sorted(done)

    def next_time(self) -> float:
        """When the next stream completes at the current rates (inf when none streams)."""
        best = math.inf
        for k, r in self.rate.items():
            if r > 0:
                best = min(best, self.now + max(self.left[k], 0.0) / r)
        return best

    def _rates(self) -> None:
        self.version += 1
        keys = sorted(self.left, key=lambda k: (self.cap[k], k))
        budget = self.total
        n = len(keys)
        self.rate = {}
        for i, k in enumerate(keys):
            share = budget / (n - i)
            r = min(self.cap[k], share)
            self.rate[k] = r
            budget -= r
