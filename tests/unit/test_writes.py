"""Definite writes (PG122, pgraph/plan/writes.py): every element a task reads of an allocation is
written by an ancestor, on the decode spec and on small hand-written cases.

Expected gaps are computed here by hand from the Qwen3-14B constants (HIDDEN = 40 x 128 = 5120;
5120 // 3 = 1706, 3 x 1706 = 5118) or by a brute-force oracle over element sets (`_brute`,
which shares no code with the planner's sweep). The generated-program oracle is in
tests/property/test_writes_oracle.py.
"""

from __future__ import annotations

import itertools
import random
import re
import shutil
from pathlib import Path

import pytest

from pgraph.cli import main
from pgraph.diagnostics import Severity
from pgraph.kinds import AccessKind
from pgraph.pipeline import Options, plan_program
from pgraph.plan.writes import DefiniteWrites, region_text, uncovered, uncovered_runs

ROOT = Path(__file__).resolve().parents[2]
DECODE = ROOT / "specs" / "decode_layer.pgl"


def _elements(box: tuple[tuple[int, int], ...]) -> set[tuple[int, ...]]:
    return set(itertools.product(*(range(lo, hi) for lo, hi in box)))


def _brute(box: tuple[tuple[int, int], ...], parts: list[tuple[tuple[int, int], ...]]) -> set[tuple[int, ...]]:
    """The elements of `box` no part holds, element by element."""
    left = _elements(box)
    for p in parts:
        left -= _elements(p)
    return left


# ---- the sweep against hand-computed intervals and the brute force ----


def test_uncovered_hand_computed() -> None:
    # three column tiles of 1706 from 0 under a read of columns 4096..5120 of a [16, 5120] tensor
    tiles = [((0, 16), (i * 1706, (i + 1) * 1706)) for i in range(3)]
    assert uncovered(((0, 16), (4096, 5120)), tiles) == [((0, 16), (5118, 5120))]
    # a full cover, in tiles of both dimensions
    grid = [((r, r + 4), (c, c + 8)) for r in range(0, 16, 4) for c in range(0, 64, 8)]
    assert uncovered(((0, 16), (0, 64)), grid) == []
    # one hole in the grid: rows 4..8, columns 16..24
    holed = [b for b in grid if b != ((4, 8), (16, 24))]
    assert uncovered(((0, 16), (0, 64)), holed) == [((4, 8), (16, 24))]
    # nothing written
    assert uncovered(((0, 2), (0, 3)), []) == [((0, 2), (0, 3))]
    # an empty read is covered
    assert uncovered(((0, 0), (0, 3)), []) == []


def test_uncovered_matches_the_brute_force_on_random_boxes() -> None:
    rng = random.Random(122)
    for _ in range(400):
        rank = rng.randint(1, 3)
        sizes = [rng.randint(1, 6) for _ in range(rank)]

        def rand_box(sizes: list[int] = sizes) -> tuple[tuple[int, int], ...]:
            out = []
            for n in sizes:
                a, b = sorted((rng.randint(0, n), rng.randint(0, n)))
                out.append((a, b))
            return tuple(out)

        box = rand_box()
        parts = [rand_box() for _ in range(rng.randint(0, 6))]
        got = uncovered(box, parts)
        union: set[tuple[int, ...]] = set()
        for g in got:
            cells = _elements(g)
            assert cells, ("an empty gap box", box, parts, got)
            assert not cells & union, ("gap boxes overlap", box, parts, got)
            union |= cells
        assert union == _brute(box, parts), (box, parts, got)


def test_uncovered_runs_matches_the_brute_force() -> None:
    rng = random.Random(7)
    for _ in range(400):
        def runs_of() -> list[tuple[int, int]]:
            out, at = [], rng.randint(0, 3)
            for _ in range(rng.randint(0, 4)):
                lo = at + rng.randint(0, 3)
                hi = lo + rng.randint(1, 4)
                out.append((lo, hi))
                at = hi
            return out

        want = runs_of()
        parts = [runs_of() for _ in range(rng.randint(0, 4))]
        got = uncovered_runs(want, parts)
        cells = {e for lo, hi in got for e in range(lo, hi)}
        expect = {e for lo, hi in want for e in range(lo, hi)} - {e for p in parts for lo, hi in p for e in range(lo, hi)}
        assert cells == expect, (want, parts, got)
        assert all(lo < hi for lo, hi in got) and got == sorted(got)


def test_region_text_writes_whole_dimensions_as_colons() -> None:
    assert region_text("normed0", ((0, 16), (5118, 5120)), (16, 5120)) == "normed0[:, 5118:5120]"
    assert region_text("x", ((2, 3),), (4,)) == "x[2:3]"


# ---- the decode spec ----


def _pg122(bag) -> list:  # type: ignore[no-untyped-def]
    return [d for d in bag.items if d.code == "PG122"]


def test_decode_spec_at_its_own_constants_has_no_error() -> None:
    plan, bag = plan_program(DECODE, Options())
    assert plan is not None and not [d for d in bag.items if d.level is Severity.ERROR]
    assert plan.get(DefiniteWrites).gaps == []


def test_check_xg_blocks_3_exits_1_naming_the_gap(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(DECODE), "-D", "XG_BLOCKS=3"]) == 1
    got = capsys.readouterr()
    out = got.out + got.err
    # 5120 // 3 = 1706 columns per x_gamma0 block; 3 x 1706 = 5118: columns 5118..5120 unwritten
    assert "no task ordered before it writes normed0[:, 5118:5120]" in out
    # the layer-0 readers of normed0: the q, k and v projections' last K slice (4 x 1024 = 4096..5120)
    for reader in ("q_proj@L=0", "k_proj@L=0", "v_proj@L=0"):
        assert re.search(rf"block \d+ of '{re.escape(reader)}' reads normed0\[:, 4096:5120\]", out), reader
    assert "'x_gamma0' writes the rest before it: normed0[:, 4096:5118]" in out
    assert "3 x 1706 = 5118 of its 5120" in out
    assert out.count("error[PG122") == 3


def test_xg_cols_1000_names_the_gap() -> None:
    _, bag = plan_program(DECODE, Options(defines=(("XG_COLS", 1000),)))
    msgs = [d.message for d in _pg122(bag)]
    # 5 blocks of 1000 columns cover 0..5000 of 5120
    assert msgs and all("normed0[:, 5000:5120]" in m for m in msgs)


@pytest.fixture(scope="module")
def stripped(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The decode spec with the geometry asserts of qwen3_14b.pgl removed: what PG122 alone catches."""
    d = tmp_path_factory.mktemp("noassert")
    for f in ("decode_layer.pgl", "decode_common.pgl", "qwen3_14b.pgl"):
        shutil.copy(ROOT / "specs" / f, d / f)
    consts = d / "qwen3_14b.pgl"
    consts.write_text("".join(line for line in consts.read_text().splitlines(keepends=True)
                              if not line.startswith("assert ")))
    return d / "decode_layer.pgl"


@pytest.mark.parametrize(("name", "value", "gap", "reader"), [
    # one copy_hidden trip of 12 rows (16 // 12 = 1): rows 12..16 of hidden0 never written
    ("COPY_ROW_TILE", 12, "hidden0[12:16, 0:1024]", "x_gamma0"),
    # dcr_xgamma in 4 tiles of DOWN_TN = 1024: 4096 of the 5120 columns of the layer output
    ("DOWN_ON", 4, "layer_out[:, 4096:5120]", "rms_recip@L=1"),
    # MLP_TN = DOWN_TN = 1000: DOWN_ON = 5120 // 1000 = 5 tiles, 5000 columns
    ("MLP_TN", 1000, "layer_out[:, 5000:5120]", "rms_recip@L=1"),
])
def test_tiling_constants_that_stop_dividing_are_caught(stripped: Path, name: str, value: int, gap: str,
                                                        reader: str) -> None:
    # with the asserts the spec refuses these values itself (PG008); without them PG122 does
    _, guarded = plan_program(DECODE, Options(defines=((name, value),)))
    assert "PG008" in {d.code for d in guarded.items}
    _, bag = plan_program(stripped, Options(defines=((name, value),)))
    found = [d.message for d in _pg122(bag) if f"'{reader}'" in d.message]
    assert found and f"no task ordered before it writes {gap}" in found[0], [d.message for d in _pg122(bag)]


# ---- the rule on small cases ----

HEAD = """
tensor x : f32[4, 8] external
tensor y : f32[4, 8] external
kernel fill aiv (dst : out f32)
kernel copy aiv (src : in f32, dst : out f32)
kernel bump aiv (a : inout f32)
kernel add aiv (src : in f32, a : atomic_add f32)
"""


def _gaps(tmp_path: Path, body: str, full: bool = False) -> tuple[list[str], set[str]]:
    path = tmp_path / "case.pgl"
    path.write_text(HEAD + body, encoding="utf-8")
    plan, bag = plan_program(path, Options(full=full))
    return [d.message for d in _pg122(bag)], {d.code for d in bag.items if d.level is Severity.ERROR}


def test_a_transitive_ancestor_covers(tmp_path: Path) -> None:
    msgs, codes = _gaps(tmp_path, """
entry e {
  tensor t : f32[4, 8]
  manual scope {
    at w { call fill(t) }
    dummy hop deps(w)
    at r deps(hop) { call copy(t, y) }
  }
}""")
    assert msgs == [] and not codes


def test_a_writer_submitted_after_the_reader_covers_nothing(tmp_path: Path) -> None:
    msgs, codes = _gaps(tmp_path, """
entry e {
  tensor t : f32[4, 8]
  manual scope {
    at r { call copy(t, y) }
    at w deps(r) { call fill(t) }
  }
}""")
    assert codes == {"PG122"} and msgs == ["'r' reads t[:, :], but no task ordered before it writes t[:, :]"]


def test_an_earlier_unordered_writer_is_the_race_alone(tmp_path: Path) -> None:
    # the write can run after the read: a race (PG100), whose dep fix also covers the read
    msgs, codes = _gaps(tmp_path, """
entry e {
  tensor t : f32[4, 8]
  manual scope {
    at w { call fill(t) }
    at r { call copy(t, y) }
  }
}""")
    assert msgs == [] and codes == {"PG100"}


def test_a_partial_writer_leaves_the_rest(tmp_path: Path) -> None:
    msgs, _ = _gaps(tmp_path, """
entry e {
  tensor t : f32[4, 8]
  at w { call fill(t[0:3, :]) }
  at r { call copy(t, y) }
}""")
    # rows 0..3 written (an auto scope infers w -> r), row 3 never
    assert msgs == ["'r' reads t[:, :], but no task ordered before it writes t[3:4, :]"]


def test_an_unseeded_accumulator_is_an_uncovered_read(tmp_path: Path) -> None:
    body = """
entry e {
  tensor acc : f32[4, 8]
  manual scope {
    %s
    spmd mm[i in 0..2] %s { call add(x, acc) }
    at out deps(mm) { call copy(acc, y) }
  }
}"""
    msgs, _ = _gaps(tmp_path, body % ("", ""))
    assert msgs == ["block 0 of 'mm' atomically adds to (reads) acc[:, :], but no task ordered before it writes acc[:, :]"]
    msgs, codes = _gaps(tmp_path, body % ("at seed { call fill(acc) }", "deps(seed)"))
    assert msgs == [] and not codes


def test_external_inputs_and_inout_scratch_are_not_checked(tmp_path: Path) -> None:
    msgs, codes = _gaps(tmp_path, """
entry e {
  tensor t : f32[4, 8]
  at s { call bump(t) }
  at r { call copy(x, y) }
}""")
    assert msgs == [] and "PG122" not in codes
    # a stated read of the same buffer is checked
    msgs, _ = _gaps(tmp_path, """
entry e {
  tensor t : f32[4, 8]
  at s {
    reads t
    writes t
    call bump(t)
  }
}""")
    assert msgs == ["'s' reads t[:, :], but no task ordered before it writes t[:, :]"]


def test_an_indirect_write_covers_its_bound(tmp_path: Path) -> None:
    msgs, codes = _gaps(tmp_path, """
tensor idx : i32[4] external
entry e {
  tensor t : f32[4, 8]
  at w { call fill(t[:, :] indirect(idx)) }
  at r { call copy(t, y) }
}""")
    assert msgs == [] and "PG122" not in codes


def test_views_of_another_shape_are_compared_by_flat_offsets(tmp_path: Path) -> None:
    msgs, _ = _gaps(tmp_path, """
entry e {
  tensor t : f32[4, 8]
  view v = t as [32]
  at w { call fill(t[0:2, :]) }
  at r { call copy(v[0:24], y) }
}""")
    # rows 0..2 are elements 0..16 of the 32; the read of 0..24 misses 16..24
    assert len(msgs) == 1 and "elements 16..24 of buffer t" in msgs[0], msgs


def test_window_and_full_agree_on_a_loop(tmp_path: Path) -> None:
    for rows, bad in ((4, False), (3, True)):
        text = f"""
entry e {{
  tensor h0 : f32[4, 8]
  at init {{ call fill(h0) }}
  for s in 0..4 carry h = h0 then nxt {{
    tensor nxt : f32[4, 8]
    at step {{ call copy(h, nxt[0:{rows}, :]) }}
  }}
}}"""
        w, _ = _gaps(tmp_path, text)
        f, _ = _gaps(tmp_path, text, full=True)
        assert bool(w) == bool(f) == bad, (rows, w, f)
        if bad:
            assert "no task ordered before it writes nxt[3:4, :]" in f[0]


def test_the_gap_fact_lists_the_covering_writers(tmp_path: Path) -> None:
    path = tmp_path / "case.pgl"
    path.write_text(HEAD + """
entry e {
  tensor t : f32[4, 8]
  manual scope {
    parallel w[i in 0..3] { call fill(t[:, i*2 +: 2]) }
    at r deps(w) { call copy(t, y) }
  }
}""", encoding="utf-8")
    plan, _ = plan_program(path, Options())
    assert plan is not None
    (gap,) = plan.get(DefiniteWrites).gaps
    assert gap.kind is AccessKind.READ and gap.missing == (((0, 4), (6, 8)),)
    labels = [plan.graph.instances[n].label for n, _, _ in gap.writers]
    assert labels == ["w[i=0]", "w[i=1]", "w[i=2]"]
    assert [b for _, _, b in gap.writers] == [((0, 4), (0, 2)), ((0, 4), (2, 4)), ((0, 4), (4, 6))]
