"""One differential check: plan (windowed and --full), build, compile, record, compare, oracle.

`check(program, work, objs)` returns the outcome category of one generated program and raises
AssertionError (with the .pgl text saved in `work`) on any disagreement:

- the planner reports exactly the errors the program was made to have (`Program.expect`, and a
  zero-size argument of a submitted task, which simpler rejects with INVALID_ARGS), and no
  other error but races (PG100/PG101/PG102) and reads of never-written elements (PG122): the
  generator only writes valid programs;
- windowed and --full plans give the same verdict and the same report figures;
- the build compiles with `-Wall -Werror`, runs on the recording runtime without a fatal
  error, and the recorded graph equals the --full instance graph (tasks, order, kinds, rings,
  blocks, flags, argument regions, edges with provenance, dep entries:
  `tests/unit/test_a2a3.compare`);
- the model's compute tasks (kernel, blocks, in order) equal the recorded ones;
- the planner reports a race (windowed and --full) exactly when the oracle finds one, and an
  uncovered read (PG122) exactly when the definite-writes oracle finds one.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import attrs

from pgraph.backends.a2a3 import build
from pgraph.backends.report import report_facts
from pgraph.backends.target import BuildInfo
from pgraph.diagnostics import DiagnosticBag, Severity, render_text
from pgraph.pipeline import Options, plan_program
from tests.conftest import require_tool
from tests.differential import oracle
from tests.differential.programs import Program, render, run_model
from tests.unit.test_a2a3 import CPP, CXXFLAGS, args_file, compare, config_module, kernel_names, parse_record
from tests.unit.test_window_exact import comparable as window_comparable

RACE_CODES = {"PG100", "PG101", "PG102"}
#: the data-flow codes the oracles decide: races and uncovered reads
ORACLE_CODES = RACE_CODES | {"PG122"}
#: the flags of the long run's sanitizer build (PGRAPH_DIFF_SANITIZE=1)
SANITIZE = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-g"]


@attrs.define
class Outcome:
    """What one program came to: a category and the figures the run reports."""

    category: str  # racy | race-free | rejected-as-expected
    tasks: int = 0
    edges: int = 0
    codes: tuple[str, ...] = ()


def sanitize() -> bool:
    """True in the long run with sanitizers (PGRAPH_DIFF_SANITIZE=1)."""
    return os.environ.get("PGRAPH_DIFF_SANITIZE", "") not in ("", "0")


def runtime_objects(out: Path) -> list[Path]:
    """recording_runtime.o and driver_main.o (with sanitizers when asked)."""
    gxx = require_tool("g++")
    flags = [*CXXFLAGS, "-O1", *(SANITIZE if sanitize() else [])]
    objs = []
    for name in ("recording_runtime.cpp", "driver_main.cpp"):
        obj = out / (name[:-4] + ".o")
        subprocess.run([gxx, *flags, "-I", str(CPP), "-c", str(CPP / name), "-o", str(obj)], check=True)
        objs.append(obj)
    return objs


def errors(bag: DiagnosticBag) -> set[str]:
    """The codes of the errors in a bag."""
    return {d.code for d in bag.items if d.level is Severity.ERROR}


def _compile_run(files: dict[str, str], program: object, objs: list[Path], work: Path) -> str:
    cpp = next(k for k in files if k.endswith(".cpp"))
    src = work / "orch.cpp"
    src.write_text(files[cpp])
    exe = work / "orch_driver"
    gxx = require_tool("g++")
    extra = SANITIZE if sanitize() else []
    res = subprocess.run([gxx, *CXXFLAGS, "-O0", *extra, "-I", str(CPP), str(src), *map(str, objs), "-o", str(exe)],
                         capture_output=True, text=True)
    assert res.returncode == 0, f"generated C++ does not compile:\n{res.stderr[:3000]}"
    (work / "args.txt").write_text(args_file(program))  # type: ignore[arg-type]
    record = work / "record.txt"
    run = subprocess.run([str(exe), str(work / "args.txt"), str(record)], capture_output=True, text=True,
                         timeout=60)
    text = record.read_text() if record.exists() else ""
    fatal = [ln for ln in text.splitlines() if ln.startswith("fatal")]
    assert run.returncode == 0, f"recording runtime exit {run.returncode}: {fatal} {run.stderr[:3000]}"
    assert "runtime error" not in run.stderr and "Sanitizer" not in run.stderr, run.stderr[:3000]
    return text


def comparable(facts: dict[str, object]) -> dict[str, object]:
    """The report figures windowed and --full plans share (`test_window_exact.comparable`), but
    the race count: under the window it is a lower bound; the verdict is compared instead."""
    return {k: v for k, v in window_comparable(facts).items() if k != "races"}


#: a MIX kernel's parts are `NAME_aic` and `NAME_aiv` in kernel_config.py
MIX_PART = re.compile(r"_(aic|aiv)$")


def differing(a: dict[str, object], b: dict[str, object]) -> list[str]:
    """The keys whose values differ."""
    return sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))


def check(p: Program, work: Path, objs: list[Path]) -> Outcome:
    """Run every comparison on one generated program (see the module docstring)."""
    text = render(p)
    spec = work / "prog.pgl"
    spec.write_text(text)
    model = run_model(p)
    expect = set(p.expect)
    if any(t.zero_arg for t in model):
        expect.add("PG114")  # a submitted task passes an empty view
    plan_w, bag_w = plan_program(spec, Options())
    plan_f, bag_f = plan_program(spec, Options(full=True))
    got_w, got_f = errors(bag_w), errors(bag_f)
    if expect:
        # a declaration-stage error (PG027) stops planning before expansion ones (PG114) are seen
        for got in (got_w, got_f):
            assert got & expect and not got - expect - ORACLE_CODES, (f"expected {sorted(expect)}", sorted(got))
        return Outcome("rejected-as-expected", codes=tuple(sorted(expect & got_f)))
    other = (got_w | got_f) - ORACLE_CODES
    assert not other, ("the planner rejects a valid program", [render_text(d) for d in bag_f.items
                                                               if d.code in other][:3])
    assert plan_w is not None and plan_f is not None
    racy_w, racy_f = bool(got_w & RACE_CODES), bool(got_f & RACE_CODES)
    assert racy_w == racy_f, ("windowed and --full race verdicts differ", sorted(got_w), sorted(got_f))
    assert ("PG122" in got_w) == ("PG122" in got_f), ("windowed and --full uncovered-read verdicts differ",
                                                      sorted(got_w), sorted(got_f))
    diff = differing(comparable(report_facts(plan_w)), comparable(report_facts(plan_f)))
    assert not diff, f"windowed figures differ from --full: {diff}"
    # build even a racy plan: the oracle needs the recorded edges
    clean = attrs.evolve(plan_w, bag=DiagnosticBag()) if got_w else plan_w
    files = build(clean, BuildInfo(str(spec), ""))
    rec = parse_record(_compile_run(files, plan_f.program, objs, work))
    kernels = kernel_names(config_module(files, work / "out"))
    compare(plan_f.program, plan_f.graph, rec, kernels)
    compute = [i for i, t in enumerate(rec.tasks) if t["kind"] == "compute"]
    recorded = [(MIX_PART.sub("", kernels[int(rec.tasks[i]["aic"]) if int(rec.tasks[i]["aic"]) != -1  # type: ignore[call-overload]
                                          else int(rec.tasks[i]["aiv0"])][0]),  # type: ignore[call-overload]
                 int(rec.tasks[i]["blocks"])) for i in compute]  # type: ignore[call-overload]
    assert recorded == [(t.kernel, len(t.blocks)) for t in model], ("model and recorded tasks differ",
                                                                      recorded, [t.label for t in model])
    reach = oracle.reachability(len(rec.tasks), set(rec.edges))
    found = oracle.races(model, compute, reach)
    assert bool(found) == racy_f, ("oracle and planner disagree", found[:3], sorted(got_f))
    uncovered = oracle.uncovered_reads(model, compute, reach)
    assert bool(uncovered) == ("PG122" in got_f), ("the definite-writes oracle and the planner disagree",
                                                    sorted(model[i].label for i in uncovered)[:3], sorted(got_f))
    return Outcome("racy" if found else "race-free", len(model), len(rec.edges))
