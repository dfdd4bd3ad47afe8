"""Every fast path equals its reference on a corpus: the same output with and without `PGRAPH_REFERENCE=1`.

`PGRAPH_REFERENCE=1` (`pgraph.fastpath.reference_mode`) makes every fast path listed in
docs/architecture.md run the reference it stands beside. The corpus is every `.pgl` under
specs/ and tests/examples/ (with its `# args:` options) and generated programs
(tests/differential/programs.py, `RandomChooser` seeds 0..GENERATED-1, written to a temporary
folder); on each, `check` (its diagnostics), `plan --format json` and `build --target a2a3`
(every file written) run once in a process with `PGRAPH_REFERENCE=1` and once in a process
without it (tests/support/command_outputs.py), and the exit codes, stdout, stderr and files
must be identical.

Sampled: each run checks every spec and example, and one part of GENERATED_PER_RUN generated
programs (tests/support/sampling.py: the part follows PGRAPH_SAMPLE or the date, printed);
`python3 -m pytest -m slow tests/unit/test_fast_paths_corpus.py` checks all GENERATED.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.differential.programs import RandomChooser, generate, render
from tests.support import sampling
from tests.support.corpus_snapshot import spec_args

#: generated programs of the whole sweep (-m slow), and of one run's part
GENERATED = 300
GENERATED_PER_RUN = 50
SPEC_FILES = sorted(p for folder in ("specs", "tests/examples") for p in (ROOT / folder).rglob("*.pgl"))
#: the decode specs are checked one per test (each takes seconds); the rest together
HEAVY = [p for p in SPEC_FILES if p.parent.name in ("specs", "variants")
         and re.search(r"^\s*entry\s", p.read_text(encoding="utf-8"), re.M)]
LIGHT = [p for p in SPEC_FILES if p not in HEAVY]
PROBE = "from pgraph.fastpath import reference_mode; print(int(reference_mode()))"


def jobs_for(spec: Path, work: Path, extra: list[str]) -> list[dict[str, Any]]:
    """check, plan --format json and build --target a2a3 of one spec (build into its own folder)."""
    out = work / "out" / spec.stem
    return [{"argv": ["check", str(spec), *extra], "out": None},
            {"argv": ["plan", str(spec), "--format", "json", *extra], "out": None},
            {"argv": ["build", str(spec), "--target", "a2a3", "-o", str(out), *extra], "out": str(out)}]


def run_both(jobs: list[dict[str, Any]], work: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The jobs' outputs in a process without PGRAPH_REFERENCE and in one with PGRAPH_REFERENCE=1."""
    path = work / "jobs.json"
    path.write_text(json.dumps(jobs), encoding="utf-8")
    results = []
    for reference in (False, True):
        env = {k: v for k, v in os.environ.items() if k != "PGRAPH_REFERENCE"}
        if reference:
            env["PGRAPH_REFERENCE"] = "1"
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
        run = subprocess.run([sys.executable, "-m", "tests.support.command_outputs", str(path)], cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=600, check=False)
        assert run.returncode == 0, run.stderr[-3000:]
        results.append(json.loads(run.stdout))
    return results[0], results[1]


def assert_same(jobs: list[dict[str, Any]], fast: list[dict[str, Any]], ref: list[dict[str, Any]],
                what: str = "") -> None:
    """Every job gave the same exit code, stdout, stderr and files both ways (the first difference named)."""
    assert len(fast) == len(ref) == len(jobs)
    for job, a, b in zip(jobs, fast, ref):
        for key in ("code", "stdout", "stderr", "files"):
            assert a[key] == b[key], (f"`pgraph {' '.join(job['argv'])}`: {key} differs with PGRAPH_REFERENCE=1"
                                      f" {what}\nfast:\n{str(a[key])[:1500]}\nreference:\n{str(b[key])[:1500]}")
        assert a["code"] in (0, 1, 2), (job["argv"], a["stderr"][-1500:])  # never an internal error


def test_the_switch_reaches_the_processes() -> None:
    """The two processes really run in the two modes (a switch lost on the way would compare a mode with itself)."""
    for value, want in ((None, "0"), ("1", "1"), ("0", "0")):
        env = {k: v for k, v in os.environ.items() if k != "PGRAPH_REFERENCE"}
        if value is not None:
            env["PGRAPH_REFERENCE"] = value
        run = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True)
        assert run.stdout.strip() == want, (value, run.stdout, run.stderr)


def test_the_corpus_holds_the_specs() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in SPEC_FILES}
    assert {"specs/decode_layer.pgl", "specs/variants/decode_layer_762.pgl", "tests/examples/tiny_dot.pgl"} <= names
    assert ROOT / "specs" / "decode_layer.pgl" in HEAVY and ROOT / "specs" / "qwen3_14b.pgl" in LIGHT


@pytest.mark.parametrize("spec", HEAVY, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_decode_spec_same_both_ways(spec: Path, tmp_path: Path) -> None:
    jobs = jobs_for(spec, tmp_path, spec_args(spec.relative_to(ROOT)))
    fast, ref = run_both(jobs, tmp_path)
    assert_same(jobs, fast, ref)
    if spec.name == "decode_layer.pgl":  # the real job: it plans and builds (the comparison is not of two failures)
        assert [r["code"] for r in fast] == [0, 0, 0] and "orchestration/decode_fwd_layers.cpp" in fast[2]["files"]


def test_other_specs_and_examples_same_both_ways(tmp_path: Path) -> None:
    jobs = [job for spec in LIGHT for job in jobs_for(spec, tmp_path, spec_args(spec.relative_to(ROOT)))]
    fast, ref = run_both(jobs, tmp_path)
    assert_same(jobs, fast, ref)
    assert sum(r["code"] == 0 for r in fast) >= 3 * 6  # the examples with an entry check, plan and build


def generated_jobs(seeds: range, work: Path) -> list[dict[str, Any]]:
    jobs = []
    for seed in seeds:
        spec = work / f"gen{seed}.pgl"
        spec.write_text(render(generate(RandomChooser(seed))), encoding="utf-8")
        jobs += jobs_for(spec, work, [])
    return jobs


def test_generated_programs_same_both_ways_sample(tmp_path: Path) -> None:
    """One part of the generated programs (the whole: test_generated_programs_same_both_ways, -m slow)."""
    part = sampling.window("fast paths on generated programs", GENERATED, GENERATED_PER_RUN)
    print(part.describe())
    jobs = generated_jobs(part.cases, tmp_path)
    fast, ref = run_both(jobs, tmp_path)
    assert_same(jobs, fast, ref, part.describe())


@pytest.mark.slow
def test_generated_programs_same_both_ways(tmp_path: Path) -> None:
    """All GENERATED generated programs."""
    jobs = generated_jobs(range(GENERATED), tmp_path)
    fast, ref = run_both(jobs, tmp_path)
    assert_same(jobs, fast, ref)
