"""Regressions for the crashes and hangs the spec mutation fuzzer (tests/property/test_fuzz_spec.py) found.

Each case is the shrunk mutant of the real spec (specs/decode_layer.pgl and its includes),
rebuilt here with one textual edit, and the fixed behaviour: exit code 1 with a coded
diagnostic instead of a traceback or a run of minutes and gigabytes.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pgraph.cli import main
from pgraph.diagnostics import DiagnosticBag
from pgraph.expand.window import make_window
from pgraph.expand.work import MAX_EXPANSION_WORK, dispatch_work, expansion_work
from pgraph.ir.instances import overlap
from pgraph.pipeline import Options, compile_program, plan_program
from pgraph.plan.races import SpmdOverlapPass
from tests.conftest import HEAD_SPEC, SPECS

FILES = ("decode_layer.pgl", "qwen3_14b.pgl", "decode_common.pgl")


def mutant(tmp_path: Path, name: str, old: str, new: str) -> Path:
    """Copy the three spec files to tmp_path, replacing `old` (exactly once) by `new` in `name`."""
    for f in FILES:
        shutil.copy(SPECS / f, tmp_path / f)
    text = (tmp_path / name).read_text(encoding="utf-8")
    assert text.count(old) == 1, old
    (tmp_path / name).write_text(text.replace(old, new), encoding="utf-8")
    return tmp_path / FILES[0]


def plan_json(spec: Path, *extra: str) -> tuple[int, list[dict[str, object]]]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["plan", "--format", "json", *extra, str(spec)])
    assert "Traceback" not in err.getvalue()
    return code, json.loads(out.getvalue())["diagnostics"]


# ---- PG031: runaway index ranges (OverflowError, hangs) ------------------------------------

def test_huge_block_count_overflow_is_pg031(tmp_path: Path) -> None:
    """XG_BLOCKS = 10**30: x_gamma0 had 10**30 blocks; itertools.product raised OverflowError."""
    spec = mutant(tmp_path, "qwen3_14b.pgl", "const XG_BLOCKS       = 5", "const XG_BLOCKS = " + "1" + "0" * 30)
    code, diags = plan_json(spec)
    assert code == 1
    assert [d["code"] for d in diags if d["severity"] == "error"] == ["PG031"]
    assert "'x_gamma0'" in str(diags[0]["message"])


def test_million_block_grid_is_pg031(tmp_path: Path) -> None:
    """x_gamma0[i in -1000000..XG_BLOCKS]: 1,000,005 blocks ran past 20 s (each block's regions evaluated)."""
    spec = mutant(tmp_path, "decode_layer.pgl", "x_gamma0[i in 0..XG_BLOCKS]", "x_gamma0[i in -1000000..XG_BLOCKS]")
    code, diags = plan_json(spec)
    assert code == 1
    assert [d["code"] for d in diags] == ["PG031"]


def test_100k_block_attention_grid_is_pg031(tmp_path: Path) -> None:
    """fa_fused with 100,000 blocks: 55 s and 1.6 GB before the guard; now stopped before expanding.

    As written (sync_start) the grid is PG113 first: 100,000 blocks cannot start together on
    24 clusters. Without sync_start the expansion guard stops it.
    """
    spec = mutant(tmp_path, "decode_layer.pgl", "fa_fused[b in 0..PA_DEFAULT_BLOCK_DIM]", "fa_fused[b in 0..100000]")
    code, diags = plan_json(spec)
    assert code == 1 and [d["code"] for d in diags] == ["PG113"]
    assert "'fa_fused' has 100000 blocks but only 24 clusters can start together" in str(diags[0]["message"])
    spec.write_text(spec.read_text().replace("fa_fused[b in 0..100000] sync_start", "fa_fused[b in 0..100000]"))
    code, diags = plan_json(spec)
    assert code == 1 and [d["code"] for d in diags] == ["PG031"]
    # the per-layer slab check of k_cache cannot afford 100,000 blocks x 40 layers, so the layer
    # loop is expanded in full: 40 layers x (100,000 blocks x (1 + 17 tensor arguments + 22
    # accesses) + 74 dep tiles); the scalar argument evaluates no region (the accesses: see
    # test_window_work_of_fa_fused_by_hand)
    assert 40 * (100_000 * (1 + 17 + 22) + 74) == 160_002_960
    assert "'fa_fused' alone takes 160,002,960 (1 task(s) x 100,000 block(s) per iteration)" in str(diags[0]["message"])


def test_four_billion_layers_are_pg031_not_a_hang() -> None:
    """NUM_LAYERS = 2**32 on tests/examples/lang_layer.pgl (mutation fuzz, seed 1759): the window
    is two layers, but the critical path walks it once per layer it stands for (hours), and
    enumerating the iterations of an unwindowed loop ran out of memory. By hand: 19 tasks per
    layer (zero_acc, cast_in, 16 proj tiles, res; the file's own per_layer line) plus load and
    store: 19 * 2**32 + 2; proj alone 16 * 2**32."""
    from tests.conftest import ROOT

    code, diags = plan_json(ROOT / "tests" / "examples" / "lang_layer.pgl", "-D", f"NUM_LAYERS={2**32}")
    assert code == 1 and [d["code"] for d in diags] == ["PG031"]
    assert 19 * 2**32 + 2 == 81_604_378_626 and 16 * 2**32 == 68_719_476_736
    msg = str(diags[0]["message"])
    assert "submits about 81,604,378,626 tasks in all" in msg and "'proj' alone submits 68,719,476,736" in msg


def test_the_pg031_hint_states_the_decode_figure() -> None:
    """The hint's 'about 190,000' is the HEAD decode's work fully expanded, to within 5 %."""
    bag = DiagnosticBag()
    program = compile_program(HEAD_SPEC, Options(), bag)
    assert program is not None
    work = sum(expansion_work(program, make_window(program, True)).values())
    assert abs(work - 190_000) <= 0.05 * 190_000, work


def test_2_pow_1024_blocks_are_pg031_in_readable_numbers(tmp_path: Path) -> None:
    """pa_tiling over 2**1024 blocks (mutation fuzz, seed 5100): len() of the dep selection's range
    raised OverflowError in the work estimate; the counts now print in scientific notation."""
    spec = mutant(tmp_path, "decode_layer.pgl", "spmd pa_tiling[b in 0..1]", f"spmd pa_tiling[b in 0..{2**1024}]")
    code, diags = plan_json(spec)
    assert code == 1 and [d["code"] for d in diags if d["severity"] == "error"] == ["PG031"]
    assert "(1 task(s) x 1.80e+308 block(s) per iteration)" in str(diags[0]["message"])


def test_a_top_level_tensor_without_external_is_pg019(tmp_path: Path) -> None:
    """tests/examples/tiny_dot.pgl with `external` deleted from `tensor w` (mutation fuzz, seed
    4680): the lowering asserted (no scope to allocate in) before the form check said PG019."""
    from tests.conftest import ROOT

    text = (ROOT / "tests" / "examples" / "tiny_dot.pgl").read_text(encoding="utf-8")
    old = "tensor w     : bf16[STEPS * COLS, COLS]   external"
    assert text.count(old) == 1
    spec = tmp_path / "tiny_dot.pgl"
    spec.write_text(text.replace(old, "tensor w     : bf16[STEPS * COLS, COLS]"), encoding="utf-8")
    code, diags = plan_json(spec)
    assert code == 1 and [d["code"] for d in diags if d["severity"] == "error"] == ["PG019"]


def test_guard_admits_the_real_program_fully_expanded() -> None:
    """The limit must not reject HEAD even with every layer expanded (Options.full)."""
    bag = DiagnosticBag()
    program = compile_program(HEAD_SPEC, Options(), bag)
    assert program is not None
    for full in (False, True):
        assert sum(expansion_work(program, make_window(program, full)).values()) < MAX_EXPANSION_WORK
    assert not bag.items


def test_window_work_of_fa_fused_by_hand() -> None:
    """The estimate for fa_fused, worked out from decode_layer.pgl / decode_common.pgl by hand."""
    bag = DiagnosticBag()
    program = compile_program(HEAD_SPEC, Options(), bag)
    assert program is not None
    d = program.dispatch("fa_fused")
    # paged_attention_rope_cce: 18 parameters, 17 tensors + 1 scalar (docs/upstream.md §8.8); accesses:
    # the 7 clauses of the task body (attn_out_tnd write; k_cache, v_cache, pa_metadata read and
    # write) + by direction for the other 13 tensors: 2 inout x 2 (query, workspace) + 11 in = 22
    assert len(d.args) == 18 and len(d.accesses) == 22
    # deps: q_proj (50 tiles), k_proj and v_proj (10 each), rms_recip, pa_tiling, attn_out_seed,
    # mlp_out_seed (`at`: 1 tile each) = 74 tiles scanned per task
    # one task per layer, 24 blocks, 2 layers expanded (L=0, L=1 for the other 39): per block its
    # environment, 17 tensor-argument regions (the scalar evaluates none) and 22 accesses, plus the
    # 74 tiles its deps select; then L=39's bounds check evaluates the 22 accesses of each block
    assert dispatch_work(program, make_window(program, False), d) == 2 * (24 * (1 + 17 + 22) + 74) + 24 * 22 == 2596


# ---- SpmdOverlapPass.first_clash: quadratic on large grids ---------------------------------

KINDS = ("write", "atomic", "read")


def _accesses(b):
    return [(kind, t, k, box) for kind in KINDS for t, k, box, indirect in b.get(kind, []) if not indirect]


def _conflicting(a, b, p) -> bool:
    (ka, ta, bufa, ba), (kb, tb, bufb, bb) = a, b
    if bufa != bufb or (ka == kb and ka in ("read", "atomic")):
        return False
    return overlap(ba, ta, bb, tb, p)


def brute_first_clash(blocks, p):  # every pair of blocks, every pair of accesses: the oracle
    accs = [_accesses(b) for b in blocks]
    for i, j in itertools.combinations(range(len(accs)), 2):
        if any(_conflicting(a, b, p) for a in accs[i] for b in accs[j]):
            return i, j
    return None


def check_first_clash(blocks, p) -> None:
    """The indexed search finds the first conflicting block pair, and two accesses that conflict."""
    got = SpmdOverlapPass.first_clash(blocks, p)
    want = brute_first_clash(blocks, p)
    if want is None:
        assert got is None
        return
    assert got is not None
    (i, ki, ti, bi), (j, kj, tj, bj) = got
    assert (i, j) == want
    mine = [a for a in _accesses(blocks[i]) if (a[0], a[1], a[3]) == (ki.value, ti, bi)]
    theirs = [b for b in _accesses(blocks[j]) if (b[0], b[1], b[3]) == (kj.value, tj, bj)]
    assert any(_conflicting(a, b, p) for a in mine for b in theirs)


class _T:
    def __init__(self, shape: tuple[int, ...]) -> None:
        self.shape = shape


class _P:
    """The two tensors `overlap` looks up: a [4, 6] tensor and its flat [24] view."""

    tensors = {"a": _T((4, 6)), "v": _T((24,))}


def _box(draw: st.DrawFn, name: str) -> tuple[tuple[int, int], ...]:
    shape = _P.tensors[name].shape
    out = []
    for n in shape:
        lo = draw(st.integers(0, n))
        out.append((lo, draw(st.integers(lo, n))))
    return tuple(out)


@st.composite
def grids(draw: st.DrawFn) -> list[dict[str, list[tuple[str, tuple[str, tuple[int, ...]], tuple, bool]]]]:
    blocks = []
    for _ in range(draw(st.integers(0, 7))):
        writes = []
        for _ in range(draw(st.integers(0, 3))):
            name = draw(st.sampled_from(("a", "a", "v")))
            key = ("buf", ()) if draw(st.booleans()) else ("other", ())
            writes.append((name, key, _box(draw, name), draw(st.booleans()) and draw(st.booleans())))
        blocks.append({"write": writes, "read": [], "atomic": []})
        for kind in ("read", "atomic"):
            for _ in range(draw(st.integers(0, 2))):
                name = draw(st.sampled_from(("a", "v")))
                key = ("buf", ()) if draw(st.booleans()) else ("other", ())
                blocks[-1][kind].append((name, key, _box(draw, name), draw(st.booleans()) and draw(st.booleans())))
    return blocks


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(blocks=grids())
def test_first_clash_matches_pairwise_oracle(blocks) -> None:
    """The indexed search returns the pair the pairwise loop returns, with two conflicting accesses:
    reads against writes and atomic adds, writes against everything, never read/read or atomic/atomic."""
    check_first_clash(blocks, _P)


def test_5120_block_grid_plans() -> None:
    """-D XG_BLOCKS=5120: x_gamma0 writes 5,120 one-column slices; the pairwise loop took ~20 s."""
    plan, bag = plan_program(HEAD_SPEC, Options(defines=(("XG_BLOCKS", 5120),)))
    assert plan is not None and not bag.has_errors
    assert not [d for d in bag.items if d.code == "PG102"]
    inst = next(i for i in plan.graph.instances if i.dispatch == "x_gamma0")
    blocks = plan.graph.blocks[inst.id]
    assert len(blocks) == 5120
    assert SpmdOverlapPass.first_clash(blocks, plan.program) is None
    # make two blocks write the same column: the clash is found, with the earlier block first
    blocks[4000]["write"].append(blocks[17]["write"][0])
    (i, _, tensor, box), (j, _, _, _) = SpmdOverlapPass.first_clash(blocks, plan.program)
    assert (i, j, tensor) == (17, 4000, "normed0") and box == ((0, 16), (17, 18))


@pytest.mark.parametrize("value", [0, -1, 2**63])
def test_out_of_range_define_is_coded(value: int) -> None:
    """-D with out-of-range values ends in exit 0/1 with coded diagnostics."""
    code, diags = plan_json(HEAD_SPEC, "-D", f"XG_BLOCKS={value}")
    assert code == 1 and diags and all(str(d["code"]).startswith("PG") for d in diags)
