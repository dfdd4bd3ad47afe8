"""Includes and `--config` stay inside the spec's project root; special files are never opened.

Issue 10 (security): `include "/etc/passwd"` and `--config /etc/passwd` were read and their
first line printed in the diagnostic; an include of a FIFO blocked forever; an include that is
a symlink loop crashed (RuntimeError from `Path.resolve`). The rule (docs/language.md §3):
the project root is the nearest folder, from the spec's own folder up, holding `.git`,
`pyproject.toml` or `pgraph.toml` (else the spec's folder); every include and the config file
must resolve, symlinks followed, inside it, unless `--allow-include-outside` is given.
"""

from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path

import pytest

from pgraph.cli import main
from pgraph.frontend import loader
from pgraph.frontend.loader import project_root
from tests.conftest import time_limit

BODY = ("tensor x : f32[16, 64] external\nkernel k aiv (a : inout f32[16, 64])\n"
        "entry e { at a { call k(x) } }\n")
#: A line no .pgl parser accepts, so a diagnostic that read the file would quote it.
SECRET = "SECRET-FIRST-LINE do-not-print-me"




def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), time_limit(20):
        code = main(list(argv))
    assert "Traceback" not in err.getvalue()
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """tmp/proj (a project: it holds pgraph.toml) beside tmp/secret.pgl, outside it."""
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "pgraph.toml").write_text("", encoding="utf-8")
    (tmp_path / "secret.pgl").write_text(SECRET + "\n", encoding="utf-8")
    return proj


def spec(proj: Path, include: str, name: str = "main.pgl") -> Path:
    path = proj / name
    path.write_text(f'include "{include}"\n' + BODY, encoding="utf-8")
    return path


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every path pgraph's loader reads (the spec, includes, configs)."""
    seen: list[Path] = []
    real = loader.read_source

    def spy(path: Path, display: str | None = None):  # type: ignore[no-untyped-def]
        seen.append(Path(os.path.realpath(path)))
        return real(path, display)

    monkeypatch.setattr(loader, "read_source", spy)
    return seen


# ---- the project root ---------------------------------------------------------------------------------

def test_project_root_is_the_nearest_marked_folder(tmp_path: Path) -> None:
    (tmp_path / "a" / "b" / "c").mkdir(parents=True)
    (tmp_path / "a" / "pyproject.toml").write_text("", encoding="utf-8")
    assert project_root(tmp_path / "a" / "b" / "c" / "s.pgl") == (tmp_path / "a").resolve()
    (tmp_path / "a" / "b" / ".git").mkdir()  # a nearer one wins
    assert project_root(tmp_path / "a" / "b" / "c" / "s.pgl") == (tmp_path / "a" / "b").resolve()
    (tmp_path / "lone").mkdir()
    assert project_root(tmp_path / "lone" / "s.pgl") == (tmp_path / "lone").resolve()  # no marker: its folder


def test_repository_specs_are_inside_their_root() -> None:
    """specs/variants/*.pgl include "../decode_layer.pgl": specs/ (its pgraph.toml, shipped in the wheel) holds both."""
    root = Path(__file__).resolve().parents[2]
    assert project_root(root / "specs" / "variants" / "decode_layer_762.pgl") == root / "specs"
    code, _, err = cli("check", str(root / "specs" / "variants" / "decode_layer_762.pgl"))
    assert code == 0, err


def test_include_from_a_subfolder_up_to_the_root_is_read(project: Path) -> None:
    (project / "common.pgl").write_text("const A = 1\n", encoding="utf-8")
    (project / "sub").mkdir()
    assert cli("check", str(spec(project / "sub", "../common.pgl")))[0] == 0


# ---- includes outside it ----------------------------------------------------------------------------

@pytest.mark.parametrize("how", ["relative", "absolute"])
def test_include_outside_the_root_is_pg005_and_not_read(project: Path, reads: list[Path], how: str) -> None:
    target = "../secret.pgl" if how == "relative" else str(project.parent / "secret.pgl")
    path = spec(project, target)
    code, _, err = cli("check", str(path))
    assert code == 1
    assert f"main.pgl:1:1: error[PG005 include-not-found]: included file '{target}' is outside the project root" in err
    assert "^^^^" in err and "hint:" in err and "--allow-include-outside" in err
    assert SECRET not in err
    assert project.parent / "secret.pgl" not in reads  # never opened
    # the hint, applied, removes the diagnostic (and reads the file: now it is a syntax error)
    code, _, err = cli("check", "--allow-include-outside", str(path))
    assert code == 1 and "PG005" not in err and "PG001" in err and SECRET in err


@pytest.mark.skipif(not Path("/etc/passwd").is_file(), reason="needs /etc/passwd")
def test_include_etc_passwd_never_prints_its_first_line(project: Path) -> None:
    first = Path("/etc/passwd").read_text(encoding="utf-8", errors="replace").splitlines()[0]
    code, out, err = cli("check", str(spec(project, "/etc/passwd")))
    assert code == 1 and "outside the project root" in err
    assert first not in err + out


def test_symlink_out_of_the_root_is_resolved_first(project: Path, reads: list[Path]) -> None:
    (project / "link.pgl").symlink_to(project.parent / "secret.pgl")
    code, _, err = cli("check", str(spec(project, "link.pgl")))
    assert code == 1 and "included file 'link.pgl' (a symlink to" in err and "outside the project root" in err
    assert SECRET not in err and project.parent / "secret.pgl" not in reads


def test_symlink_within_the_root_is_followed(project: Path) -> None:
    (project / "lib").mkdir()
    (project / "lib" / "real.pgl").write_text("const A = 1\n", encoding="utf-8")
    (project / "alias.pgl").symlink_to(project / "lib" / "real.pgl")
    assert cli("check", str(spec(project, "alias.pgl")))[0] == 0


def test_root_symlinked_from_elsewhere_still_contains_its_files(tmp_path: Path, project: Path) -> None:
    """The root is compared after resolving: a spec reached through a linked folder includes its siblings."""
    (project / "common.pgl").write_text("const A = 1\n", encoding="utf-8")
    spec(project, "common.pgl")
    (tmp_path / "alias").symlink_to(project, target_is_directory=True)
    assert cli("check", str(tmp_path / "alias" / "main.pgl"))[0] == 0


# ---- special files and symlink loops ----------------------------------------------------------------------

@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_fifo_include_is_refused_before_opening(project: Path) -> None:
    """It blocked forever in open() (no writer ever comes)."""
    os.mkfifo(project / "pipe.pgl")
    code, _, err = cli("check", str(spec(project, "pipe.pgl")))
    assert code == 1 and "error[PG005 include-not-found]: cannot read included file 'pipe.pgl': is a FIFO" in err
    assert "hint: include a regular .pgl file" in err


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_fifo_spec_and_config_are_usage_errors(project: Path) -> None:
    os.mkfifo(project / "pipe.pgl")
    code, _, err = cli("check", str(project / "pipe.pgl"))
    assert code == 2 and err.startswith("pgraph: error: cannot read") and "is a FIFO" in err
    clean = project / "clean.pgl"
    clean.write_text(BODY, encoding="utf-8")
    code, _, err = cli("check", str(clean), "--config", str(project / "pipe.pgl"))
    assert code == 2 and "is a FIFO" in err


@pytest.mark.skipif(not Path("/dev/null").exists(), reason="needs /dev/null")
def test_device_include_is_refused_even_when_outside_is_allowed(project: Path) -> None:
    code, _, err = cli("check", "--allow-include-outside", str(spec(project, "/dev/null")))
    assert code == 1 and "cannot read included file '/dev/null': is a character device" in err
    assert cli("check", "/dev/null")[0] == 2


def test_symlink_loop_include_is_pg005_not_a_traceback(project: Path) -> None:
    (project / "a.pgl").symlink_to("b.pgl")
    (project / "b.pgl").symlink_to("a.pgl")
    code, _, err = cli("check", str(spec(project, "a.pgl")))
    assert code == 1 and "error[PG005 include-not-found]: cannot read included file 'a.pgl'" in err
    assert "symbolic links" in err and "hint: the path is a chain of symlinks that loops" in err
    code, _, err = cli("check", str(project / "a.pgl"))  # the spec itself
    assert code == 2 and "symbolic links" in err


def test_symlink_loop_include_as_a_process(project: Path) -> None:
    """Through the console entry point: the RuntimeError of Path.resolve() printed a traceback."""
    import subprocess
    import sys

    (project / "a.pgl").symlink_to("b.pgl")
    (project / "b.pgl").symlink_to("a.pgl")
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run([sys.executable, "-m", "pgraph", "check", str(spec(project, "a.pgl"))],
                          capture_output=True, text=True, timeout=60, check=False,
                          env={**os.environ, "PYTHONPATH": str(root)})
    assert proc.returncode == 1 and "Traceback" not in proc.stderr and "PG005" in proc.stderr


def test_oversized_regular_include_is_still_pg005(project: Path) -> None:
    big = project / "big.pgl"
    with big.open("wb") as fh:
        fh.truncate(loader.MAX_SOURCE_BYTES + 1)  # sparse: no 16 MiB written
    code, _, err = cli("check", str(spec(project, "big.pgl")))
    assert code == 1 and "larger than 16 MiB" in err


# ---- --config -------------------------------------------------------------------------------------------

def test_config_outside_the_root_is_a_usage_error_without_reading(project: Path, reads: list[Path]) -> None:
    clean = project / "clean.pgl"
    clean.write_text(BODY, encoding="utf-8")
    code, out, err = cli("check", str(clean), "--config", str(project.parent / "secret.pgl"))
    assert code == 2 and err.startswith("pgraph: error: --config ") and "outside the project root" in err
    assert "--allow-include-outside" in err and SECRET not in err + out
    assert project.parent / "secret.pgl" not in reads
    code, _, err = cli("check", str(clean), "--allow-include-outside", "--config", str(project.parent / "secret.pgl"))
    assert code == 1 and "PG001" in err  # read now: the secret line is not a const


@pytest.mark.skipif(not Path("/etc/passwd").is_file(), reason="needs /etc/passwd")
def test_config_etc_passwd_is_a_usage_error(project: Path) -> None:
    first = Path("/etc/passwd").read_text(encoding="utf-8", errors="replace").splitlines()[0]
    clean = project / "clean.pgl"
    clean.write_text(BODY, encoding="utf-8")
    code, out, err = cli("check", str(clean), "--config", "/etc/passwd")
    assert code == 2 and first not in err + out


def test_config_symlink_out_of_the_root_is_refused(project: Path) -> None:
    clean = project / "clean.pgl"
    clean.write_text(BODY, encoding="utf-8")
    (project / "configs").mkdir()
    (project / "configs" / "mine.pgl").symlink_to(project.parent / "secret.pgl")
    for config in ("mine", str(project / "configs" / "mine.pgl")):
        code, _, err = cli("check", str(clean), "--config", config)
        assert code == 2 and "outside the project root" in err and SECRET not in err


def test_named_config_lookup_stops_at_the_root(tmp_path: Path, project: Path) -> None:
    """`--config NAME` climbs to the nearest configs/ folder, but not out of the project."""
    clean = project / "clean.pgl"
    clean.write_text(BODY, encoding="utf-8")
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "up.pgl").write_text("const NUM_LAYERS = 1\n", encoding="utf-8")
    code, _, err = cli("check", str(clean), "--config", "up")
    assert code == 2 and "no config named 'up'" in err and "up to the project root" in err
    code, _, err = cli("check", str(clean), "--config", "up", "--allow-include-outside")
    assert code == 1 and "PG017" in err  # found and read: NUM_LAYERS is not declared by this spec


@pytest.mark.parametrize("where", ["before", "after"])
def test_flag_is_accepted_before_and_after_the_subcommand(project: Path, where: str) -> None:
    path = spec(project, "../secret.pgl")
    argv = ["--allow-include-outside", "check", str(path)] if where == "before" else \
        ["check", str(path), "--allow-include-outside"]
    code, _, err = cli(*argv)
    assert code == 1 and "PG005" not in err


@pytest.mark.parametrize("command", [["plan"], ["build", "--target", "dot", "-o", "OUT"], ["sim"]])
def test_every_spec_reading_command_applies_the_rule(project: Path, command: list[str]) -> None:
    path = spec(project, "../secret.pgl")
    argv = [str(project / "out") if a == "OUT" else a for a in command]
    code, _, err = cli(*argv[:1], str(path), *argv[1:])
    assert code == 1 and "outside the project root" in err and SECRET not in err
