"""The race oracle: brute force over concrete element sets and the recorded runtime's edges.

Input: the model's compute tasks (`programs.run_model`: every block's accesses as sets of flat
element indices of a buffer) and the happens-before relation of the recorded run (the edges
the C++ recording runtime saw, closed transitively here with a plain BFS). A race is two
accesses of one buffer that share an element, at least one writing and not both atomic adds,
made by two blocks that nothing orders: blocks of two tasks with no path between them, or two
blocks of one SPMD task (they run at once). Between blocks of one task an indirect access is
not a race: the index tensor is what keeps them apart (docs/language.md §11.4, PG102); nor is
anything between blocks of a `sync_start` grid, which launch together and synchronise inside
the kernel (the attention extern's SyncAll; docs/rules.md PG102).
Nothing here imports pgraph.
"""

from __future__ import annotations

from collections import defaultdict

from tests.differential.programs import Access, ModelTask


def reachability(n: int, edges: set[tuple[int, int]]) -> list[set[int]]:
    """For each node 0..n-1 the set of nodes reachable from it (edges u -> v with u < v)."""
    succ: dict[int, list[int]] = defaultdict(list)
    for u, v in edges:
        succ[u].append(v)
    reach: list[set[int]] = [set() for _ in range(n)]
    for u in range(n - 1, -1, -1):  # edges go forward in submission order: later nodes are done first
        for v in succ[u]:
            reach[u].add(v)
            reach[u] |= reach[v]
    return reach


def _conflict(a: Access, b: Access) -> bool:
    if a.buffer != b.buffer:
        return False
    if a.mode == "read" and b.mode == "read":
        return False
    if a.mode == "atomic" and b.mode == "atomic":
        return False
    return not a.elements.isdisjoint(b.elements)


def races(tasks: list[ModelTask], node_of: list[int], reach: list[set[int]]) -> list[tuple[str, str, str]]:
    """Every racing pair as (label a, label b, why); `node_of[i]` is task i's node in `reach`."""
    out = []
    flat: list[tuple[int, int, Access]] = [(ti, bi, acc) for ti, t in enumerate(tasks)
                                           for bi, blk in enumerate(t.blocks) for acc in blk]
    by_buffer: dict[object, list[tuple[int, int, Access]]] = defaultdict(list)
    for entry in flat:
        by_buffer[entry[2].buffer].append(entry)
    for entries in by_buffer.values():
        for i, (ta, ba, aa) in enumerate(entries):
            for tb, bb, ab in entries[i + 1:]:
                if not _conflict(aa, ab):
                    continue
                if ta == tb:
                    if ba == bb or aa.indirect or ab.indirect or tasks[ta].sync_start:
                        continue
                    out.append((tasks[ta].label, tasks[tb].label, f"blocks {ba} and {bb} of one task"))
                    continue
                u, v = sorted((node_of[ta], node_of[tb]))
                if v not in reach[u]:
                    out.append((tasks[ta].label, tasks[tb].label, f"{aa.mode}/{ab.mode} of {aa.buffer}"))
    return out
