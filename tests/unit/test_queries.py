"""`pgraph deps`, `why`, `stats` (issue 14): the answers, the names, the errors.

The strongest check compares two expansions: the query window (the named iteration and its
neighbours, `pgraph.commands.query.query_window`) against every loop iteration expanded
(`--full`): for every task of the layers asked about, producers, consumers, provenance and
regions must be the same text. The hand-checked answers come from the spec's text and the
Qwen3-14B constants (specs/qwen3_14b.pgl: HIDDEN 5120, OUT_TN 512, OUT_TK 1024 so 50 out_proj
tiles of which OUT_DIRECT = 24 go direct, t in 26..50; K_SPLITS_MLP 5, MLP_K_SLICE 1024).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pgraph.cli import main
from pgraph.commands.query import compile_spec, parse_task_name, query_for, render_deps
from pgraph.pipeline import Options, UsageError
from tests.conftest import HEAD_SPEC, ROOT

SPEC = str(HEAD_SPEC)


@pytest.fixture(autouse=True)
def cache_here(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The query cache of these tests lives in a temporary folder, never in ~/.cache."""
    where = tmp_path_factory.getbasetemp() / "query-cache"
    monkeypatch.setenv("PGRAPH_CACHE_DIR", str(where))
    return where


def run(*args: str, cwd: Path = ROOT, **env_extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), **env_extra}
    return subprocess.run([sys.executable, "-m", "pgraph", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=120, check=False)


@pytest.fixture(scope="module")
def program():  # type: ignore[no-untyped-def]
    prog, bag = compile_spec(SPEC, Options())
    assert prog is not None, bag.items
    return prog


@pytest.fixture(scope="module")
def full(program):  # type: ignore[no-untyped-def]
    return query_for(program, Options(full=True), [])


@pytest.mark.parametrize("layer", [0, 1, 2, 21, 38, 39])
def test_query_window_equals_full_expansion_for_every_task_of_a_layer(program, full, layer: int) -> None:  # type: ignore[no-untyped-def]
    q = query_for(program, Options(), [parse_task_name(f"q_proj@L={layer}")])
    mine = [i for i in q.graph.instances if i.loops and i.loops[0] == 1 and i.iters[0] == layer]
    assert len([i for i in mine if i.kind.value != "alloc"]) == 265 + 12  # tasks + dummies of one layer
    by_label = {i.label: i for i in full.graph.instances}
    for inst in mine:
        assert render_deps(q, [inst]) == render_deps(full, [by_label[inst.label]]), inst.label


def test_deps_of_out_proj_direct_by_hand(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["deps", SPEC, "out_proj.direct"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("out_proj.direct@L=0: spmd, 24 block(s), scope #4, declared at ")
    assert out[0].endswith("decode_layer.pgl:192:7")
    assert out[1] == "  producers (1):"
    # wave direct: `spmd deps(fa_fused)` on line 191; it reads attn_out2d[:, k*OUT_TK +: OUT_TK] for
    # k = t % 5 over t in 26..50: every k, so the whole 5120 columns, of what fa_fused writes
    assert out[2].split()[:3] == ["fa_fused@L=0", "explicit", "dep"] and "decode_layer.pgl:192:60;" in out[2]
    assert out[3] == "  consumers (4):"
    # residual_rms_cast[c] deps out_proj[c*10 +: 10]: c=2 (t 20..30), 3, 4 meet t >= 26; the direct
    # tiles write attn_proj[:, n*512 +: 512] for n = t / 5 in 5..9: columns 2560..5120, and
    # residual_rms_cast[c] reads columns c*1024 +: 1024
    expect = {"residual_rms_cast[c=2]@L=0": "attn_proj[0:16, 2560:3072] (atomic -> read)",
              "residual_rms_cast[c=3]@L=0": "attn_proj[0:16, 3072:4096] (atomic -> read)",
              "residual_rms_cast[c=4]@L=0": "attn_proj[0:16, 4096:5120] (atomic -> read)",
              "post_rms_reduce@L=0": "attn_proj[0:16, 2560:5120] (atomic -> read)"}
    got = {line.split()[0]: line.split("; ", 1)[1] for line in out[4:8]}
    assert got == expect
    assert "decode_layer.pgl:201:65;" in out[4] and "decode_layer.pgl:209:29;" in out[7]


def test_a_tile_name_selects_the_task_of_its_wave(capsys: pytest.CaptureFixture[str]) -> None:
    """gate_proj[n=3,k=1]: n < 6 (GATE_UP_SPMD_N) is the critical wave, one SPMD task per k
    whose blocks are n; in layer 2 its producer is residual_rms_cast[c=1] of layer 2."""
    assert main(["deps", SPEC, "gate_proj[n=3,k=1]@L=2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("gate_proj.critical[k=1]@L=2: spmd, 6 block(s)")
    assert out[2].split()[0] == "residual_rms_cast[c=1]@L=2"
    assert "mlp_norm_in[0:16, 1024:2048]" in out[2]
    assert [line.split()[0] for line in out[4:]] == [f"silu[n={n}]@L=2" for n in range(6)]


def test_an_entry_task_sees_the_window_and_says_what_it_stands_for(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["deps", SPEC, "pa_tiling"]) == 0
    out = capsys.readouterr().out
    assert "fa_fused@L=0 " in out and "fa_fused@L=1 (stands for L=1..39)" in out
    assert "alloc@scope0  creator; allocates pa_metadata" in out


def test_why_gives_the_shortest_path_by_hand(capsys: pytest.CaptureFixture[str]) -> None:
    """silu[n] deps post_rms_reduce deps out_proj (any wave) deps fa_fused deps q_proj: 4 edges;
    the way through residual_rms_cast and gate_proj, or through out_proj_dummy, is longer."""
    assert main(["why", SPEC, "silu[n=2]@L=5", "q_proj@L=5"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "silu[n=2]@L=5 waits for q_proj@L=5: ordered by a path of 4 edge(s)"
    assert [line.split()[1] for line in out[2:]] == ["fa_fused@L=5", "out_proj.direct@L=5", "post_rms_reduce@L=5",
                                                     "silu[n=2]@L=5"]


def test_why_across_layers_expands_the_layers_between(capsys: pytest.CaptureFixture[str]) -> None:
    """copy_hidden (before the layer loop) reaches dcr_xgamma@L=3 only through layers 0..3."""
    assert main(["why", SPEC, "copy_hidden", "dcr_xgamma@L=3"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("dcr_xgamma@L=3 waits for copy_hidden@cb=0")
    layers = {line.split("@L=")[1].split()[0] for line in out[2:] if "@L=" in line}
    assert layers == {"0", "1", "2", "3"}


def test_why_unordered_names_the_shared_regions(capsys: pytest.CaptureFixture[str]) -> None:
    """The critical gate and up waves of one k both read the k-th 1024-column slice of mlp_norm_in."""
    assert main(["why", SPEC, "gate_proj.critical[k=1]", "up_proj.critical[k=1]"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == ("gate_proj.critical[k=1]@L=0 and up_proj.critical[k=1]@L=0 are unordered: no path joins "
                      "them, either may run first")
    assert out[1:] == ["  regions both touch:", "    mlp_norm_in[0:16, 1024:2048] (read -> read)"]


def test_stats_figures_of_the_head_spec(capsys: pytest.CaptureFixture[str]) -> None:
    """Per layer 265 tasks + 12 dummies, 588 edges; whole program 4 + 40 x 265 tasks and
    1 + 40 x 12 dummies (hand derivations: tests/unit/test_counts.py)."""
    assert main(["stats", SPEC]) == 0
    rows = {line.split()[0]: line.split()[1] for line in capsys.readouterr().out.splitlines()[3:] if line.strip()}
    assert rows["submits_per_layer"] == "277"
    assert rows["submits"] == f"{4 + 40 * 265 + 1 + 40 * 12:,}"
    assert rows["tasks_per_layer"] == "265" and rows["edges_per_layer"] == "588"


@pytest.mark.parametrize(("args", "message"), [
    (["deps", SPEC, "out_proj.drect"], "no task 'out_proj.drect' in this spec; did you mean 'out_proj.direct'?"),
    (["deps", SPEC, "gate_proj[m=3,k=1]"], "gate_proj has no tile variable 'm' (n, k)"),
    (["deps", SPEC, "fa_fused@L=40"], "L=40 is outside the loop `L in 0..40`"),
    (["deps", SPEC, "silu[n=99]"], "no task 'silu[n=99]' in this spec: silu has n in 0..17, @L in 0..40"),
    (["deps", SPEC, "silu[[n]"], "index '[n' is not VAR=INTEGER or INTEGER"),
    (["deps", SPEC, "silu[[n]]"], "is not of the form NAME"),
    (["why", SPEC, "silu", "q_proj"], "'silu' names 17 tasks"),
])
def test_bad_task_names_are_usage_errors_with_a_hint(args: list[str], message: str) -> None:
    proc = run(*args)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("pgraph: error: ") and message in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""


def test_queries_on_a_spec_with_errors_exit_1() -> None:
    bad = str(ROOT / "tests" / "diagnostics" / "PG002_undefined_name.pgl")
    for args in (["deps", bad, "x"], ["why", bad, "x", "y"], ["stats", bad]):
        proc = run(*args)
        assert proc.returncode == 1 and "error[PG002 undefined-name]" in proc.stderr, args


def test_parse_task_name_spellings() -> None:
    n = parse_task_name("gate_proj[n=3,k=1]@L=2")
    assert (n.base, n.index, n.iters) == ("gate_proj", (("n", 3), ("k", 1)), (("L", 2),))
    assert parse_task_name("gate_proj[3, 1]@2").index == ((None, 3), (None, 1))
    assert parse_task_name("alloc@scope3@L=0").base == "alloc@scope3"
    with pytest.raises(UsageError):
        parse_task_name("a[n=x]")


def test_the_cache_answers_as_a_fresh_compile_and_follows_edits(tmp_path: Path) -> None:
    """A hit prints what a miss and a cacheless run print; editing an included file (fewer
    direct out_proj blocks: N_OUT_DIRECT_BLOCKS 24 -> 20 in specs/qwen3_14b.pgl) is a miss; a
    broken entry is a miss, not a traceback."""
    for name in ("decode_layer.pgl", "qwen3_14b.pgl", "decode_common.pgl"):
        shutil.copy(ROOT / "specs" / name, tmp_path / name)
    cache = tmp_path / "cache"
    args = ("deps", "decode_layer.pgl", "out_proj.direct@L=3")
    miss = run(*args, cwd=tmp_path, PGRAPH_CACHE_DIR=str(cache))
    assert miss.returncode == 0 and len(list(cache.iterdir())) == 1
    hit = run(*args, cwd=tmp_path, PGRAPH_CACHE_DIR=str(cache))
    fresh = run(*args, cwd=tmp_path, PGRAPH_CACHE="0", PGRAPH_CACHE_DIR=str(tmp_path / "unused"))
    assert hit.stdout == miss.stdout == fresh.stdout and "24 block(s)" in hit.stdout
    assert not (tmp_path / "unused").exists()
    consts = tmp_path / "qwen3_14b.pgl"
    text = consts.read_text(encoding="utf-8")
    assert "const N_OUT_DIRECT_BLOCKS = 24 " in text
    consts.write_text(text.replace("const N_OUT_DIRECT_BLOCKS = 24 ", "const N_OUT_DIRECT_BLOCKS = 20 "),
                      encoding="utf-8")
    edited = run(*args, cwd=tmp_path, PGRAPH_CACHE_DIR=str(cache))
    assert edited.returncode == 0 and "20 block(s)" in edited.stdout
    for entry in cache.iterdir():
        entry.write_bytes(b"not a pickle")
    broken = run(*args, cwd=tmp_path, PGRAPH_CACHE_DIR=str(cache))
    assert broken.returncode == 0 and broken.stdout == edited.stdout and broken.stderr == ""


def test_the_cache_keeps_a_bounded_number_of_entries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pgraph.commands import query_cache

    monkeypatch.setenv("PGRAPH_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(query_cache, "MAX_ENTRIES", 3)
    for i in range(5):
        assert query_cache.cached(("test", i), lambda i=i: (i * 10, [])) == i * 10
    assert len(list(tmp_path.glob("q-*.pickle"))) == 3
    assert query_cache.cached(("test", 4), lambda: (-1, [])) == 40  # a hit: build is not called


#: `a` is passed x as inout but declares it reads x[:, 0:16] only; `b` reads the whole of x.
WHY_WIDER_ARGUMENT_SPEC = """\
const R = 8
tensor x : f32[R, 64] external
tensor y : f32[R, 64] external
tensor z : f32[R, 64] external
kernel upd aiv (x : inout f32[R, 64], y : out f32[R, 64])
kernel rd aiv (x : in f32[R, 64], z : out f32[R, 64])

entry e {
  manual scope {
    at a {
      call upd(x, y)
      reads x[:, 0 +: 16]
    }
    at b { call rd(x, z) }
  }
}
"""


def test_why_does_not_call_a_read_read_overlap_a_write(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The declared accesses of `a` and `b` share x[0:8, 0:16], read by both (no race: `check` is
    ok); only the kernel arguments' boxes overlap with a writer (a's inout x). `why` used to list
    the read/read region and then say "one of them writes: a race"."""
    spec = tmp_path / "wider.pgl"
    spec.write_text(WHY_WIDER_ARGUMENT_SPEC)
    assert main(["check", str(spec)]) == 0
    capsys.readouterr()
    assert main(["why", str(spec), "a", "b"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1:3] == ["  regions both touch:", "    x[0:8, 0:16] (read -> read)"]
    assert not any("race unless" in line for line in out)
    assert out[3].startswith("  both only read every shared region, so no race; their kernel arguments overlap "
                             "with a writer (argument x[0:8, 0:64] (inout x -> in x))")
