"""`budget` statements (issue 14): PG121 when a figure of the plan is over its budget.

The HEAD spec's figures are derived by hand in tests/unit/test_counts.py (265 tasks + 12
dummies and 588 explicit edges per layer); the N_OUT_DIRECT_BLOCKS=20 mutant there has 4 more
tasks per layer (269 + 12 = 281 submits), one over the HEAD budget of 280.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from pgraph.cli import main
from pgraph.pipeline import Options, plan_program
from pgraph.plan.figures import figures
from tests.conftest import HEAD_SPEC, ROOT

SPECS = ROOT / "specs"


def codes(bag) -> list[str]:  # type: ignore[no-untyped-def]
    return [d.code for d in bag.sorted() if d.level.value == "error"]


def spec_with(tmp_path: Path, extra: str) -> Path:
    """The HEAD spec's three files copied to `tmp_path`, `extra` appended to the root."""
    for name in ("decode_layer.pgl", "qwen3_14b.pgl", "decode_common.pgl"):
        shutil.copy(SPECS / name, tmp_path / name)
    spec = tmp_path / "decode_layer.pgl"
    spec.write_text(spec.read_text(encoding="utf-8") + extra, encoding="utf-8")
    return spec


@pytest.fixture(scope="module")
def head():  # type: ignore[no-untyped-def]
    plan, bag = plan_program(HEAD_SPEC)
    assert plan is not None and not bag.has_errors
    return plan


def test_head_budgets_sit_just_above_the_head_figures(head) -> None:  # type: ignore[no-untyped-def]
    limits = {b.figure: b.limit for b in head.program.budgets}
    assert limits == {"submits_per_layer": 280, "edges_per_layer": 600, "ring3_live_tasks": 280,
                      "critical_path": 96 * 40 + 40, "sim_us": 1060 * 40 + 100}
    values = figures(head)
    assert values["submits_per_layer"] == 265 + 12 and values["edges_per_layer"] == 588
    for name in ("submits_per_layer", "edges_per_layer", "ring3_live_tasks", "critical_path"):
        assert values[name] <= limits[name] <= values[name] * 1.03, name  # within 3 % above today's figure


def test_a_regression_over_a_budget_is_pg121(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = spec_with(tmp_path, "")
    consts = tmp_path / "qwen3_14b.pgl"
    consts.write_text(consts.read_text(encoding="utf-8").replace("const N_OUT_DIRECT_BLOCKS = 24 ",
                                                                 "const N_OUT_DIRECT_BLOCKS = 20 "), encoding="utf-8")
    assert main(["check", str(spec)]) == 1
    err = capsys.readouterr().err
    assert "error[PG121 budget-exceeded]: submits_per_layer is 281 tasks, over its budget of 280 (+1;" in err
    assert "raise the budget to 281 if the growth is intended" in err


def test_a_what_if_under_overrides_is_a_warning(capsys: pytest.CaptureFixture[str]) -> None:
    """-D N_OUT_DIRECT_BLOCKS=20 is the same graph as the edit above, as a what-if: printed in
    full (a warning, not a counted note), and the run does not fail."""
    assert main(["check", str(HEAD_SPEC), "-D", "N_OUT_DIRECT_BLOCKS=20"]) == 0
    err = capsys.readouterr().err
    assert ("warning[PG121 budget-exceeded]: submits_per_layer is 281 tasks, over its budget of 280 (+1; submit_task "
            "calls of one layer (compute tasks and dummies)); not enforced: the run overrides N_OUT_DIRECT_BLOCKS") in err


def test_layer_counts_and_the_small_config_stay_within_the_head_budgets() -> None:
    for opts in (Options(layers=1), Options(layers=2), Options(layers=80), Options(config="small")):
        _plan, bag = plan_program(HEAD_SPEC, opts)
        assert [d.code for d in bag.items if d.code == "PG121"] == [], opts


def test_budgets_of_an_included_file_do_not_apply() -> None:
    """The #762 variant includes the HEAD spec for its fragments and is over HEAD's budgets."""
    plan, bag = plan_program(SPECS / "variants" / "decode_layer_762.pgl")
    assert plan is not None and codes(bag) == [] and plan.program.budgets == ()
    assert figures(plan)["submits_per_layer"] > 280


def test_sim_us_budget_is_checked_by_pgraph_sim(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One layer simulates in about 1.1 ms (docs/performance.md): over a budget of 1,000 us.
    The copy is edited (NUM_LAYERS 1, a tighter sim_us budget) rather than overridden with
    --layers, under which budgets are what-ifs anyway. `sim` is a what-if (a warning, exit 0);
    `sim --enforce-budgets` is a gate (an error, exit 1, after the report)."""
    spec = spec_with(tmp_path, "")
    spec.write_text(spec.read_text().replace("budget sim_us <= 1060 * NUM_LAYERS + 100", "budget sim_us <= 1000"))
    consts = tmp_path / "qwen3_14b.pgl"
    text = consts.read_text(encoding="utf-8")
    line = next(row for row in text.split("\n") if row.startswith("const NUM_LAYERS ") and row.endswith("= 40"))
    consts.write_text(text.replace(line, line.replace("= 40", "= 1")), encoding="utf-8")
    assert main(["check", str(spec)]) == 0  # check does not simulate
    capsys.readouterr()
    assert main(["sim", str(spec)]) == 0
    out = capsys.readouterr()
    assert "makespan" in out.out
    assert "warning[PG121 budget-exceeded]: sim_us is 1,0" in out.err and "over its budget of 1,000" in out.err
    assert "not enforced: `pgraph sim` is a what-if" in out.err
    assert main(["sim", str(spec), "--enforce-budgets"]) == 1
    out = capsys.readouterr()
    assert "makespan" in out.out and "error[PG121 budget-exceeded]: sim_us is 1,0" in out.err
    assert main(["sim", str(HEAD_SPEC), "--layers", "1"]) == 0


def test_an_allow_of_the_sim_us_budget_is_judged_by_sim(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`allow(PG121)` above `budget sim_us`: the planner cannot tell whether it waives anything
    (no PG042 from check); sim waives the overrun with it, and calls it unused when within budget."""
    spec = spec_with(tmp_path, "")
    text = spec.read_text()
    line = "budget sim_us <= 1060 * NUM_LAYERS + 100"
    assert text.count(line) == 1
    spec.write_text(text.replace(line, 'allow(PG121, "a slower kernel is being tried")\nbudget sim_us <= 1000'))
    consts = tmp_path / "qwen3_14b.pgl"
    consts_text, n = re.subn(r"const NUM_LAYERS +=  ?40\b", "const NUM_LAYERS = 1", consts.read_text())
    assert n == 1
    consts.write_text(consts_text)
    assert main(["check", str(spec)]) == 0
    assert "PG042" not in capsys.readouterr().err
    assert main(["sim", str(spec), "--notes"]) == 0
    err = capsys.readouterr().err
    assert "PG121" not in err.split("allowed")[0] and "PG042" not in err
    assert "2 allowed (PG104 dummy-effect 1, PG121 budget-exceeded 1)" in err  # the spec's own PG104 allow too
    assert "a slower kernel is being tried" in err
    spec.write_text(spec.read_text().replace("budget sim_us <= 1000", "budget sim_us <= 2000"))
    assert main(["sim", str(spec)]) == 0
    assert "warning[PG042 unused-allow]: `allow(PG121)` waives nothing" in capsys.readouterr().err


# ---- gate and what-if: the decode spec with one wave more (issue 24) -----------------------------

#: The critical wave of gate_proj (`spmd(n)`: one task per k) split in two waves at n = 3.
CRITICAL = """        wave critical n in 0..GATE_UP_SPMD_N      : spmd(n) deps(residual_rms_cast[k])
            call gate_projs[k](mlp_norm_in, w_gate, gate_acc, k * MLP_K_SLICE, L * HIDDEN)
"""
SPLIT = """        wave critical n in 0..3                   : spmd(n) deps(residual_rms_cast[k])
            call gate_projs[k](mlp_norm_in, w_gate, gate_acc, k * MLP_K_SLICE, L * HIDDEN)
        wave critical2 n in 3..GATE_UP_SPMD_N     : spmd(n) deps(residual_rms_cast[k])
            call gate_projs[k](mlp_norm_in, w_gate, gate_acc, k * MLP_K_SLICE, L * HIDDEN)
"""


def one_wave_more(tmp_path: Path) -> Path:
    """A copy of the HEAD spec whose gate_proj tile set has one wave more (the critical wave split)."""
    spec = spec_with(tmp_path, "")
    text = spec.read_text(encoding="utf-8")
    assert text.count(CRITICAL) == 1
    spec.write_text(text.replace(CRITICAL, SPLIT), encoding="utf-8")
    return spec


def k_splits_mlp() -> int:
    """K_SPLITS_MLP as specs/qwen3_14b.pgl writes it (a literal)."""
    import re

    m = re.search(r"^const K_SPLITS_MLP\s*=\s*(\d+)", (SPECS / "qwen3_14b.pgl").read_text(), re.M)
    assert m is not None
    return int(m.group(1))


def test_one_wave_more_fails_check_but_not_the_what_ifs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """By hand: an spmd(n) wave is one task per k; the split makes two of them, K_SPLITS_MLP (5)
    more tasks per layer: 277 + 5 = 282 submits, over 280; the 5 run in the layer's manual
    scope on ring 3: 276 + 5 = 281 live, over 280; each waits on residual_rms_cast[k] (5 more
    edges, 593, within 600: silu[n] for n = 3..5 waits on critical2 instead of critical, as
    many edges)."""
    spec = one_wave_more(tmp_path)
    k = k_splits_mlp()
    assert k == 5
    submits, live = 277 + k, 276 + k
    plan, bag = plan_program(spec)
    assert plan is not None
    values = figures(plan)
    assert (values["submits_per_layer"], values["ring3_live_tasks"], values["edges_per_layer"]) == (
        submits, live, 588 + k)
    over = [f"submits_per_layer is {submits} tasks, over its budget of 280",
            f"ring3_live_tasks is {live} tasks, over its budget of 280"]
    # the gates: check, plan, build
    for argv in (["check", str(spec)], ["plan", str(spec)],
                 ["build", str(spec), "--target", "dot", "-o", str(tmp_path / "out")]):
        assert main(argv) == 1, argv
        err = capsys.readouterr().err
        assert all(f"error[PG121 budget-exceeded]: {o}" in err for o in over), argv
    assert not (tmp_path / "out").exists()
    # the what-ifs: the run goes on and the overruns are warnings, each saying why
    for argv, why in ((["plan", str(spec), "--no-budgets"], "`--no-budgets` was given"),
                      (["stats", str(spec)], "`pgraph stats` is a what-if"),
                      (["check", str(spec), "--layers", "2"], "the run overrides NUM_LAYERS")):
        assert main(argv) == 0, argv
        out = capsys.readouterr()
        for o in over:
            assert f"warning[PG121 budget-exceeded]: {o}" in out.err and f"not enforced: {why}" in out.err, argv
    main(["stats", str(spec)])
    assert f"  submits_per_layer {submits:>17,}  {280:>10,}  tasks" in capsys.readouterr().out


def test_sim_and_sim_vs_run_on_one_wave_more(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = one_wave_more(tmp_path)
    submits = 277 + k_splits_mlp()
    finding = f"warning[PG121 budget-exceeded]: submits_per_layer is {submits} tasks, over its budget of 280"
    assert main(["sim", str(spec), "--layers", "2"]) == 0
    out = capsys.readouterr()
    assert "makespan" in out.out and finding in out.err
    assert main(["sim", str(HEAD_SPEC), "--vs", str(spec)]) == 0
    out = capsys.readouterr()
    assert str(spec) in out.out
    a, b = out.err.split(f"B: {spec}:\n")  # each side's diagnostics under its label: the overrun is B's
    assert a.startswith(f"A: {HEAD_SPEC}:\n") and finding not in a and finding in b
    assert "not enforced: `pgraph sim` is a what-if" in out.err
    # as a gate (40 layers: no override), the overruns are errors, yet the spec still simulates
    assert main(["sim", str(spec), "--enforce-budgets"]) == 1
    out = capsys.readouterr()
    assert "makespan" in out.out
    assert f"error[PG121 budget-exceeded]: submits_per_layer is {submits} tasks, over its budget of 280" in out.err


@pytest.mark.parametrize(("extra", "code", "text"), [
    ("budget submit_per_layer <= 3\n", "PG002", "did you mean 'submits_per_layer'?"),
    ("budget edges <= 1\nbudget edges <= 2\n", "PG003", "a second budget for 'edges'"),
])
def test_bad_budgets(tmp_path: Path, extra: str, code: str, text: str) -> None:
    _plan, bag = plan_program(spec_with(tmp_path, extra))
    found = [d for d in bag.sorted() if d.code == code]
    assert found and text in (found[0].message + " " + (found[0].hint or ""))


def test_fmt_keeps_budgets() -> None:
    from tests.unit.test_fmt import check_round_trip

    out = check_round_trip(HEAD_SPEC.read_text(encoding="utf-8"))
    assert out is not None and "budget critical_path <= 96 * NUM_LAYERS + 40" in out
