"""`pgraph run` on specs the planner rejects, or that `check` accepts but the NumPy run cannot take
(issue 10, "Crashes and hangs": a parameter direction changed from out to in gave "assignment
destination is read-only"; a shape of 2**31 tried to allocate 8 GiB). Each ends in a clear
message and exit 1 or 2, never a traceback or exit 3."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pgraph.backends.numpy.runner import memory_estimate
from pgraph.cli import main
from pgraph.pipeline import Options, plan_program
from tests.conftest import HEAD_SPEC


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(["run", *argv])
    out = capsys.readouterr()
    text = out.out + out.err
    assert "Traceback" not in text and "internal error" not in text, text
    return code, text


def test_run_refuses_a_plan_with_errors(capsys: pytest.CaptureFixture[str]) -> None:
    """BLOCK_SIZE = 2**31 is rejected by `check` (two errors); `run` used to go on and overflow int32."""
    code, text = _run(capsys, str(HEAD_SPEC), "--config", "small", "--layers", "1", "-D", "BLOCK_SIZE=2147483648")
    assert code == 1
    assert "error[" in text


def test_run_refuses_more_memory_than_its_limit(capsys: pytest.CaptureFixture[str]) -> None:
    code, text = _run(capsys, str(HEAD_SPEC), "--config", "small", "--layers", "1", "--max-memory", "0.01")
    assert code == 2
    assert "would need about" in text and "--max-memory" in text


def test_memory_estimate_counts_each_buffer_once_and_three_layers_of_weights() -> None:
    """Small config: a hand count of the two largest per-layer tensors bounds the estimate from below.

    w_gate and w_up are HIDDEN x INTERMEDIATE bf16 per layer (1280 x 4352 x 2 bytes = 11.1 MB
    each, specs/configs/small.pgl); with 3 layers kept, they alone need 3 x 2 x 11.1 MB."""
    plan, _ = plan_program(HEAD_SPEC, Options(config="small", layers=40))
    assert plan is not None
    est40 = memory_estimate(plan.program, 40)
    assert est40 >= 3 * 2 * 1280 * 4352 * 2
    plan1, _ = plan_program(HEAD_SPEC, Options(config="small", layers=1))
    assert plan1 is not None
    est1 = memory_estimate(plan1.program, 1)
    # one layer keeps one layer of weights: the 40-layer estimate holds two more of each
    assert est1 < est40 < 3.5 * est1


def test_a_kernel_writing_an_in_parameter_is_a_kernel_fault(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """copy_hidden's `cur` declared `in` and its region `reads`: `check` now refuses the spec,
    since nothing writes hidden0 before x_gamma0 reads it (PG122); run on that plan anyway, the
    NumPy kernel still writes the argument, and the run reports a kernel fault (exit 1)."""
    specs = tmp_path / "specs"
    shutil.copytree(HEAD_SPEC.parent, specs)
    (tmp_path / "pgraph.toml").write_text("")
    common = specs / "decode_common.pgl"
    text = common.read_text()
    assert "kernel copy_hidden aiv (cur : out f32" in text
    common.write_text(text.replace("kernel copy_hidden aiv (cur : out f32", "kernel copy_hidden aiv (cur : in f32"))
    layer = specs / "decode_layer.pgl"
    text = layer.read_text()
    old = "writes hidden0[cb*COPY_ROW_TILE +: COPY_ROW_TILE, :]"
    assert text.count(old) == 1
    layer.write_text(text.replace(old, "reads hidden0[cb*COPY_ROW_TILE +: COPY_ROW_TILE, :]"))
    assert main(["check", str(layer), "--config", "small"]) == 1
    got = capsys.readouterr()
    assert "error[PG122 uncovered-read]" in got.out + got.err and "hidden0" in got.out + got.err
    plan, bag = plan_program(layer, Options(config="small", layers=1, full=True))
    assert plan is not None and {d.code for d in bag.items if d.level.name == "ERROR"} == {"PG122"}
    from pgraph.backends.numpy.runner import TARGET, RunOptions

    lines: list[str] = []
    result = TARGET.run(plan, RunOptions(spec=str(layer), config="small", echo=lines.append))
    assert result.exit_code == 1
    assert any("kernel 'copy_hidden' writes an argument passed read-only" in line for line in lines), lines[-5:]
