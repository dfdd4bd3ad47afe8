"""Bad input that used to escape (issue 23): every case ends in exit 0, 1, 2 or 130 with a one-line
message, never a traceback, a hang or a file written outside the place named.

- Every file argument of every command goes through the one bounded reader
  (`pgraph.source.open_input`): a device (`sim --timing /dev/zero` read without end), a FIFO
  (an open would block) and an oversized regular file are usage errors before or while reading.
- Numeric options are validated when parsed (`run --max-memory inf` was an OverflowError, exit 3).
- Ctrl-C at start-up (while the command line's modules load) and mid-run is exit 130 with the
  line `pgraph: interrupted` (it was a KeyboardInterrupt traceback, and could be exit 1).
- `-o` through a dangling symlink is refused (`build` created the link's target outside the
  output folder).
- `import` reports a duplicate task record, and checks a deps.json record by record as it
  streams: a bad first edge is reported at its line without the rest of the file being parsed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from pgraph import cli
from pgraph.source import MAX_SOURCE_BYTES, MAX_TABLE_BYTES
from tests.conftest import HEAD_SPEC, ROOT

TINY = ROOT / "tests" / "examples" / "tiny_dot.pgl"
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def pgraph(*argv: str, timeout: float = 120, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """`python3 -m pgraph ARGV` as a process (a read that never ends fails the timeout, not the suite)."""
    return subprocess.run([sys.executable, "-m", "pgraph", *argv], capture_output=True, text=True, timeout=timeout,
                          cwd=cwd, env=ENV, check=False)


def usage_error(run: subprocess.CompletedProcess[str], *words: str) -> None:
    assert run.returncode == 2, (run.returncode, run.stderr[-2000:])
    assert "Traceback" not in run.stderr and "internal error" not in run.stderr, run.stderr
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith("pgraph"), last
    for w in words:
        assert w in last, (w, last)


# ---- file arguments -------------------------------------------------------------------------------


def file_arguments(bad: str, work: Path) -> list[list[str]]:
    """Every file argument of every command, each given `bad` in turn (the others valid)."""
    spec = str(HEAD_SPEC)
    deps_ok = work / "ok.json"
    deps_ok.write_text('{"tasks": [], "tensors": [], "edges": []}')
    return [
        ["check", bad], ["plan", bad], ["run", bad], ["build", bad, "--target", "dot", "-o", str(work / "o")],
        ["export", bad, "--deps-json", str(work / "d.json")], ["deps", bad, "x"], ["why", bad, "x", "y"],
        ["stats", bad], ["fmt", bad], ["sim", bad],
        ["check", spec, "--allow-include-outside", "--config", bad],
        ["sim", spec, "--layers", "1", "--timing", bad],
        ["sim", spec, "--layers", "1", "--calibration", bad],
        ["sim", spec, "--layers", "1", "--calibrate", bad, str(deps_ok)],
        ["sim", spec, "--layers", "1", "--calibrate", str(deps_ok), bad],
        ["sim", spec, "--layers", "1", "--vs", bad],
        ["import", bad],
        ["diff", bad, spec], ["diff", spec, bad],
    ]


@pytest.mark.parametrize("case", range(19))
def test_a_device_is_refused_by_every_file_argument(case: int, tmp_path: Path) -> None:
    """/dev/zero never ends: each file argument refuses it before reading (`--timing` read it
    until killed). The diff side is a deps.json when it ends in .json: a link named so."""
    zero = tmp_path / "zero.json"
    zero.symlink_to("/dev/zero")
    argv = file_arguments(str(zero), tmp_path)[case]
    usage_error(pgraph(*argv, timeout=90), "character device")


@pytest.mark.parametrize("case", [0, 10, 11, 12, 13, 16, 17])
def test_a_fifo_is_refused_without_blocking(case: int, tmp_path: Path) -> None:
    """A FIFO with no writer: an open without O_NONBLOCK would wait for ever; it is refused."""
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    argv = file_arguments(str(fifo), tmp_path)[case]
    usage_error(pgraph(*argv, timeout=90), "FIFO")


@pytest.mark.parametrize(("argv", "limit"), [
    (["check", "{f}"], MAX_SOURCE_BYTES),
    (["sim", str(HEAD_SPEC), "--layers", "1", "--timing", "{f}"], MAX_TABLE_BYTES),
])
def test_a_file_past_its_limit_is_refused(argv: list[str], limit: int, tmp_path: Path) -> None:
    """A regular file one byte past the reader's limit (sparse: no disk used) is EFBIG, exit 2."""
    big = tmp_path / "big.pgl"
    with big.open("wb") as fh:
        fh.truncate(limit + 1)
    usage_error(pgraph(*(a.format(f=big) for a in argv)), f"larger than {limit // 2**20} MiB")


# ---- numeric options ------------------------------------------------------------------------------


@pytest.mark.parametrize("argv", [
    ["run", str(HEAD_SPEC), "--max-memory", "inf"],
    ["run", str(HEAD_SPEC), "--max-memory", "nan"],
    ["run", str(HEAD_SPEC), "--max-memory", "-1"],
    ["run", str(HEAD_SPEC), "--max-memory", "0"],
    ["check", str(HEAD_SPEC), "--layers", "0"],
    ["plan", str(HEAD_SPEC), "--layers", "-2"],
    ["stats", str(HEAD_SPEC), "--layers", "x"],
    ["sim", str(HEAD_SPEC), "--path-steps", "-1"],
    ["diff", str(HEAD_SPEC), str(HEAD_SPEC), "--limit", "0"],
    ["check", str(HEAD_SPEC), "--layers", "9" * 5000],
])
def test_numeric_options_out_of_range_are_usage_errors(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """Refused when parsed (argparse exit 2), before anything is planned."""
    with pytest.raises(SystemExit) as stop:
        cli.main(argv)
    assert stop.value.code == 2
    err = capsys.readouterr().err
    option = next(a for a in argv if a.startswith("--"))
    assert f"argument {option}: " in err and "Traceback" not in err


@pytest.mark.parametrize("value", ["inf", "nan", "-inf"])
def test_sim_set_of_a_non_finite_figure_is_a_usage_error(value: str) -> None:
    usage_error(pgraph("sim", str(HEAD_SPEC), "--layers", "1", "--set", f"core.switch_us={value}"),
                "core.switch_us must be a finite number")


@pytest.mark.parametrize(("argv", "message"), [
    (["run", str(HEAD_SPEC), "--trials", "0"], "--trials must be at least 1"),
    (["run", str(HEAD_SPEC), "--seed", "-5"], "--seed must be a non-negative integer, got -5"),
    (["run", str(HEAD_SPEC), "--config", "small", "--layers", "1", "--batch", "0"], "batch must be in 1..16, got 0"),
])
def test_numeric_options_checked_by_the_command_are_usage_errors(argv: list[str], message: str,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """Options whose range depends on the spec (the batch) or that `main` reports itself: exit 2."""
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_a_define_of_5000_digits_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    """Past Python's 4,300-digit conversion limit: it was a ValueError, an internal error (exit 3)."""
    assert cli.main(["check", str(HEAD_SPEC), "-D", "NUM_LAYERS=" + "9" * 5000]) == 2
    err = capsys.readouterr().err
    assert err == "pgraph: error: -D NUM_LAYERS: the value exceeds 2**4096 in magnitude\n"


def test_max_memory_inf_as_a_process() -> None:
    """The case of the issue: it ended in `internal error: OverflowError` and exit 3."""
    run = pgraph("run", str(HEAD_SPEC), "--max-memory", "inf")
    assert run.returncode == 2 and "must be a positive, finite number, got 'inf'" in run.stderr
    assert "internal error" not in run.stderr


# ---- Ctrl-C ---------------------------------------------------------------------------------------


def interrupt_after(module: str, argv: list[str], cwd: Path = ROOT) -> tuple[int, list[str]]:
    """Run pgraph with `-X importtime`, send SIGINT as soon as an import finishes after `module`'s
    (so pgraph's own code is running: nothing before it can be pgraph's to handle), and return the
    exit code and the stderr lines that are not import times."""
    child = subprocess.Popen([sys.executable, "-X", "importtime", "-m", "pgraph", *argv], cwd=cwd, env=ENV,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert child.stderr is not None
    lines: list[str] = []
    seen = False
    for line in child.stderr:
        lines.append(line)
        if not line.startswith("import time:"):
            continue
        if seen:
            break
        seen = line.rsplit("|", 1)[-1].strip() == module
    assert seen, f"{module} was never imported"
    child.send_signal(signal.SIGINT)
    rest = child.stderr.read()
    code = child.wait(timeout=120)
    return code, [ln for ln in (*lines, *rest.splitlines(True)) if not ln.startswith("import time:")]


@pytest.mark.parametrize("module", ["pgraph.interrupts", "pgraph.diagnostics", "pgraph.pipeline"])
def test_ctrl_c_at_start_up_is_130_without_a_traceback(module: str) -> None:
    """While the command line's modules load (before `main` runs)."""
    code, err = interrupt_after(module, ["check", str(HEAD_SPEC)])
    assert code == 130, err
    assert "".join(err) == "pgraph: interrupted\n"


def test_ctrl_c_mid_run_is_130_and_leaves_no_partial_build(tmp_path: Path) -> None:
    """During a --full build (once the a2a3 emitter is loaded): 130, the one line, and neither the
    output folder nor a temporary folder beside it."""
    out = tmp_path / "out"
    code, err = interrupt_after("pgraph.backends.a2a3.emitter", ["build", str(HEAD_SPEC), "--full", "--target", "a2a3",
                                                          "-o", str(out)])
    assert code == 130, err
    assert err[-1] == "pgraph: interrupted\n" and not any("Traceback" in ln for ln in err)
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_ctrl_c_while_planning_is_130() -> None:
    code, err = interrupt_after("pgraph.plan.races", ["plan", str(HEAD_SPEC), "--full"])
    assert code == 130, err
    assert err[-1] == "pgraph: interrupted\n" and not any("Traceback" in ln for ln in err)


# ---- -o through a symlink -------------------------------------------------------------------------


@pytest.mark.parametrize("command", [["build", str(TINY), "--target", "dot"], ["plan", str(TINY)]])
def test_output_through_a_dangling_symlink_is_refused(command: list[str], tmp_path: Path) -> None:
    """`-o link` where link -> elsewhere/x, which does not exist: nothing is created there."""
    elsewhere = tmp_path / "elsewhere"
    link = tmp_path / "inside" / "out"
    link.parent.mkdir()
    link.symlink_to(elsewhere / "x")
    usage_error(pgraph(*command, "-o", str(link)), "is a symlink to", "which does not exist")
    assert not elsewhere.exists() and link.is_symlink()


def test_output_through_a_symlink_to_a_folder_still_builds(tmp_path: Path) -> None:
    """A link to an existing folder is the user's: that folder is replaced (the link stays)."""
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    run = pgraph("build", str(TINY), "--target", "dot", "-o", str(tmp_path / "link"))
    assert run.returncode == 0, run.stderr
    assert (real / "tiny.dot").is_file() and (tmp_path / "link").is_symlink()


# ---- import: duplicates, streaming ---------------------------------------------------------------


def task(tid: int, kernel: int = 0) -> dict[str, object]:
    return {"task_id": str(tid), "scope": "auto", "early_dispatch": False, "kernel_ids": [kernel, -1, -1],
            "block_num": 1, "args": []}


def explicit(pred: int, succ: int) -> dict[str, object]:
    return {"pred": str(pred), "succ": str(succ), "arg": -1, "source": "explicit", "flags": ["wait", "retain"]}


def deps_text(tasks: list[dict[str, object]], edges: list[dict[str, object]]) -> str:
    rows = lambda xs: ",\n".join(json.dumps(x) for x in xs)  # noqa: E731 - one record per line
    return '{"tasks": [\n' + rows(tasks) + '\n],\n"tensors": [],\n"edges": [\n' + rows(edges) + "\n]}\n"


def test_import_reports_a_duplicate_task_record(tmp_path: Path) -> None:
    """Task 1 has 1 explicit dep: it fits the 64 a record holds inline, so its second record is no
    overflow record but a duplicate (it was merged silently)."""
    path = tmp_path / "dup.json"
    path.write_text(deps_text([task(0), task(1), task(1)], [explicit(0, 1)]))
    usage_error(pgraph("import", str(path)),
                f"{path}:4:1: not a deps.json: tasks[2]: duplicate record of task 1 (first listed at tasks[1]): "
                "its 1 explicit dep(s) fit inline (64 inline, 582 per overflow record)")


def test_import_accepts_the_overflow_records_explicit_deps_need(tmp_path: Path) -> None:
    """65 explicit deps need one overflow record (64 inline); 64 + 582 + 1 = 647 need two."""
    for deps, records in ((65, 2), (646, 2), (647, 3)):
        path = tmp_path / f"o{deps}.json"
        path.write_text(deps_text([task(i) for i in range(deps)] + [task(10**6)] * records,
                                  [explicit(i, 10**6) for i in range(deps)]))
        run = pgraph("import", str(path))
        assert run.returncode == 0, run.stderr
        assert f"{records - 1:,} overflow record(s) merged" in run.stdout
        path.write_text(deps_text([task(i) for i in range(deps)] + [task(10**6)] * (records + 1),
                                  [explicit(i, 10**6) for i in range(deps)]))
        usage_error(pgraph("import", str(path)), "duplicate record of task 1000000")


def test_import_reports_a_bad_first_edge_before_reading_the_rest(tmp_path: Path) -> None:
    """The first edge names a task that is not in tasks[]; after it the file is cut off mid-record
    (not JSON at all). The edge is reported, at its line: the reader stopped there. (It used to
    parse the whole text first: a 287 MB file took 115 s and 2.2 GB to be rejected;
    bench/bench_inputs.py measures the time to reject.)"""
    text = deps_text([task(0), task(1)], [explicit(0, 7), explicit(0, 1)])
    path = tmp_path / "bad.json"
    path.write_text(text[:text.rindex('{"pred"') + 20])  # the second edge is cut off
    usage_error(pgraph("import", str(path)),
                f"{path}:7:1: not a deps.json: edges[0].succ: task 7 is not in tasks[]")
    path.write_text(text.replace('"source": "explicit"', '"source": "magic"', 1) + "garbage")
    usage_error(pgraph("import", str(path)), ":7:1: not a deps.json: edges[0].source: 'magic' is not one of")


def test_import_still_reports_json_errors_with_their_position(tmp_path: Path) -> None:
    path = tmp_path / "syntax.json"
    path.write_text('{"tasks": [\n' + json.dumps(task(0)) + ",\n" + json.dumps(task(1))[:-1] + ' "x"}]}')
    usage_error(pgraph("import", str(path)), f"{path}:3:", "not valid JSON: Expecting ',' delimiter")
