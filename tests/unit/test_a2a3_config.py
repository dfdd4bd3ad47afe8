"""The a2a3 target configuration (pgraph/backends/a2a3/a2a3.toml): the devkit include folders of
extern kernels in kernel_config.py, and the output layout (`build --layout`, `--target-config`).

Expected values are written out by hand: the decode's extern kernels are fid 0
(paged_attention_tiling_cce) and fids 11/12 (the two parts of paged_attention_rope_cce), ABI
reference §3.1 as docs/upstream.md §6.7 restates it; every other kernel is generated and gets no
include key. The runtime example's manifest lists `$ASCEND_HOME_PATH`-based CANN folders and
drops the missing ones (docs/upstream.md §8.11).
"""

from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path

import pytest

from pgraph.backends.a2a3 import build
from pgraph.backends.a2a3.config import LAYOUTS, load_config
from pgraph.backends.target import BuildInfo, TargetRefused
from pgraph.cli import main
from tests.conftest import HEAD_SPEC, ROOT, load_kernel_config, plan_ok

#: the packaged devkit folders, as a2a3.toml lists them
DEVKIT = ("include", "include/experiment/runtime", "include/experiment/msprof", "compiler/tikcpp",
          "compiler/tikcpp/tikcfw", "compiler/tikcpp/tikcfw/impl", "compiler/tikcpp/tikcfw/interface")
EXTERN_FIDS = {0, 11, 12}
EXAMPLE = ROOT / "tests" / "examples" / "a2a3_auto.pgl"


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    assert "Traceback" not in err.getvalue()
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def head_files() -> dict[str, str]:
    return build(plan_ok(HEAD_SPEC), BuildInfo(str(HEAD_SPEC)))


def loaded(files: dict[str, str], where: Path):
    for rel, text in files.items():
        (where / rel).parent.mkdir(parents=True, exist_ok=True)
        (where / rel).write_text(text, encoding="utf-8")
    return load_kernel_config(where / "kernel_config.py")


def test_packaged_configuration() -> None:
    cfg = load_config()
    assert cfg.include_dirs == DEVKIT
    assert cfg.layout == "pypto" and cfg.orchestration_dir == "orchestration"
    assert LAYOUTS == {"pypto": "orchestration", "runtime": "kernels/orchestration"}


def test_extern_kernels_get_the_devkit_folders_that_exist(head_files: dict[str, str], tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """With ASCEND_HOME_PATH at a toolkit holding three of the folders (tikcfw's parent comes with
    it), each extern entry lists exactly those, in the configuration's order; generated kernels
    have no include key."""
    home = tmp_path / "cann"
    for d in ("compiler/tikcpp/tikcfw", "include"):     # created out of order on purpose
        (home / d).mkdir(parents=True)
    monkeypatch.setenv("ASCEND_HOME_PATH", str(home))
    cfg = loaded(head_files, tmp_path / "out")
    want = [str(home / "include"), str(home / "compiler" / "tikcpp"), str(home / "compiler" / "tikcpp" / "tikcfw")]
    for k in cfg.KERNELS:
        if k["func_id"] in EXTERN_FIDS:
            assert k["external"] is True and k["extra_include_dirs"] == want, k["func_id"]
        else:
            assert "extra_include_dirs" not in k and "external" not in k, k["func_id"]
    # pypto's key order: func_id, name, source, core_type, external, extra_include_dirs, signature
    assert list(cfg.KERNELS[0]) == ["func_id", "name", "source", "core_type", "external", "extra_include_dirs",
                                    "signature"]


def test_without_a_toolkit_the_lists_are_empty(head_files: dict[str, str], tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ASCEND_HOME_PATH", raising=False)
    cfg = loaded(head_files, tmp_path)
    assert [k["extra_include_dirs"] for k in cfg.KERNELS if k["func_id"] in EXTERN_FIDS] == [[], [], []]


def test_spec_includes_follow_the_devkit_folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An extern's own `includes` come after the devkit folders (relative ones under _ROOT_DIR)."""
    spec = tmp_path / "ext.pgl"
    spec.write_text('tensor x : f32[4, 8] external\n'
                    'extern kernel ex aiv source "vendor/ex.cpp" includes "vendor/inc", "/opt/pto/include" (t : inout f32[4, 8])\n'
                    'entry e { at t1 { call ex(x) } }\n', encoding="utf-8")
    home = tmp_path / "cann"
    (home / "include").mkdir(parents=True)
    monkeypatch.setenv("ASCEND_HOME_PATH", str(home))
    out = tmp_path / "out"
    cfg = loaded(build(plan_ok(spec), BuildInfo(str(spec))), out)
    (k,) = cfg.KERNELS
    assert k["extra_include_dirs"] == [str(home / "include"), str(out / "vendor" / "inc"), "/opt/pto/include"]


def test_a_spec_without_extern_kernels_is_unchanged(tmp_path: Path) -> None:
    """No extern kernel: no `import os`, no devkit table (the kernel_config of before)."""
    text = build(plan_ok(EXAMPLE), BuildInfo(str(EXAMPLE)))["kernel_config.py"]
    assert "import os" not in text and "_DEVKIT_INCLUDE_DIRS" not in text and "ASCEND_HOME_PATH" not in text


def test_target_config_replaces_the_devkit_list(tmp_path: Path) -> None:
    """An empty list in a --target-config file: externs get no include key, as before the option."""
    conf = tmp_path / "nodevkit.toml"
    conf.write_text("[devkit]\ninclude_dirs = []\n", encoding="utf-8")
    out = tmp_path / "out"
    code, _, err = cli("build", str(HEAD_SPEC), "--target", "a2a3", "--target-config", str(conf), "-o", str(out))
    assert code == 0, err
    text = (out / "kernel_config.py").read_text(encoding="utf-8")
    assert "extra_include_dirs" not in text and "import os" not in text
    assert "regenerate with `pgraph build SPEC --target a2a3 --target-config nodevkit.toml -o OUTDIR`" in text


def test_runtime_layout_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--layout runtime`: the orchestration under kernels/orchestration/, kernel_config.py at the
    top naming it there; the .cpp is the default layout's byte for byte (but the regenerate line)."""
    monkeypatch.delenv("ASCEND_HOME_PATH", raising=False)
    out = tmp_path / "runtime"
    code, stdout, err = cli("build", str(HEAD_SPEC), "--target", "a2a3", "--layout", "runtime", "-o", str(out))
    assert code == 0, err
    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert files == [".pgraph-build", "kernel_config.py", "kernels/orchestration/decode_fwd_layers.cpp"]
    assert stdout.splitlines() == [f"wrote {out / 'kernel_config.py'}",
                                   f"wrote {out / 'kernels/orchestration/decode_fwd_layers.cpp'}"]
    cfg = load_kernel_config(out / "kernel_config.py")
    assert cfg.ORCHESTRATION["source"] == str(out / "kernels" / "orchestration" / "decode_fwd_layers.cpp")
    default = tmp_path / "pypto"
    assert cli("build", str(HEAD_SPEC), "--target", "a2a3", "-o", str(default))[0] == 0
    a = (default / "orchestration" / "decode_fwd_layers.cpp").read_text(encoding="utf-8")
    b = (out / "kernels" / "orchestration" / "decode_fwd_layers.cpp").read_text(encoding="utf-8")
    assert b == a.replace("--target a2a3 -o OUTDIR", "--target a2a3 --layout runtime -o OUTDIR")
    assert a != b
    # the same folder rebuilt in the other layout: the old orchestration goes, a kernel body stays
    (out / "kernels" / "aiv").mkdir()
    (out / "kernels" / "aiv" / "copy_hidden.cpp").write_text("// body\n", encoding="utf-8")
    assert cli("build", str(HEAD_SPEC), "--target", "a2a3", "-o", str(out))[0] == 0
    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert files == [".pgraph-build", "kernel_config.py", "kernels/aiv/copy_hidden.cpp",
                     "orchestration/decode_fwd_layers.cpp"]


@pytest.mark.parametrize(("text", "message"), [
    ('[devkit]\ninclude_dirs = ["/usr/include"]\n', "'/usr/include' must be a folder relative to $ASCEND_HOME_PATH"),
    ('[devkit]\ninclude_dirs = ["../x"]\n', "'../x' must be a folder relative to $ASCEND_HOME_PATH"),
    ('[devkit]\ninclude_dirs = "include"\n', "devkit.include_dirs must be a list of folders"),
    ('[devkit]\ninclude = []\n', "unknown key 'include' in [devkit] (known: include_dirs)"),
    ('[output]\nlayout = "flat"\n', "output.layout must be one of pypto, runtime, got 'flat'"),
    ('[machine]\nx = 1\n', "unknown section [machine]"),
    ('[devkit\n', "is not valid TOML"),
])
def test_bad_target_config_is_a_usage_error(tmp_path: Path, text: str, message: str) -> None:
    conf = tmp_path / "bad.toml"
    conf.write_text(text, encoding="utf-8")
    with pytest.raises(TargetRefused, match=None) as err:
        load_config([conf])
    assert message in str(err.value)
    out = tmp_path / "out"
    code, _, stderr = cli("build", str(HEAD_SPEC), "--target", "a2a3", "--target-config", str(conf), "-o", str(out))
    assert code == 2 and message in stderr and not out.exists()


def test_a2a3_options_on_another_target_are_a_usage_error(tmp_path: Path) -> None:
    code, _, err = cli("build", str(HEAD_SPEC), "--target", "dot", "--layout", "runtime", "-o", str(tmp_path / "g"))
    assert code == 2 and "options of --target a2a3, not of --target dot" in err
    missing = tmp_path / "nope.toml"
    code, _, err = cli("build", str(HEAD_SPEC), "--target", "a2a3", "--target-config", str(missing),
                       "-o", str(tmp_path / "o"))
    assert code == 2 and f"cannot read the target configuration {missing}" in err
    assert os.path.exists(tmp_path) and not (tmp_path / "o").exists()
