"""Semantic comparison of two task graphs in deps.json form (a spec's export or a capture).

Tasks are aligned in submit order (difflib's longest matching blocks) on a key: the task label
when both sides come from specs (`gate_proj.late[n=6,k=0]@L=1`), otherwise the kernel ids
(a dummy has none). Aligned tasks are compared field by field (kernel, block_num,
early_dispatch, scope, ring); in an unaligned stretch of a capture, tasks are paired in order
when both stretches are as long (same kernels, other blocks or regions), otherwise they are removed
and added; a removed and an added task with the same key are one task moved in the order. Edges are compared as multisets keyed by (aligned producer, aligned consumer, source,
argument): an edge only one side has is added or removed, a different entry count, flag set or
overlap class is a change. Edges of a removed or added task are implied by it and only counted.
Alloc producers (absent from tasks[]) are one producer, "alloc".

Every difference is grouped by what changed and where it is declared: (change, dispatch names,
detail), with its count, its count per layer and the spec span (`file:line:col`) of the task or
dep that declares it, taken from the side that has it (the new side for a change).
"""

from __future__ import annotations

import difflib
from collections import Counter, defaultdict
from collections.abc import Sequence

import attrs

from pgraph import records
from pgraph.backends.depsjson.export import TaskNote
from pgraph.backends.depsjson.model import DepsEdge, DepsGraph, DepsTask
from pgraph.source import Span

__all__ = ["Change", "DiffResult", "LayerRow", "Side", "diff"]

Slot = tuple[str, int]
ALLOC: Slot = ("alloc", 0)


@records.value
@attrs.frozen(repr=False, eq=False)
class Side:
    """One side of a comparison: its display name, graph and, for a spec, its notes and dep spans."""

    name: str
    graph: DepsGraph
    notes: dict[int, TaskNote] | None = None
    edge_spans: dict[tuple[int, int], Span] = attrs.field(factory=dict)


@records.value
@attrs.frozen(repr=False, eq=False)
class Change:
    """One group of differences: `kind` (task removed/added/changed, edge removed/added/changed),
    `what` (dispatch names and detail), how many, per layer (None: outside the layer loop),
    one example, the declaring span (None for a side without a spec) and the earliest position
    in the aligned submit order."""

    kind: str
    what: str
    count: int
    per_layer: dict[int | None, int]
    example: str
    span: Span | None
    first: int


@records.value
@attrs.frozen(repr=False, eq=False)
class LayerRow:
    """Counts of one layer (None: the entry's tasks outside the layer loop): compute tasks,
    dummies, SPMD blocks, explicit dep entries and distinct explicit (pred, succ) pairs whose
    consumer is in the layer."""

    tasks: int = 0
    dummies: int = 0
    blocks: int = 0
    entries: int = 0
    edges: int = 0


@records.value
@attrs.frozen(repr=False, eq=False)
class DiffResult:
    """Grouped changes (in aligned submit order of their first item), the first divergence,
    per-layer rows of both sides (empty without a spec side), edges implied by task changes."""

    changes: tuple[Change, ...]
    first: str | None
    layers_old: dict[int | None, LayerRow]
    layers_new: dict[int | None, LayerRow]
    implied_edges: int

    @property
    def same(self) -> bool:
        """True when no task or edge differs."""
        return not self.changes and not self.implied_edges


def _kernel_key(t: DepsTask) -> str:
    return "dummy" if t.is_dummy else "k" + ",".join(map(str, t.kernel_ids))


def _shape_key(t: DepsTask) -> str:
    """Kernel ids, blocks and argument regions (not tensor ids: a capture's addresses differ)."""
    args = ";".join(f"{a.type}:{a.region.start_offset}:{a.region.shape}:{a.region.strides}" for a in t.args)
    return f"{_kernel_key(t)}/{t.block_num}/{args}"


def _stem(note: TaskNote | None, t: DepsTask | None) -> str:
    if note is not None:
        return note.dispatch
    if t is None:
        return "alloc"
    return "dummy" if t.is_dummy else f"kernel {list(t.kernel_ids)}"


def _label(note: TaskNote | None, t: DepsTask) -> str:
    return note.label if note is not None else f"task {t.ring}:{t.local}"


class _Diff:
    def __init__(self, old: Side, new: Side) -> None:
        self.old, self.new = old, new
        self.by_label = old.notes is not None and new.notes is not None
        self.slot_old: dict[int, Slot] = {}
        self.slot_new: dict[int, Slot] = {}
        self.pos: dict[Slot, int] = {}
        self.layer: dict[Slot, int | None] = {}
        self.items: dict[tuple[str, str], list[tuple[int, int | None, str, Span | None]]] = defaultdict(list)
        self.implied = 0
        self.moved: set[int] = set()

    def note(self, side: Side, t: DepsTask) -> TaskNote | None:
        """The spec's note of `t`; for a capture task, a note of a spec task with its kernel ids
        (its dispatch name and span; the label names the capture task by ring:local)."""
        if side.notes is not None:
            return side.notes.get(t.task_id)
        if not self.__dict__.get("_by_kernel"):
            by: dict[str, TaskNote] = {}
            for other in (self.new, self.old):
                if other.notes is not None:
                    for ot in other.graph.tasks:
                        n = other.notes.get(ot.task_id)
                        if n is not None and not ot.is_dummy:
                            by.setdefault(_kernel_key(ot), n)
            self.__dict__["_by_kernel"] = by or {"": None}
        n = self.__dict__["_by_kernel"].get(_kernel_key(t))
        return None if n is None else attrs.evolve(n, label=f"task {t.ring}:{t.local}")

    def key(self, side: Side, t: DepsTask) -> str:
        if self.by_label:
            n = self.note(side, t)
            return n.label if n is not None else _shape_key(t)
        return _shape_key(t)

    def add(self, kind: str, what: str, pos: int, layer: int | None, example: str, span: Span | None) -> None:
        self.items[(kind, what)].append((pos, layer, example, span))

    def align(self) -> list[tuple[int | None, int | None]]:
        a, b = self.old.graph.tasks, self.new.graph.tasks
        ka = [self.key(self.old, t) for t in a]
        kb = [self.key(self.new, t) for t in b]
        pairs: list[tuple[int | None, int | None]] = []
        sm = difflib.SequenceMatcher(None, ka, kb, autojunk=False)
        for op, i1, i2, j1, j2 in sm.get_opcodes():
            if op == "equal" or (op == "replace" and i2 - i1 == j2 - j1 and not self.by_label
                                 and all(_kernel_key(a[i]) == _kernel_key(b[j])
                                         for i, j in zip(range(i1, i2), range(j1, j2), strict=True))):
                pairs.extend(zip(range(i1, i2), range(j1, j2), strict=True))
            elif op == "replace" and not self.by_label:  # pair same-kernel tasks inside the stretch
                sub = difflib.SequenceMatcher(None, [_kernel_key(t) for t in a[i1:i2]],
                                              [_kernel_key(t) for t in b[j1:j2]], autojunk=False)
                for sop, x1, x2, y1, y2 in sub.get_opcodes():
                    if sop == "equal":
                        pairs.extend(zip(range(i1 + x1, i1 + x2), range(j1 + y1, j1 + y2), strict=True))
                    else:
                        pairs.extend((i, None) for i in range(i1 + x1, i1 + x2))
                        pairs.extend((None, j) for j in range(j1 + y1, j1 + y2))
            else:
                pairs.extend((i, None) for i in range(i1, i2))
                pairs.extend((None, j) for j in range(j1, j2))
        # a task both sides submit, elsewhere in the order: moved (paired at its new position)
        loose: dict[str, list[int]] = defaultdict(list)
        for i, j in pairs:
            if j is None and i is not None:
                loose[ka[i]].append(i)
        moved: dict[int, int] = {}
        for i, j in pairs:
            if i is None and j is not None and loose.get(kb[j]):
                moved[j] = loose[kb[j]].pop(0)
        gone = set(moved.values())
        out: list[tuple[int | None, int | None]] = []
        for i, j in pairs:
            if j is None and i in gone:
                continue
            if i is None and j is not None and j in moved:
                out.append((moved[j], j))
                self.moved.add(j)
            else:
                out.append((i, j))
        return out

    def layer_of(self, side: Side, t: DepsTask) -> int | None:
        n = self.note(side, t)
        return n.layer if n is not None else None

    def run(self) -> DiffResult:
        a, b = self.old.graph.tasks, self.new.graph.tasks
        pairs = self.align()
        last_layer: int | None = None
        for pos, (i, j) in enumerate(pairs):
            slot: Slot = ("m", pos)
            ta = a[i] if i is not None else None
            tb = b[j] if j is not None else None
            if ta is not None and i is not None:
                self.slot_old[ta.task_id] = slot
            if tb is not None and j is not None:
                self.slot_new[tb.task_id] = slot
            self.pos[slot] = pos
            layers = [self.layer_of(s, t) for s, t in ((self.new, tb), (self.old, ta)) if t is not None
                      and s.notes is not None]
            layer = layers[0] if layers else (last_layer if self.old.notes or self.new.notes else None)
            self.layer[slot] = layer
            last_layer = layer
            if ta is None and tb is not None:
                n = self.note(self.new, tb)
                self.add("task added", _stem(n, tb), pos, layer, _label(n, tb), n.span if n else self._near(pairs, pos))
            elif tb is None and ta is not None:
                n = self.note(self.old, ta)
                self.add("task removed", _stem(n, ta), pos, layer, _label(n, ta), n.span if n else self._near(pairs, pos))
            elif ta is not None and tb is not None:
                if j in self.moved:
                    n = self.note(self.new, tb) or self.note(self.old, ta)
                    self.add("task moved", f"{_stem(n, tb)}: submit order", pos, layer, _label(n, tb),
                             n.span if n else None)
                self.compare_tasks(ta, tb, pos, layer)
        self.compare_edges()
        changes = []
        for (kind, what), rows in self.items.items():
            per: Counter[int | None] = Counter(layer for _, layer, _, _ in rows)
            first = min(rows, key=lambda r: r[0])
            changes.append(Change(kind, what, len(rows), dict(per), first[2], first[3], first[0]))
        changes.sort(key=lambda c: (c.first, c.kind, c.what))
        first_text = None
        if changes:
            c = changes[0]
            where = f" ({c.span.location()})" if c.span is not None else ""
            first_text = f"submit #{c.first}: {c.kind} {c.what} at {c.example}{where}"
        return DiffResult(tuple(changes), first_text, self.layer_rows(self.old, self.slot_old),
                          self.layer_rows(self.new, self.slot_new), self.implied)

    def _near(self, pairs: Sequence[tuple[int | None, int | None]], pos: int) -> Span | None:
        """The span of the nearest earlier (else later) task that a spec side names."""
        order = [*range(pos - 1, -1, -1), *range(pos + 1, len(pairs))]
        for k in order:
            i, j = pairs[k]
            for side, idx in ((self.new, j), (self.old, i)):
                if idx is not None and side.notes is not None:
                    n = side.notes.get(side.graph.tasks[idx].task_id)
                    if n is not None:
                        return n.span
        return None

    def compare_tasks(self, ta: DepsTask, tb: DepsTask, pos: int, layer: int | None) -> None:
        na, nb = self.note(self.old, ta), self.note(self.new, tb)
        note = nb or na
        stem = _stem(note, tb)
        span = note.span if note is not None else None
        label = _label(note, tb)
        if self.by_label and na is not None and nb is not None:
            ka, kb = na.kernel or "dummy", nb.kernel or "dummy"
        else:
            ka, kb = _kernel_key(ta), _kernel_key(tb)
        fields = [("kernel", ka, kb), ("block_num", ta.block_num, tb.block_num),
                  ("early_dispatch", ta.early_dispatch, tb.early_dispatch), ("scope", ta.scope, tb.scope),
                  ("ring", ta.ring, tb.ring)]
        for name, x, y in fields:
            if x != y:
                self.add("task changed", f"{stem}: {name} {_show(x)} -> {_show(y)}", pos, layer, label, span)

    def edge_table(self, side: Side, slots: dict[int, Slot]) -> dict[tuple[Slot, Slot, str, int], list[DepsEdge]]:
        out: dict[tuple[Slot, Slot, str, int], list[DepsEdge]] = defaultdict(list)
        for e in side.graph.edges:
            pred = slots.get(e.pred, ALLOC)
            out[(pred, slots[e.succ], e.source, e.arg)].append(e)
        return out

    def compare_edges(self) -> None:
        ea = self.edge_table(self.old, self.slot_old)
        eb = self.edge_table(self.new, self.slot_new)
        task_at_old = {s: tid for tid, s in self.slot_old.items()}
        task_at_new = {s: tid for tid, s in self.slot_new.items()}
        for key in sorted(set(ea) | set(eb), key=lambda k: (self.pos[k[1]], self.pos.get(k[0], -1), k[2], k[3])):
            pred, succ, source, arg = key
            xs, ys = ea.get(key, []), eb.get(key, [])
            ends = (pred, succ)
            if any(s != ALLOC and (s not in task_at_old or s not in task_at_new) for s in ends):
                self.implied += abs(len(xs) - len(ys)) if xs and ys else len(xs) + len(ys)
                continue
            side, edges = (self.new, ys) if ys else (self.old, xs)
            slots_rev = task_at_new if ys else task_at_old
            names = self.edge_names(side, slots_rev, pred, succ, source, arg)
            span = self.edge_span(side, edges[0])
            pos, layer = self.pos[succ], self.layer[succ]
            example = self.edge_example(side, slots_rev, pred, succ)
            if not ys:
                self.add("edge removed", names, pos, layer, example, span)
            elif not xs:
                self.add("edge added", names, pos, layer, example, span)
            else:
                if len(xs) != len(ys):
                    self.add("edge changed", f"{names}: entries {len(xs)} -> {len(ys)}", pos, layer, example, span)
                fa, fb = sorted({e.flags for e in xs}), sorted({e.flags for e in ys})
                if fa != fb:
                    self.add("edge changed", f"{names}: flags {_flags(fa)} -> {_flags(fb)}", pos, layer, example, span)
                oa, ob = sorted({e.overlap or "" for e in xs}), sorted({e.overlap or "" for e in ys})
                if oa != ob:
                    self.add("edge changed", f"{names}: overlap {'/'.join(oa)} -> {'/'.join(ob)}", pos, layer,
                             example, span)

    def edge_names(self, side: Side, slots_rev: dict[Slot, int], pred: Slot, succ: Slot, source: str,
                   arg: int) -> str:
        np_, tp = self._lookup(side, slots_rev, pred)
        ns, ts = self._lookup(side, slots_rev, succ)
        where = "" if arg < 0 else f", arg {arg}"
        return f"{_stem(np_, tp)} -> {_stem(ns, ts)} ({source}{where})"

    def edge_example(self, side: Side, slots_rev: dict[Slot, int], pred: Slot, succ: Slot) -> str:
        np_, tp = self._lookup(side, slots_rev, pred)
        ns, ts = self._lookup(side, slots_rev, succ)
        left = "alloc" if tp is None else _label(np_, tp)
        assert ts is not None
        return f"{left} -> {_label(ns, ts)}"

    def edge_span(self, side: Side, e: DepsEdge) -> Span | None:
        if side.notes is None:
            other = self.old if side is self.new else self.new
            slots = self.slot_new if side is self.new else self.slot_old
            rev = {s: tid for tid, s in (self.slot_old if other is self.old else self.slot_new).items()}
            tid = rev.get(slots[e.succ])
            if other.notes is not None and tid is not None:
                pred = rev.get(slots.get(e.pred, ALLOC))
                if e.source == "explicit" and pred is not None and (pred, tid) in other.edge_spans:
                    return other.edge_spans[(pred, tid)]
                n = other.notes.get(tid)
                return n.span if n is not None else None
            return None
        if e.source == "explicit" and (e.pred, e.succ) in side.edge_spans:
            return side.edge_spans[(e.pred, e.succ)]
        n = side.notes.get(e.succ)
        return n.span if n is not None else None

    def _lookup(self, side: Side, slots_rev: dict[Slot, int], slot: Slot) -> tuple[TaskNote | None, DepsTask | None]:
        if slot == ALLOC:
            return None, None
        tid = slots_rev[slot]
        index = self._index(side)
        note = side.notes.get(tid) if side.notes else None
        if note is None:
            other, rev = (self.old, self.slot_old) if side is self.new else (self.new, self.slot_new)
            if other.notes is not None:
                otid = next((k for k, v in rev.items() if v == slot), None)
                note = other.notes.get(otid) if otid is not None else None
        return note, side.graph.tasks[index[tid]]

    def _index(self, side: Side) -> dict[int, int]:
        cache = self.__dict__.setdefault("_index_cache", {})
        if id(side) not in cache:
            cache[id(side)] = side.graph.task_index()
        return cache[id(side)]  # type: ignore[no-any-return]

    def layer_rows(self, side: Side, slots: dict[int, Slot]) -> dict[int | None, LayerRow]:
        if self.old.notes is None and self.new.notes is None:
            return {}
        rows: dict[int | None, dict[str, int]] = defaultdict(Counter)
        for t in side.graph.tasks:
            r = rows[self.layer[slots[t.task_id]]]
            r["dummies" if t.is_dummy else "tasks"] += 1
            r["blocks"] += t.block_num
        pairs: set[tuple[int, int]] = set()
        for e in side.graph.edges:
            if e.source != "explicit":
                continue
            r = rows[self.layer[slots[e.succ]]]
            r["entries"] += 1
            if (e.pred, e.succ) not in pairs:
                pairs.add((e.pred, e.succ))
                r["edges"] += 1
        return {k: LayerRow(**v) for k, v in rows.items()}


def _show(v: object) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


def _flags(fs: list[tuple[str, ...]]) -> str:
    return "/".join("+".join(f) or "none" for f in fs)


def diff(old: Side, new: Side) -> DiffResult:
    """Compare two sides (see the module docstring)."""
    return _Diff(old, new).run()
