"""The state of one expansion: the program, its window, what the expansion met, its fast paths.

`ExpansionState` is passed explicitly to the expander's functions (`pgraph.expand.tasks`,
`pgraph.expand.edges`); it holds what they read (the program, the window, the loop tables),
what they record besides instances and edges (the issues met, once per source position, and
the work done, in the units of `pgraph.expand.work`) and the switches of two fast paths of
docs/architecture.md ("Fast paths"): `compiled`, the region and selection functions of
`pgraph.expand.compiled` beside the `Evaluator`, and `memo`, the expansion's memo tables (each
compiled function made once per region and shape or per dep; the tile maps and producers'
iterations of `pgraph.expand.edges.TileMaps`) beside making each again where it is needed.
Both are on unless `PGRAPH_REFERENCE=1` (`pgraph.fastpath.reference_mode`), which runs the
references; tests/unit/test_fast_paths_expand.py holds the ways equal.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pgraph.expand.compiled import BoxFn, SelFn, region_function, safe_values, selection_function
from pgraph.expand.window import make_window
from pgraph.expr import EvalError
from pgraph.fastpath import reference_mode
from pgraph.ir import program as ir
from pgraph.ir.instances import EvalIssue, Issue, RegionIssue
from pgraph.ir.queries import Box, BufferKey, Evaluator, RegionError, Window, resolve_buffer
from pgraph.kinds import NodeKind, Storage
from pgraph.source import Span


class ExpansionState:
    """What the expansion of one program under one window reads, records and caches.

    `compiled` (the compiled region and selection functions) and `memo` (the memo tables,
    `memo_table`) default to on, off under `PGRAPH_REFERENCE=1`; a test may set either.
    `work` counts blocks, regions evaluated and dep tiles scanned (`pgraph.expand.work.
    expansion_work` predicts it); `issues` are what the expansion could not evaluate, in the
    order met, one per (kind, source position).
    """

    def __init__(self, program: ir.Program, full: bool = False, window: Window | None = None, *,
                 compiled: bool | None = None, memo: bool | None = None) -> None:
        self.p = program
        self.full = full
        self.window = window or make_window(program, full)
        self.compiled = not reference_mode("compiled-regions") if compiled is None else compiled
        self.memo = not reference_mode("expander-memo") if memo is None else memo
        self.ev = Evaluator()
        self.loops = {lp.id: lp for lp in program.loops}
        self.scope_loops = scope_loops(program)
        #: allocation group -> its tensors, in declaration order
        self.alloc_groups: dict[ir.AllocKey, list[ir.Tensor]] = {}
        for t in program.tensors.values():
            if t.storage is Storage.ALLOC and t.scope is not None and not t.created:
                self.alloc_groups.setdefault(ir.alloc_key(program, t), []).append(t)
        #: allocation group -> the loops enclosing its site, outermost first
        self.site_loops: dict[ir.AllocKey, tuple[int, ...]] = {}
        #: loop id -> the loops nested in it
        self.nested_loops: dict[int, set[int]] = {lp.id: set() for lp in program.loops}
        self._find_sites(program.tree, ())
        self.issues: list[Issue] = []
        self._reported: set[tuple[str, str, int, int]] = set()
        self.work = 0
        self._memos: list[dict[Any, Any]] = []
        #: (region id, shape) -> (the region, kept alive; its compiled box function)
        self._box_functions: dict[tuple[int, tuple[int, ...]], tuple[ir.RegionRef, BoxFn | None]] = self.memo_table()
        #: dep id -> (the dep, kept alive; its compiled selection)
        self._selections: dict[int, tuple[ir.DepRef, SelFn | None]] = self.memo_table()
        #: `pgraph.expand.tasks.task_shape`'s plans: per dispatch id, the tensor names it
        #: resolves; per (dispatch id, tensor names), what its tasks evaluate but the buffers;
        #: per (loop nest, iteration, None), the buffers of tensor names
        self.dispatch_plans: dict[Any, Any] = self.memo_table()

    def _find_sites(self, node: ir.Node, loops: tuple[int, ...]) -> None:
        if node.kind is NodeKind.ALLOC:
            self.site_loops[node.ident] = loops  # type: ignore[index]
        inner = (*loops, node.ident) if node.kind is NodeKind.LOOP else loops
        if node.kind is NodeKind.LOOP:
            for outer in loops:
                self.nested_loops[outer].add(node.ident)  # type: ignore[arg-type]
        for c in node.children:
            self._find_sites(c, inner)  # type: ignore[arg-type]

    def memo_table(self) -> dict[Any, Any]:
        """A new memo table of this expansion (filled only when `memo` is on: `memos_used`)."""
        table: dict[Any, Any] = {}
        self._memos.append(table)
        return table

    def memos_used(self) -> bool:
        """True when some memo table holds an entry."""
        return any(self._memos)

    # ---- the window ----
    def iterations(self, lid: int) -> Sequence[tuple[int, int]]:
        """(iteration value, weight) pairs expanded for loop `lid`."""
        return self.window.iterations[lid]

    def last_iteration(self, lid: int) -> int | None:
        """The last expanded iteration of loop `lid` (None: no iteration)."""
        return self.window.last(lid)

    def loop_weights(self) -> dict[int, dict[int, int]]:
        """Loop id -> expanded iteration -> how many iterations it stands for."""
        return {lid: dict(its) for lid, its in self.window.iterations.items()}

    def windowed(self) -> frozenset[int]:
        """The loops expanded as a two-iteration window."""
        return frozenset(lid for lid, its in self.window.iterations.items() if any(w > 1 for _, w in its))

    # ---- buffers ----
    def buffer(self, name: str, iters_by_loop: dict[int, int]) -> tuple[str, BufferKey]:
        """Resolve a tensor or carry alias to (tensor name, buffer instance key) under this window."""
        return resolve_buffer(self.p, name, iters_by_loop, self.last_iteration)

    # ---- what the expansion met ----
    def issue(self, issue: Issue, key: tuple[str, Span]) -> None:
        """Record an issue once per (kind, source position), however many instances hit it."""
        k = (key[0], key[1].filename, key[1].line, key[1].col)
        if k in self._reported:
            return
        self._reported.add(k)
        self.issues.append(issue)

    def eval_issue(self, where: str, e: EvalError) -> None:
        """An expression that fails to evaluate, once per source position (not per instance)."""
        self.issue(EvalIssue(e.span, where, e.message), ("eval", e.span))

    def region_box(self, region: ir.RegionRef, shape: tuple[int, ...], env: dict[str, int], where: str) -> Box | None:
        """The box of `region` at `env` by the Evaluator, or None (an issue recorded) when it is
        malformed there."""
        try:
            return self.ev.region_box(region, shape, env)
        except RegionError as e:
            self.issue(RegionIssue(e.kind, region.span, where, region.tensor, e.lo, e.hi, e.size),
                       (e.kind, region.span))
        except EvalError as e:
            self.eval_issue(where, e)
        return None

    # ---- the compiled fast path ----
    def fast(self, d: ir.Dispatch) -> bool:
        """True when `d`'s regions and selections run compiled (pgraph.expand.compiled): the fast
        path is on and `d`'s index values are small enough for it."""
        if not self.compiled:
            return False
        ranges = [(a.lo, a.hi) for a in (*d.task_axes, *d.block_axes)]
        ranges += [(it.lo, it.hi) for acc in d.accesses for it in acc.items]
        ranges += [(self.loops[lid].axis.lo, self.loops[lid].axis.hi) for lid in d.loops]
        return safe_values(ranges)

    def box_function(self, region: ir.RegionRef, shape: tuple[int, ...], fast: bool) -> BoxFn | None:
        """The compiled box function of `region` on `shape` (None: the Evaluator only)."""
        if not fast:
            return None
        if not self.memo:
            return region_function(region, shape)
        k = (id(region), shape)
        got = self._box_functions.get(k)
        if got is None:
            got = self._box_functions[k] = (region, region_function(region, shape))
        return got[1]

    def selection_function(self, d: ir.Dispatch, dep: ir.DepRef, ts: ir.TileSet) -> SelFn | None:
        """The compiled selection of `dep` (None: the Evaluator only)."""
        got = self._selections.get(id(dep)) if self.memo else None
        if got is None:
            got = (dep, selection_function(dep.sels, ts.axes) if self.fast(d) else None)
            if self.memo:
                self._selections[id(dep)] = got
        return got[1]

    def selection(self, d: ir.Dispatch, dep: ir.DepRef, ts: ir.TileSet, env: dict[str, int]) -> list[range]:
        """`Evaluator.selection` of `dep` at `env`, through its compiled function when it has one."""
        fn = self.selection_function(d, dep, ts)
        if fn is not None:
            try:
                return fn(env)
            except Exception:  # noqa: BLE001 - the Evaluator gives the exact answer or error
                pass
        return self.ev.selection(dep.sels, ts.axes, env)


def scope_loops(p: ir.Program) -> dict[int, tuple[int, ...]]:
    """Scope id -> the loops whose iterations make separate instances of that scope."""
    body_of = {lp.body_scope: lp.id for lp in p.loops if lp.body_scope is not None}
    out: dict[int, tuple[int, ...]] = {}
    for s in p.scopes:
        parent = out[s.parent] if s.parent is not None else ()
        out[s.id] = (*parent, body_of[s.id]) if s.id in body_of else parent
    return out


def index_label(axes: tuple[ir.IAxis, ...], index: tuple[int, ...]) -> str:
    """`[n=3,k=1]` of a task or block index ('' without axes)."""
    if not axes:
        return ""
    return "[" + ",".join(f"{a.var}={v}" for a, v in zip(axes, index)) + "]"


def iters_label(p: ir.Program, loops: tuple[int, ...], iters: tuple[int, ...]) -> str:
    """`@L=2` of the loop iterations of an instance ('' outside loops)."""
    if not loops:
        return ""
    return "@" + ",".join(f"{p.loops[lid].axis.var}={v}" for lid, v in zip(loops, iters))
