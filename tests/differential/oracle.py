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
`uncovered_reads` is the definite-writes oracle (PG122) over the same inputs.
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


def _external(buffer: tuple[object, ...]) -> bool:
    return bool(buffer) and buffer[0] == "ext"


def uncovered_reads(tasks: list[ModelTask], node_of: list[int], reach: list[set[int]]) -> set[int]:
    """The tasks (indices) that read an element of an allocated buffer that no earlier task
    writes before them on every legal order (docs/rules.md PG122), element by element:

    - a read or an atomic add reads its elements, a write or an atomic add writes them;
    - an element is covered when a task submitted earlier that reaches the reader writes it;
    - an element an earlier task writes without an order is the race's, not this rule's (a
      write against anything, an atomic add against a read: the pairs `races` reports);
    - external buffers are inputs; a read implied by an `inout` parameter on a buffer the task
      reads no other way may be scratch the kernel writes first, and is not checked.
    """
    out: set[int] = set()
    for ti, t in enumerate(tasks):
        accs = [a for blk in t.blocks for a in blk]
        other = {a.buffer for a in accs if a.mode == "read" and not a.inout}
        scratch = {a.buffer for a in accs if a.mode == "read" and a.inout} - other
        for a in accs:
            if a.mode not in ("read", "atomic") or _external(a.buffer) or not a.elements:
                continue
            if a.mode == "read" and a.buffer in scratch:
                continue
            left = set(a.elements)
            for ui in range(ti):
                if not left:
                    break
                ordered = node_of[ti] in reach[node_of[ui]]
                for blk in tasks[ui].blocks:
                    for w in blk:
                        if w.buffer != a.buffer or w.mode not in ("write", "atomic"):
                            continue
                        if ordered or w.mode == "write" or a.mode == "read":
                            left -= w.elements
            if left:
                out.add(ti)
                break
    return out
