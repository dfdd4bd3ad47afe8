"""Scale (issue 12): the race sweep, the bounded Reach, the work estimate, window = --full, the
saved parser tables and the bench spec generators, each against an independent implementation.

- races: `conflicting_keys` against every pair tested (random boxes, views, kinds), and the
  whole `find_races` against the pre-sweep algorithm (all writer pairs, ancestor bitsets);
- Reach: the search mode (large graphs) against the bitsets on random DAGs;
- PG031: `expansion_work` (from the Program) equals `ExpansionState.work` (what expanding did);
- windowed plans equal `--full` plans: diagnostics, counts, rings, TensorMap;
- grammar/pgl.lalr: built from grammar/pgl.lark (digest, canonical LALR tables, parse trees);
- bench/specs: the committed specs are the generators' output and submit the history's counts.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import itertools
import random
import sys
from collections import defaultdict
from pathlib import Path
from types import ModuleType
from typing import Any
from unittest import mock

import lark
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pgraph.diagnostics import DiagnosticBag
from pgraph.expand.expander import build
from pgraph.expand.state import ExpansionState
from pgraph.expand.window import make_window
from pgraph.expand.work import MAX_EXPANSION_WORK, expansion_work
from pgraph.frontend import parser as pgl_parser
from pgraph.ir.instances import overlap
from pgraph.kinds import AccessKind
from pgraph.pipeline import Options, compile_program, plan_program, run_until
from pgraph.plan import races as races_module
from pgraph.plan.base import Plan
from pgraph.plan.races import conflicting_keys, conflicts, find_races, touches_by_buffer
from pgraph.plan.reach import Reach, ancestors
from pgraph.plan.rings import RingTable
from tests.conftest import HEAD_SPEC, ROOT, SPECS, VARIANT_762

BENCH_SPECS = ROOT / "bench" / "specs"


def _module(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH_SPECS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


prefill = _module("prefill")
stress = _module("stress")


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / f"{name}.pgl"
    path.write_text(text, encoding="utf-8")
    return path


# ---- races: the sweep against every pair ---------------------------------------------------

class _T:
    def __init__(self, shape: tuple[int, ...]) -> None:
        self.shape = shape


class _P:
    """Just enough of a Program for `overlap`: a tensor and a view of the same buffer."""

    tensors = {"a": _T((8, 12)), "v": _T((4, 24)), "s": _T(())}


def _brute_pairs(touches: list[tuple[int, AccessKind, Any, str]]) -> set[tuple[int, int]]:
    out = set()
    for (na, ka, ba, ta), (nb, kb, bb, tb) in itertools.combinations(touches, 2):
        if na == nb or (ka is AccessKind.READ and kb is AccessKind.READ):
            continue
        if ka is AccessKind.ATOMIC and kb is AccessKind.ATOMIC:
            continue
        if overlap(ba, ta, bb, tb, _P()):  # type: ignore[arg-type]
            out.add((min(na, nb), max(na, nb)))
    return out


@st.composite
def _touches(draw: st.DrawFn) -> list[tuple[int, AccessKind, Any, str]]:
    out = []
    for _ in range(draw(st.integers(1, 40))):
        name = draw(st.sampled_from(("a", "a", "a", "v")))
        shape = _P.tensors[name].shape
        box = []
        for n in shape:
            lo = draw(st.integers(0, n))
            box.append((lo, draw(st.integers(lo, n))))  # empty sides too
        kind = draw(st.sampled_from(list(AccessKind)))
        out.append((draw(st.integers(0, 15)), kind, tuple(box), name))
    return out


def conflicting_pairs(touches: list[Any], p: Any, numpy: bool | None = None) -> set[tuple[int, int]]:
    """`conflicting_keys` decoded: the instance pairs (a, b), a < b."""
    return {(int(k) >> 32, int(k) & 0xFFFFFFFF) for k in conflicting_keys(touches, p, numpy)}


@settings(max_examples=150, deadline=None, derandomize=True, database=None)
@given(touches=_touches())
def test_sweep_finds_exactly_the_overlapping_conflicting_pairs(touches) -> None:
    """With the first two dimensions swept (few touches) and with the dimensions chosen by
    their overlap (SWEEP_CHOICE_TOUCHES lowered to 0)."""
    assert conflicting_pairs(touches, _P(), numpy=False) == _brute_pairs(touches)  # type: ignore[arg-type]
    with mock.patch.object(races_module, "SWEEP_CHOICE_TOUCHES", 0):
        assert conflicting_pairs(touches, _P(), numpy=False) == _brute_pairs(touches)  # type: ignore[arg-type]


@settings(max_examples=150, deadline=None, derandomize=True, database=None)
@given(touches=_touches())
def test_numpy_pairs_find_exactly_the_overlapping_conflicting_pairs(touches) -> None:
    """The NumPy products (big buffers) against every pair tested, in small chunks too."""
    assert conflicting_pairs(touches, _P(), numpy=True) == _brute_pairs(touches)  # type: ignore[arg-type]
    with mock.patch.object(races_module, "_CHUNK", 3):
        assert conflicting_pairs(touches, _P(), numpy=True) == _brute_pairs(touches)  # type: ignore[arg-type]


def test_numpy_pairs_past_int64_fall_back_to_the_sweep() -> None:
    """A box coordinate past int64 (a tensor of 2**70 rows) cannot go into a NumPy array: the
    sweep pairs that name instead, with the same answer as every pair tested."""
    big = 2**70

    class _Huge:
        tensors = {"h": _T((2 * big, 4))}

    touches = [(0, AccessKind.WRITE, ((big, big + 8), (0, 4)), "h"), (1, AccessKind.READ, ((big + 4, big + 6), (0, 2)), "h"),
               (2, AccessKind.READ, ((0, 8), (0, 4)), "h")]
    assert conflicting_pairs(touches, _Huge(), numpy=True) == {(0, 1)}  # type: ignore[arg-type]


@pytest.mark.parametrize("numpy", [False, True])
def test_sweep_rank0_tensor(numpy: bool) -> None:
    touches = [(0, AccessKind.WRITE, (), "s"), (1, AccessKind.READ, (), "s"), (2, AccessKind.READ, (), "s")]
    assert conflicting_pairs(touches, _P(), numpy=numpy) == {(0, 1), (0, 2)}  # type: ignore[arg-type]


def _old_races(plan: Plan, with_buffer: bool = False) -> list[Any]:
    """The race rule before the sweep: every writer against every other instance of a buffer,
    the first conflicting accesses in order, ordering by ancestor bitsets of the whole graph."""
    g = plan.graph
    anc = [0] * len(g.instances)
    for v in range(len(g.instances)):
        for u in g.pred[v]:
            anc[v] |= anc[u] | (1 << u)
    per_buf: dict[Any, dict[int, list[Any]]] = defaultdict(lambda: defaultdict(list))
    for node, blocks in g.blocks.items():
        seen: set[Any] = set()
        for block in blocks:
            for kind, items in block.items():
                for tensor, key, box, _ in items:
                    if (kind, box, tensor) not in seen:
                        seen.add((kind, box, tensor))
                        per_buf[key][node].append((kind, box, tensor))
    out = []
    for _key, per_node in sorted(per_buf.items(), key=lambda kv: str(kv[0])):
        nodes = sorted(per_node)
        writers = {n for n in nodes if any(k is not AccessKind.READ for k, _, _ in per_node[n])}
        pairs = sorted({(min(w, n), max(w, n)) for w in writers for n in nodes if n != w})
        for a, b in pairs:
            hit = next(((ta, tb) for ta in per_node[a] for tb in per_node[b]
                        if not (ta[0] is tb[0] and ta[0] in (AccessKind.READ, AccessKind.ATOMIC))
                        and overlap(ta[1], ta[2], tb[1], tb[2], plan.program)), None)
            if hit is None or anc[b] >> a & 1 or anc[a] >> b & 1:
                continue
            out.append((a, b, str(hit[0]), str(hit[1]), _key) if with_buffer else (a, b, str(hit[0]), str(hit[1])))
    return out


def _bounded(plan: Plan, old: list[Any], new: list[Any], listed: bool) -> None:
    """`new` (find_races with its bounded witnesses) against `old` (every race): in the same order
    (buffer, then pair); per (buffer, earlier dispatch, later dispatch) every race when there are
    at most RACE_WITNESSES, else RACE_WITNESSES + 1 of them (the first ones when the buffer's
    pairs are listed, any when `race_frontier` found them)."""
    k = races_module.RACE_WITNESSES
    rank = {key: i for i, key in enumerate(sorted({r[4] for r in old}, key=str))}
    assert [r[4] for r in new] == sorted((r[4] for r in new), key=lambda key: rank[key])
    groups: dict[Any, tuple[list[Any], list[Any]]] = defaultdict(lambda: ([], []))
    inst = plan.graph.instances
    for side, rows in ((0, old), (1, new)):
        for r in rows:
            groups[(r[4], inst[r[0]].dispatch, inst[r[1]].dispatch)][side].append(r)
    for key, (all_, kept) in groups.items():
        if len(all_) <= k or listed:
            assert kept == all_[:k + 1], key
        else:
            assert len(kept) == k + 1 and set(kept) <= set(all_), key


def _new_races(plan: Plan, bitset_nodes: int | None = None) -> list[Any]:
    out = []
    for r in find_races(plan, ancestors(plan, bitset_nodes)):
        c = r.conflict
        out.append((c.first, c.second, str((c.first_kind, c.first_box, c.first_tensor)),
                    str((c.second_kind, c.second_box, c.second_tensor)), r.buffer))
    return out


def _racy_prefill(tmp_path: Path) -> Path:
    """The 2-layer phased prefill with deps cut: silu no longer waits on `up`, attention on
    earlier row tiles' KV appends (causal reads of rows another task writes, unordered)."""
    c = dataclasses.replace(prefill.PHASED, name="racy", layers=2)
    text = prefill.generate(c).replace("deps(gate[t, n, *], up[t, n, *])", "deps(gate[t, n, *])")
    text = text.replace("deps(rope_kv[0..t+1, g])", "deps(rope_kv[t, g])")
    return _write(tmp_path, "racy", text)


@pytest.mark.parametrize("case", ["decode-full-2", "racy-prefill", "racy-prefill-full"])
def test_races_equal_the_old_algorithm(case: str, tmp_path: Path) -> None:
    if case == "decode-full-2":
        path, opts = HEAD_SPEC, Options(layers=2, full=True)
    else:
        path, opts = _racy_prefill(tmp_path), Options(full=case.endswith("full"))
    bag = DiagnosticBag()
    st_ = run_until(path, opts, bag, "graph")
    assert st_.graph is not None
    old = _old_races(Plan(st_.program, st_.graph, bag), with_buffer=True)  # type: ignore[arg-type]
    # the default split, every buffer listed, every buffer through race_frontier
    for limit in (races_module.PAIR_LIMIT, 1 << 62, -1):
        with mock.patch.object(races_module, "PAIR_LIMIT", limit):
            plan = Plan(st_.program, st_.graph, bag)  # type: ignore[arg-type]
            _bounded(plan, old, _new_races(plan), listed=limit > 1 << 61)
            plan = Plan(st_.program, st_.graph, bag)  # type: ignore[arg-type]
            _bounded(plan, old, _new_races(plan, bitset_nodes=0), listed=limit > 1 << 61)  # Reach's search mode
    if case != "decode-full-2":
        assert old, "the cut deps must leave races"


def test_racy_prefill_reports_pg100(tmp_path: Path) -> None:
    _plan, bag = plan_program(_racy_prefill(tmp_path), Options())
    assert {d.code for d in bag.items if d.level.value == "error"} == {"PG100"}


# ---- Reach: bounded searches against bitsets ------------------------------------------------

@st.composite
def _dags(draw: st.DrawFn) -> tuple[list[list[int]], list[list[int]]]:
    n = draw(st.integers(1, 40))
    succ: list[list[int]] = [[] for _ in range(n)]
    pred: list[list[int]] = [[] for _ in range(n)]
    for v in range(1, n):
        for u in sorted(draw(st.sets(st.integers(0, v - 1), max_size=4))):
            succ[u].append(v)
            pred[v].append(u)
    for adj in succ:
        adj.sort()
    return succ, pred


def _bitsets(pred: list[list[int]]) -> list[int]:
    anc = [0] * len(pred)
    for v, ps in enumerate(pred):
        for u in ps:
            anc[v] |= anc[u] | (1 << u)
    return anc


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(dag=_dags(), seed=st.integers(0, 1000))
def test_reach_search_equals_bitsets(dag, seed: int) -> None:
    succ, pred = dag
    n = len(succ)
    bits, search = Reach(succ, pred, _bitsets(pred)), Reach(succ, pred)
    pairs = [(a, b) for a in range(n) for b in range(a + 1, n)]
    random.Random(seed).shuffle(pairs)
    assert search.ordered_pairs(pairs) == bits.ordered_pairs(pairs)
    if pairs:  # the NumPy batch (races of a big graph) agrees too
        import numpy as np

        first = np.array([a for a, _ in pairs], dtype=np.int64)
        second = np.array([b for _, b in pairs], dtype=np.int64)
        assert search.ordered_mask(first, second).tolist() == bits.ordered_pairs(pairs)
    for a, b in pairs[:50]:
        assert search.before(a, b) == bits.before(a, b) and search.before(b, a) == bits.before(b, a)
    for v in range(n):
        assert search.implied_predecessors(v) == bits.implied_predecessors(v)
        assert search.related(v) == bits.related(v) == {u for u in range(n) if u != v and bits.ordered(u, v)}


# ---- PG031: the estimate is what the expansion does ----------------------------------------

def _work(path: Path, opts: Options) -> tuple[int, int]:
    bag = DiagnosticBag()
    program = compile_program(path, opts, bag)
    assert program is not None, [d.message for d in bag.items]
    window = make_window(program, opts.full)
    st = ExpansionState(program, opts.full, window)
    build(st)
    return sum(expansion_work(program, window).values()), st.work


SMALL_PREFILL = [dataclasses.replace(prefill.PHASED, name="p31", layers=3),
                 dataclasses.replace(prefill.FINE, name="p351", tm=64, layers=3)]


@pytest.mark.parametrize("full", [False, True])
def test_work_estimate_is_the_expansion_work(full: bool, tmp_path: Path) -> None:
    cases = [(HEAD_SPEC, Options(layers=3, full=full)), (VARIANT_762, Options(layers=3, full=full))]
    if not full:
        cases.append((HEAD_SPEC, Options(config="small")))
    cases += [(_write(tmp_path, c.name, prefill.generate(c)), Options(full=full)) for c in SMALL_PREFILL]
    cases += [(_write(tmp_path, "chain", stress.chain(3, 50)), Options(full=full))]
    for path, opts in cases:
        estimate, done = _work(path, opts)
        assert estimate == done, (path.name, opts)


def test_work_estimate_counts_selected_tiles_not_the_tile_space(tmp_path: Path) -> None:
    """Five stages of 1,000 tasks, each on one tile of the previous stage (the issue's legal
    5,000-task graph that the old estimate refused): by hand, 5,000 tasks x (1 block + 2
    argument regions + 2 accesses) + 4,000 selected tiles."""
    path = _write(tmp_path, "chain", stress.chain())
    estimate, done = _work(path, Options())
    assert estimate == done == 5_000 * (1 + 2 + 2) + 4_000
    assert estimate < MAX_EXPANSION_WORK
    _plan, bag = plan_program(path, Options())
    assert not bag.has_errors


def test_prefill_full_fits_the_guard() -> None:
    """The 351,050-task prefill fully expanded must pass the guard (the issue's --full run)."""
    bag = DiagnosticBag()
    program = compile_program(BENCH_SPECS / "prefill_351k.pgl", Options(full=True), bag)
    assert program is not None and not bag.items
    assert sum(expansion_work(program, make_window(program, True)).values()) < MAX_EXPANSION_WORK


# ---- windowed = --full ---------------------------------------------------------------------

def _summary(path: Path, opts: Options) -> dict[str, Any]:
    plan, bag = plan_program(path, opts)
    assert plan is not None
    # PG119's note counts the tasks that may run beside a sync_start grid, and the window shows two
    # iterations of them where --full shows all (a timing note of the sync_start rule, not a
    # capacity figure): its code, severity and line must agree, its count cannot
    diags = sorted((d.code, d.level.value, d.span.line if d.span else 0, "" if d.code == "PG119" else d.message)
                   for d in bag.items)
    rings = plan.get(RingTable)
    counts = plan.get(__import__("pgraph.plan.counts", fromlist=["Counts"]).Counts)
    return {"diagnostics": diags, "rings": rings.rings, "tensormap": rings.tensormap,
            "summary": counts.summary, "per_layer": counts.per_layer}


def _assert_window_equals_full(path: Path, **kw: Any) -> None:
    window, full = _summary(path, Options(**kw)), _summary(path, Options(full=True, **kw))
    assert window == full


def test_window_equals_full_decode() -> None:
    _assert_window_equals_full(HEAD_SPEC, layers=4)
    _assert_window_equals_full(VARIANT_762, layers=3)


def test_window_equals_full_prefill_31k_shape(tmp_path: Path) -> None:
    c = dataclasses.replace(prefill.PHASED, name="p31", layers=4)
    _assert_window_equals_full(_write(tmp_path, c.name, prefill.generate(c)))


@settings(max_examples=4, deadline=None, derandomize=True, database=None)
@given(tm=st.sampled_from((64, 128)), qkv=st.sampled_from(((1024, 2), (512, 5))),
       mlp=st.sampled_from(((1024, 2), (1024, 4))), down_k=st.sampled_from((2, 4, 8)),
       fused=st.booleans(), layers=st.integers(3, 4),
       dep_pool=st.sampled_from((None, 300, 600)))
def test_window_equals_full_generated_prefill(tm, qkv, mlp, down_k, fused, layers, dep_pool) -> None:
    """Random prefill tilings (and dep pools small enough to overflow): same diagnostics and figures."""
    c = prefill.Config("gen", tm=tm, qkv_tn=qkv[0], qkv_k=qkv[1], out_tn=1024, out_k=2, mlp_tn=mlp[0],
                       mlp_k=mlp[1], down_tn=1024, down_k=down_k, vocab_chunk=8192, fused=fused, layers=layers)
    text = prefill.generate(c)
    if dep_pool is not None:
        text = text.replace("dep_pool    = 262144", f"dep_pool    = {dep_pool}")
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "gen.pgl"
        path.write_text(text, encoding="utf-8")
        _assert_window_equals_full(path)


# ---- the saved LALR tables -------------------------------------------------------------------

def _canonical(p: lark.Lark) -> list[Any]:
    """The LALR table renumbered by a breadth-first walk from the start states (token order),
    so that two builds of one grammar compare equal whatever their state numbering."""
    pt = p.parser.parser.parser.parse_table
    order: dict[Any, int] = {}
    queue = [pt.start_states[k] for k in sorted(pt.start_states)]
    for s in queue:
        order.setdefault(s, len(order))
    i = 0
    while i < len(queue):
        for tok in sorted(pt.states[queue[i]]):
            action, arg = pt.states[queue[i]][tok]
            if action.name == "Shift" and arg not in order:
                order[arg] = len(order)
                queue.append(arg)
        i += 1
    rows = []
    for s in queue:
        acts = []
        for tok in sorted(pt.states[s]):
            action, arg = pt.states[s][tok]
            acts.append((tok, action.name, order[arg] if action.name == "Shift" else str(arg)))
        rows.append(acts)
    return [rows, sorted((k, order[v]) for k, v in pt.start_states.items()),
            sorted((k, order[v]) for k, v in pt.end_states.items()), sorted(t.name for t in p.terminals)]


def test_saved_tables_match_the_grammar() -> None:
    text = pgl_parser._grammar_text()
    saved = pgl_parser.load_saved_parser(text)
    assert saved is not None, "grammar/pgl.lalr is stale: run `python3 -m pgraph.frontend.parser`"
    fresh = pgl_parser.build_parser(text)
    assert _canonical(saved) == _canonical(fresh)
    for path in [*SPECS.rglob("*.pgl"), *(ROOT / "tests" / "diagnostics").glob("*.fixed.pgl")]:
        src = path.read_text(encoding="utf-8")
        assert saved.parse(src) == fresh.parse(src), path


def test_stale_tables_are_not_used() -> None:
    assert pgl_parser.load_saved_parser(pgl_parser._grammar_text() + "\n// edited\n") is None


# ---- the bench spec generators ---------------------------------------------------------------

def test_committed_bench_specs_are_generated() -> None:
    assert prefill.main(["--check"]) == 0
    assert stress.main(["--check"]) == 0


def test_prefill_totals_by_formula() -> None:
    """docs/upstream.md §10.2, "Task count is a first-order cost" (#662): 351,050 -> 31,706."""
    assert prefill.expected_tasks(prefill.FINE)["total"] == 351_050
    assert prefill.expected_tasks(prefill.PHASED)["total"] == 31_706


@pytest.mark.parametrize("config", SMALL_PREFILL)
def test_prefill_plan_counts_equal_the_formula(config: Any, tmp_path: Path) -> None:
    c = config
    plan, bag = plan_program(_write(tmp_path, c.name, prefill.generate(c)), Options())
    assert plan is not None and not bag.has_errors, [d.message for d in bag.items if d.level.value == "error"]
    summary = plan.get(__import__("pgraph.plan.counts", fromlist=["Counts"]).Counts).summary
    n = prefill.expected_tasks(c)
    assert summary["tasks"] + summary["dummy_tasks"] == n["total"] == 3 * n["per_layer"] + n["entry"]


def test_prefill_31k_plans_with_the_history_count() -> None:
    plan, bag = plan_program(BENCH_SPECS / "prefill_31k.pgl", Options())
    assert plan is not None and not bag.has_errors
    summary = plan.get(__import__("pgraph.plan.counts", fromlist=["Counts"]).Counts).summary
    assert summary["tasks"] + summary["dummy_tasks"] == 31_706


@pytest.mark.slow
def test_prefill_351k_plans_with_the_history_count(request: pytest.FixtureRequest) -> None:
    if "slow" not in (request.config.getoption("markexpr") or ""):
        pytest.skip("opt-in: -m slow (the 40-layer 351,050-task prefill, windowed)")
    plan, bag = plan_program(BENCH_SPECS / "prefill_351k.pgl", Options())
    assert plan is not None and not bag.has_errors
    summary = plan.get(__import__("pgraph.plan.counts", fromlist=["Counts"]).Counts).summary
    assert summary["tasks"] + summary["dummy_tasks"] == 351_050


def test_disjoint_writers_report_the_dep_pool_with_its_fix() -> None:
    plan, bag = plan_program(BENCH_SPECS / "stress_writers_20k.pgl", Options())
    assert plan is not None
    pool = [d for d in bag.items if d.code == "PG111"]
    assert len(pool) == 1 and "20,000 fanout entries" in pool[0].message
    assert "SPMD grid" in (pool[0].hint or "") and "funnel" in (pool[0].hint or "")
    assert not [d for d in bag.items if d.code in ("PG100", "PG101", "PG102")]
    assert len(conflicts(plan)) == 20_000  # each writer against the consumer, never writer against writer
    assert len(touches_by_buffer(plan)) == 2


def test_empty_dummies_into_one_consumer() -> None:
    plan, bag = plan_program(BENCH_SPECS / "stress_dummies_20k.pgl", Options())
    assert plan is not None
    notes = [d.message for d in bag.items if d.code == "PG104"]
    assert notes == ["dummy 'mark' fences nothing and its consumers (total) are ineligible for early dispatch "
                     "anyway: it does nothing"]
