"""The top-level guards of `pgraph.cli.main` and the integer-magnitude crashes of issue 10.

- A shape dimension >= 2**1024, in the spec or through `-D`, crashed with a traceback
  (`f"{v:.3e}"` needs a float, and such an int has none: OverflowError).
- Ctrl-C printed a traceback; it is now `pgraph: interrupted` and exit code 130.
- An unexpected exception exited 1, the code of "diagnostics with errors"; it is now an
  internal-error message asking for a bug report, with exit code 3 (the fuzz tests assert
  that it never fires).
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pgraph import cli
from tests.conftest import ROOT

SPEC = ("const N = 16\ntensor x : f32[N, 64] external\nkernel k aiv (a : inout f32[16, 64])\n"
        "entry e { at a { call k(x[0:16, :]) } }\n")


def run_main(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(list(argv))
    return code, out.getvalue(), err.getvalue()


def run_process(script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})


# ---- magnitudes ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("bits", [1024, 1100, 4000])
def test_shape_dimension_past_float_range_in_the_spec_is_pg018(tmp_path: Path, bits: int) -> None:
    path = tmp_path / "big.pgl"
    path.write_text(SPEC.replace("const N = 16", f"const N = {2**bits}"), encoding="utf-8")
    code, _, err = run_main("check", str(path))
    assert code == 1 and "Traceback" not in err
    assert "error[PG018 bad-expression]: shape dimension " in err and "exceeds 2**63" in err


@pytest.mark.parametrize("value", [2**1024, -(2**1024), 2**4095])
def test_shape_dimension_past_float_range_through_define_is_coded(tmp_path: Path, value: int) -> None:
    path = tmp_path / "s.pgl"
    path.write_text(SPEC, encoding="utf-8")
    code, _, err = run_main("check", str(path), "-D", f"N={value}")
    assert code == 1 and "Traceback" not in err and "internal error" not in err
    assert "error[PG0" in err


def test_shape_dimension_past_float_range_as_a_process(tmp_path: Path) -> None:
    path = tmp_path / "s.pgl"
    path.write_text(SPEC, encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "pgraph", "plan", str(path), "-D", f"N={2**1024}"],
                          capture_output=True, text=True, timeout=120, check=False,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 1 and "Traceback" not in proc.stderr and "PG018" in proc.stderr


# ---- Ctrl-C ------------------------------------------------------------------------------------------------

def _interrupt(*_: object, **__: object) -> object:
    raise KeyboardInterrupt


@pytest.mark.parametrize("argv", [["check", "S"], ["plan", "S"], ["build", "S", "--target", "a2a3", "-o", "OUT"]])
def test_ctrl_c_exits_130_without_a_traceback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str]) -> None:
    path = tmp_path / "s.pgl"
    path.write_text(SPEC, encoding="utf-8")
    monkeypatch.setattr(cli, "plan_program", _interrupt)
    args = [str(path) if a == "S" else str(tmp_path / "out") if a == "OUT" else a for a in argv]
    code, out, err = run_main(*args)
    assert code == 130 == cli.EXIT_INTERRUPTED
    assert err == "pgraph: interrupted\n" and out == ""
    assert not (tmp_path / "out").exists()


def test_ctrl_c_as_a_process() -> None:
    """Through a real interpreter: nothing of Python's own KeyboardInterrupt report reaches stderr."""
    proc = run_process(
        "import sys\nimport pgraph.cli as c\n"
        "def stop(*a, **k):\n    raise KeyboardInterrupt\n"
        "c.plan_program = stop\n"
        "sys.exit(c.main(['check', 'tests/examples/a2a3_auto.pgl']))\n")
    assert proc.returncode == 130, proc.stderr
    assert proc.stderr == "pgraph: interrupted\n"


# ---- unexpected exceptions ------------------------------------------------------------------------------------

def _boom(*_: object, **__: object) -> object:
    raise RuntimeError("boom in a pass")


def test_unexpected_exception_is_an_internal_error_with_exit_3(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "s.pgl"
    path.write_text(SPEC, encoding="utf-8")
    monkeypatch.setattr(cli, "plan_program", _boom)
    monkeypatch.delenv("PGRAPH_TRACEBACK", raising=False)
    code, _, err = run_main("plan", str(path))
    assert code == 3 == cli.EXIT_INTERNAL and code != cli.EXIT_ERRORS
    lines = err.splitlines()
    assert lines[0] == "pgraph: internal error: RuntimeError: boom in a pass"
    assert "this is a bug in pgraph" in err and "please report it" in err and "PGRAPH_TRACEBACK=1" in err
    assert "Traceback" not in err


def test_internal_error_trace_on_request(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "s.pgl"
    path.write_text(SPEC, encoding="utf-8")
    monkeypatch.setattr(cli, "plan_program", _boom)
    monkeypatch.setenv("PGRAPH_TRACEBACK", "1")
    code, _, err = run_main("check", str(path))
    assert code == 3 and "Traceback (most recent call last):" in err and "_boom" in err


def test_internal_error_as_a_process() -> None:
    proc = run_process(
        "import sys\nimport pgraph.cli as c\n"
        "def boom(*a, **k):\n    raise ZeroDivisionError('x')\n"
        "c.plan_program = boom\n"
        "sys.exit(c.main(['check', 'tests/examples/a2a3_auto.pgl']))\n")
    assert proc.returncode == 3 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("pgraph: internal error: ZeroDivisionError: x\n")
