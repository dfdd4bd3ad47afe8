"""`pgraph build -o OUTDIR` replaces the output folder in one step (pgraph.backends.output.write_tree).

Issue 10 (security): the build directory was not replaced as a whole: a failure or a signal
between the writes left a new `kernel_config.py` beside the old `.cpp`, and a symlink inside
the output directory was followed, so its target outside was overwritten.
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import stat
from pathlib import Path

import pytest

from pgraph.backends import output
from pgraph.backends.output import MARKER, write_tree
from pgraph.cli import main
from tests.conftest import ROOT

EXAMPLE = ROOT / "tests" / "examples" / "a2a3_auto.pgl"
CPP = "orchestration/auto_example.cpp"
BUILT = {"kernel_config.py", CPP}


def cli(*argv: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    assert "Traceback" not in err.getvalue()
    return code, err.getvalue()


def build(spec: Path, out: Path) -> tuple[int, str]:
    return cli("build", str(spec), "--target", "a2a3", "-o", str(out))


def snapshot(root: Path) -> dict[str, tuple[str, bytes | str]]:
    """Every entry under root: ('file', bytes), ('link', target) or ('dir', '')."""
    got: dict[str, tuple[str, bytes | str]] = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        if p.is_symlink():
            got[rel] = ("link", os.readlink(p))
        elif p.is_dir():
            got[rel] = ("dir", "")
        else:
            got[rel] = ("file", p.read_bytes())
    return got


def leftovers(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if ".pgraph-" in p.name)


@pytest.fixture
def spec(tmp_path: Path) -> Path:
    path = tmp_path / "s.pgl"
    path.write_text(EXAMPLE.read_text(encoding="utf-8"), encoding="utf-8")
    return path


@pytest.fixture
def old_build(tmp_path: Path, spec: Path) -> Path:
    """A previous build of a *different* program (another entry name, other bytes) at tmp/out."""
    other = tmp_path / "other.pgl"
    other.write_text(EXAMPLE.read_text(encoding="utf-8").replace("entry auto_example", "entry previous"),
                     encoding="utf-8")
    out = tmp_path / "out"
    assert build(other, out)[0] == 0
    assert (out / "orchestration" / "previous.cpp").is_file()
    return out


# ---- the tree and its marker -------------------------------------------------------------------------------

def test_fresh_build_writes_the_files_and_the_marker(tmp_path: Path, spec: Path) -> None:
    out = tmp_path / "deep" / "out"
    code, _ = build(spec, out)
    assert code == 0
    assert {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()} == BUILT | {MARKER}
    lines = (out / MARKER).read_text(encoding="utf-8").splitlines()
    assert lines[0].startswith("# pgraph build output") and lines[1:] == sorted(BUILT)
    assert leftovers(out.parent) == []
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(out.stat().st_mode) == 0o777 & ~umask  # not mkdtemp's 0700
    assert stat.S_IMODE((out / "kernel_config.py").stat().st_mode) == 0o666 & ~umask


def test_rebuild_is_byte_identical(tmp_path: Path, spec: Path) -> None:
    out = tmp_path / "out"
    assert build(spec, out)[0] == 0
    first = snapshot(out)
    assert build(spec, out)[0] == 0
    assert snapshot(out) == first


def test_rebuild_replaces_the_previous_build_whole(old_build: Path, spec: Path) -> None:
    """The previous build's orchestration/previous.cpp is listed in its marker: gone with it."""
    assert build(spec, old_build)[0] == 0
    assert {p.relative_to(old_build).as_posix() for p in old_build.rglob("*") if p.is_file()} == BUILT | {MARKER}


def test_rebuild_keeps_files_it_did_not_write(old_build: Path, spec: Path, tmp_path: Path) -> None:
    """Kernel bodies live at the conventional kernels/<core>/<kernel>.cpp inside OUTDIR: kept
    (as the same inode), a user symlink kept as the same symlink, a note in orchestration/ kept."""
    kernel = old_build / "kernels" / "aiv" / "k.cpp"
    kernel.parent.mkdir(parents=True)
    kernel.write_text("// the kernel body\n", encoding="utf-8")
    inode = kernel.stat().st_ino
    (old_build / "shared").symlink_to(tmp_path)
    (old_build / "orchestration" / "NOTES.txt").write_text("mine\n", encoding="utf-8")
    assert build(spec, old_build)[0] == 0
    assert kernel.read_text(encoding="utf-8") == "// the kernel body\n" and kernel.stat().st_ino == inode
    assert (old_build / "shared").is_symlink() and os.readlink(old_build / "shared") == str(tmp_path)
    assert (old_build / "orchestration" / "NOTES.txt").read_text(encoding="utf-8") == "mine\n"
    assert not (old_build / "orchestration" / "previous.cpp").exists()


# ---- symlinks inside OUTDIR are never followed --------------------------------------------------------------

def test_planted_file_symlink_target_is_not_overwritten(old_build: Path, spec: Path, tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"precious\n")
    (old_build / "kernel_config.py").unlink()
    (old_build / "kernel_config.py").symlink_to(victim)
    assert build(spec, old_build)[0] == 0
    assert victim.read_bytes() == b"precious\n"
    cfg = old_build / "kernel_config.py"
    assert not cfg.is_symlink() and cfg.read_text(encoding="utf-8").startswith("# Kernel and Orchestration Configuration")


def test_planted_folder_symlink_is_not_written_through(old_build: Path, spec: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_bytes(b"keep\n")
    for p in (old_build / "orchestration").iterdir():
        p.unlink()
    (old_build / "orchestration").rmdir()
    (old_build / "orchestration").symlink_to(elsewhere, target_is_directory=True)
    assert build(spec, old_build)[0] == 0
    assert snapshot(elsewhere) == {"keep.txt": ("file", b"keep\n")}
    assert not (old_build / "orchestration").is_symlink() and (old_build / CPP).is_file()


def test_outdir_named_through_a_symlink_replaces_the_folder_it_names(tmp_path: Path, spec: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real, target_is_directory=True)
    assert build(spec, link)[0] == 0
    assert link.is_symlink() and (real / "kernel_config.py").is_file()


# ---- the old output survives every failure ------------------------------------------------------------------

def _fail_on_second_write(monkeypatch: pytest.MonkeyPatch, fail: object) -> None:
    real = output._write_file
    calls = []

    def writer(path: Path, text: str) -> None:
        calls.append(path)
        if len(calls) == 2:
            if isinstance(fail, BaseException):
                raise fail
            assert callable(fail)
            fail()
        real(path, text)

    monkeypatch.setattr(output, "_write_file", writer)


def test_failure_between_writes_leaves_the_old_output(old_build: Path, spec: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    before = snapshot(old_build)
    _fail_on_second_write(monkeypatch, OSError(28, "No space left on device"))
    code, err = build(spec, old_build)
    assert code == 2 and "No space left on device" in err
    assert snapshot(old_build) == before
    assert leftovers(old_build.parent) == []


def test_unexpected_exception_between_writes_leaves_the_old_output(old_build: Path, spec: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    before = snapshot(old_build)
    _fail_on_second_write(monkeypatch, RuntimeError("boom"))
    code, err = build(spec, old_build)
    assert code == 3 and "internal error" in err
    assert snapshot(old_build) == before and leftovers(old_build.parent) == []


def test_sigint_between_writes_leaves_the_old_output(old_build: Path, spec: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A real SIGINT delivered to the process between the two file writes: exit 130, old tree intact.

    Python's KeyboardInterrupt handler is installed for the test: a process started in the
    background by a non-interactive shell inherits SIGINT ignored, and Python then keeps it
    ignored (the suite run with `&` once exited 0 here)."""
    before = snapshot(old_build)
    _fail_on_second_write(monkeypatch, lambda: os.kill(os.getpid(), signal.SIGINT))
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        code, err = build(spec, old_build)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert code == 130 and "interrupted" in err
    assert snapshot(old_build) == before and leftovers(old_build.parent) == []


def test_failure_of_the_swap_leaves_the_old_output(old_build: Path, spec: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = snapshot(old_build)

    def refuse(a: Path, b: Path) -> bool:
        raise OSError(16, "Device or resource busy")

    monkeypatch.setattr(output, "exchange", refuse)
    assert build(spec, old_build)[0] == 2
    assert snapshot(old_build) == before and leftovers(old_build.parent) == []


def test_fallback_without_renameat2(old_build: Path, spec: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two renames instead of the exchange; a failure of the second puts the old tree back."""
    monkeypatch.setattr(output, "exchange", lambda a, b: False)
    before = snapshot(old_build)
    real_rename = os.rename

    def second_fails(src: object, dst: object) -> None:
        if ".pgraph-new-" in str(src):
            raise OSError(5, "Input/output error")
        real_rename(src, dst)  # type: ignore[arg-type]

    monkeypatch.setattr(output.os, "rename", second_fails)
    assert build(spec, old_build)[0] == 2
    assert snapshot(old_build) == before and leftovers(old_build.parent) == []
    monkeypatch.setattr(output.os, "rename", real_rename)
    assert build(spec, old_build)[0] == 0
    assert (old_build / CPP).is_file() and leftovers(old_build.parent) == []


def test_exchange_swaps_two_folders(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "in_a").write_text("", encoding="utf-8")
    if not output.exchange(a, b):
        pytest.skip("no renameat2(RENAME_EXCHANGE) here: the fallback is tested above")
    assert (b / "in_a").exists() and not (a / "in_a").exists()


# ---- which folders are replaced ---------------------------------------------------------------------------

def test_folder_that_is_not_a_build_is_refused(tmp_path: Path, spec: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".bashrc").write_text("export X=1\n", encoding="utf-8")
    (home / "kernel_config.py").write_text("mine\n", encoding="utf-8")
    before = snapshot(home)
    code, err = build(spec, home)
    assert code == 2 and "is not a pgraph build output" in err and ".bashrc" in err
    assert snapshot(home) == before and leftovers(tmp_path) == []


def test_empty_folder_and_marker_less_old_output_are_replaced(tmp_path: Path, spec: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    os.chmod(empty, 0o750)
    assert build(spec, empty)[0] == 0
    assert stat.S_IMODE(empty.stat().st_mode) == 0o750  # the folder keeps its mode
    legacy = tmp_path / "legacy"  # what a pgraph without the marker wrote
    (legacy / "orchestration").mkdir(parents=True)
    (legacy / "kernel_config.py").write_text("old\n", encoding="utf-8")
    (legacy / CPP).write_text("old\n", encoding="utf-8")
    assert build(spec, legacy)[0] == 0
    assert (legacy / MARKER).is_file() and (legacy / "kernel_config.py").read_text(encoding="utf-8") != "old\n"


def test_entry_in_the_way_is_refused_before_writing(old_build: Path, spec: Path) -> None:
    (old_build / "kernel_config.py").unlink()
    (old_build / "kernel_config.py").mkdir()
    (old_build / "kernel_config.py" / "inside.txt").write_text("x\n", encoding="utf-8")
    before = snapshot(old_build)
    code, err = build(spec, old_build)
    assert code == 2 and "is in the way of the build (a folder where it writes a file)" in err
    assert snapshot(old_build) == before


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_special_file_in_the_output_is_refused(old_build: Path, spec: Path) -> None:
    os.mkfifo(old_build / "pipe")
    code, err = build(spec, old_build)
    assert code == 2 and "is a special file" in err
    assert (old_build / "pipe").is_fifo()


def test_output_that_is_a_file_is_a_usage_error(spec: Path) -> None:
    code, err = build(spec, spec)
    assert code == 2 and "it exists and is not a directory" in err


def test_write_tree_refuses_paths_outside_the_tree(tmp_path: Path) -> None:
    for bad in ("../x", "/abs", "a/../b", "", "a//b", MARKER):
        with pytest.raises(ValueError):
            write_tree({bad: "x"}, tmp_path / "out")
    assert not (tmp_path / "out").exists() and not (tmp_path / "x").exists()


@pytest.mark.skipif(not Path("/dev/null").exists(), reason="needs /dev/null")
def test_plan_to_dev_null_still_works(spec: Path) -> None:
    assert cli("plan", str(spec), "-o", "/dev/null")[0] == 0
    assert Path("/dev/null").is_char_device()


def test_output_through_a_symlink_loop_is_a_usage_error(tmp_path: Path, spec: Path) -> None:
    """`plan -o LOOP`: Path.resolve() raised RuntimeError, an internal error (exit 3)."""
    loop = tmp_path / "loop"
    loop.symlink_to("loop")
    code, err = cli("plan", str(spec), "-o", str(loop))
    assert code == 2 and "cannot write" in err and "symbolic links" in err
    code, err = build(spec, loop)
    assert code == 2 and "symbolic links" in err
    assert loop.is_symlink() and os.readlink(loop) == "loop"
