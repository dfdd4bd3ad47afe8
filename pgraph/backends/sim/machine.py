"""The a2a3 machine: clusters of 1 AIC + 2 AIV, core slots, scheduler-thread ownership.

Core ids follow simpler's swimlane layout: AIC cores first (core c = AIC of cluster c, lane
`AIC_c`), then AIV cores (core C + 2c + j = AIV j of cluster c, lane `AIV_{2c+j}`).
Cluster c is served by scheduler thread c % threads (`assign_cores_to_threads`,
scheduler_cold_path.cpp). Each core has a running slot and a pending slot (`CoreExecState`);
the pending task starts when the running one finishes.
"""

from __future__ import annotations

from .records import Shape


class Machine:
    """Cores, slots and ownership; `units(shape, thread)` lists what a block of `shape` occupies."""

    def __init__(self, clusters: int, threads: int) -> None:
        self.clusters = clusters
        self.threads = threads
        self.ncores = 3 * clusters
        self.running: list[int | None] = [None] * self.ncores
        self.pending: list[int | None] = [None] * self.ncores
        self.owner = [self.cluster_of(c) % threads for c in range(self.ncores)]
        self.kind = ["aic" if c < clusters else "aiv" for c in range(self.ncores)]
        self.thread_clusters = [[ci for ci in range(clusters) if ci % threads == t] for t in range(threads)]
        self._units: dict[tuple[Shape, int | None], list[tuple[int, ...]]] = {}
        for shape in (Shape.AIC, Shape.AIV, Shape.MIX):
            for t in (*range(threads), None):
                cl = range(clusters) if t is None else self.thread_clusters[t]
                self._units[(shape, t)] = [u for ci in cl for u in self.cluster_units(shape, ci)]
        self.idle_counts = {"aic": clusters, "aiv": 2 * clusters, "cluster": clusters}

    def cluster_of(self, core: int) -> int:
        """The cluster a core belongs to."""
        return core if core < self.clusters else (core - self.clusters) // 2

    def aic(self, ci: int) -> int:
        return ci

    def aivs(self, ci: int) -> tuple[int, int]:
        return self.clusters + 2 * ci, self.clusters + 2 * ci + 1

    def cluster_units(self, shape: Shape, ci: int) -> list[tuple[int, ...]]:
        """The placement units of `shape` inside cluster `ci` (MIX: the whole cluster)."""
        if shape is Shape.AIC:
            return [(ci,)]
        if shape is Shape.AIV:
            return [(a,) for a in self.aivs(ci)]
        return [(ci, *self.aivs(ci))]

    def units(self, shape: Shape, thread: int | None) -> list[tuple[int, ...]]:
        """All units of `shape` owned by `thread` (None: every thread), in cluster order."""
        return self._units[(shape, thread)]

    def lane(self, core: int) -> str:
        """simpler's swimlane lane name of a core: AIC_n or AIV_n."""
        return f"AIC_{core}" if core < self.clusters else f"AIV_{core - self.clusters}"

    def is_idle(self, unit: tuple[int, ...]) -> bool:
        """Every core of the unit has an empty running slot."""
        return all(self.running[c] is None for c in unit)

    def has_slot(self, unit: tuple[int, ...]) -> bool:
        """Every core of the unit has a free slot (running or pending) and at least one is busy."""
        return (all(self.running[c] is None or self.pending[c] is None for c in unit)
                and any(self.running[c] is not None for c in unit))

    def set_running(self, core: int, block: int | None) -> None:
        """Change a running slot, keeping the idle counters (AIC, AIV, whole clusters) current."""
        was = self.running[core] is None
        self.running[core] = block
        now = block is None
        if was == now:
            return
        delta = 1 if now else -1
        self.idle_counts[self.kind[core]] += delta
        ci = self.cluster_of(core)
        others = [c for c in (self.aic(ci), *self.aivs(ci)) if c != core]
        if all(self.running[c] is None for c in others):
            self.idle_counts["cluster"] += delta
