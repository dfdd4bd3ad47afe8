"""`pgraph check` of an include-only file (pgraph.commands.context, pgraph.frontend.includers).

specs/decode_common.pgl has no entry and names the constants of specs/qwen3_14b.pgl: alone it
would be a hundred PG002 errors. Checked, it is checked in the context of the three specs that
include it; a mistake planted in a copy is found at its own line and column (computed here from
the planted text), once although three contexts meet it.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pgraph.commands import context
from pgraph.diagnostics import DiagnosticBag
from pgraph.frontend.includers import find_includers
from pgraph.pipeline import Options, run_until
from tests.conftest import KEEP_ENV, ROOT, SPECS

INCLUDERS = ["specs/decode_layer.pgl", "specs/variants/decode_layer_762.pgl",
             "specs/variants/decode_layer_dcr_serial.pgl"]


def pgraph(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pgraph", *args], cwd=cwd, capture_output=True, text=True,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "PGRAPH_VERIFY": "1", **KEEP_ENV},
                          timeout=300, check=False)


@pytest.fixture
def specs(tmp_path: Path) -> Path:
    """A copy of specs/ (its pgraph.toml makes it the project root)."""
    shutil.copytree(SPECS, tmp_path / "specs")
    return tmp_path / "specs"


def plant(path: Path, old: str, new: str) -> tuple[int, int]:
    """Replace the one `old` of the file by `new`; the 1-based line and column where `new` starts."""
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, old
    at = text.index(old)
    path.write_text(text.replace(old, new), encoding="utf-8")
    return text.count("\n", 0, at) + 1, at - text.rfind("\n", 0, at)


def test_the_includers_of_the_shared_files_are_the_three_decode_specs() -> None:
    for shared in ("decode_common.pgl", "qwen3_14b.pgl"):
        found = find_includers(SPECS / shared, SPECS)
        assert [str(p.relative_to(ROOT)) for p in found] == INCLUDERS
    assert find_includers(SPECS / "configs" / "small.pgl", SPECS) == []


def test_includers_are_found_through_other_files_and_hidden_folders_are_skipped(tmp_path: Path) -> None:
    (tmp_path / "pgraph.toml").write_text("")
    (tmp_path / "a.pgl").write_text("const N = 4\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "mid.pgl").write_text('include "../a.pgl"\nconst M = N\n')         # no entry: not a context
    (tmp_path / "sub" / "top.pgl").write_text('include "mid.pgl"\nentry e { dummy d }\n')
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "x.pgl").write_text('include "../a.pgl"\nentry e { dummy d }\n')
    (tmp_path / "broken.pgl").write_text('include "a.pgl"\nentry e {\n')                  # a syntax error: ignored
    assert find_includers(tmp_path / "a.pgl", tmp_path) == [(tmp_path / "sub" / "top.pgl").resolve()]


def test_check_of_the_shared_files_is_ok_in_their_context() -> None:
    for shared in ("decode_common.pgl", "qwen3_14b.pgl"):
        proc = pgraph("check", f"specs/{shared}")
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == f"specs/{shared}: ok (in the context of {', '.join(INCLUDERS)})\n"
        assert proc.stderr.startswith(f"specs/{shared}: no entry here or in its includes: checked in the context "
                                      "of the 3 file(s) of the project that include it")
        assert "error" not in proc.stderr


def test_a_mistake_in_the_shared_file_is_found_there_once(specs: Path) -> None:
    line, col = plant(specs / "decode_common.pgl", "bf16[NUM_LAYERS * HIDDEN, KV_HIDDEN]             external   # 3",
                      "bf16[NUM_LAYERS * HIDDEN, KV_HIDEN]             external   # 3")
    col += len("bf16[NUM_LAYERS * HIDDEN, ")
    proc = pgraph("check", "decode_common.pgl", cwd=specs)
    assert proc.returncode == 1
    head = f"decode_common.pgl:{line}:{col}: error[PG002 undefined-name]: 'KV_HIDEN' is not defined here"
    assert proc.stderr.count(head) == 1, proc.stderr    # three contexts, one diagnostic
    assert "note: in a file included from decode_layer.pgl:16:1" in proc.stderr
    assert "hint: did you mean 'KV_HIDDEN'?" in proc.stderr
    assert proc.stderr.rstrip().endswith("1 error(s), 0 warning(s)")


def test_a_call_that_no_longer_matches_a_kernel_of_the_file_is_the_files_too(specs: Path) -> None:
    """PG012 is located at the call in decode_layer.pgl; its note points at the changed parameter."""
    line, col = plant(specs / "decode_common.pgl", "kernel copy_hidden aiv (cur : out f32[BATCH_PAD, HIDDEN]",
                      "kernel copy_hidden aiv (cur : out f32[BATCH_PAD, HIDDEN, 2]")
    proc = pgraph("check", "decode_common.pgl", cwd=specs)
    assert proc.returncode == 1
    assert "error[PG012 kernel-arg-shape]: the region of 'hidden0' has shape [16, 5120] but parameter 'cur' of " \
           "'copy_hidden' expects [16, 5120, 2]" in proc.stderr
    assert f"note: decode_common.pgl:{line}:{col + len('kernel copy_hidden aiv (')}: parameter 'cur' declared here" \
        in proc.stderr


def test_errors_of_the_includer_itself_make_the_check_incomplete(specs: Path) -> None:
    plant(specs / "decode_layer.pgl", "dim(k_cache, 0) / (NUM_LAYERS * BLOCK_SIZE", "dim(k_cachex, 0) / (NUM_LAYERS * BLOCK_SIZE")
    proc = pgraph("check", "decode_common.pgl", cwd=specs)
    assert proc.returncode == 1
    assert "decode_layer.pgl: 1 error(s) outside decode_common.pgl stopped its check before planning, so " \
           "decode_common.pgl was not fully checked in it (`pgraph check decode_layer.pgl` shows them)" in proc.stderr
    assert "k_cachex" not in proc.stderr   # the includer's own error is not the file's
    assert proc.stdout == ""


def test_a_file_nobody_includes_keeps_the_plain_check() -> None:
    proc = pgraph("check", "specs/configs/small.pgl")
    assert proc.returncode == 1
    assert "specs/configs/small.pgl:1:1: error[PG002 undefined-name]: the spec declares no `entry`" in proc.stderr


def test_the_context_check_reads_unsaved_text(specs: Path) -> None:
    """`Options.sources` (an editor's buffers) stands for the file on disk, in the file and in its includers."""
    path = specs / "decode_common.pgl"
    text = path.read_text(encoding="utf-8").replace("tensor out              :", "tensor out              :: ", 1)
    assert text != path.read_text(encoding="utf-8")
    opts = Options(sources=((path.resolve(), text),))
    bag = DiagnosticBag()
    stopped = run_until(path, opts, bag, "ast")
    assert stopped.loaded is None and [d.code for d in bag.items] == ["PG001"]  # the unsaved text was parsed
    ok = Options(sources=((path.resolve(), path.read_text(encoding="utf-8").replace("HIDDEN]", "HIDEN]", 1)),))
    loaded = run_until(path, ok, DiagnosticBag(), "ast").loaded
    assert context.include_only(loaded)
    result = context.check_in_context(path, ok, loaded)  # type: ignore[arg-type]
    assert result is not None and [d.code for d in result.diagnostics] == ["PG002"]
    assert "'HIDEN'" in result.diagnostics[0].message
