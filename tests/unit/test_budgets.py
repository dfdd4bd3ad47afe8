"""`budget` statements (issue 14): PG121 when a figure of the plan is over its budget.

The HEAD spec's figures are derived by hand in tests/unit/test_counts.py (265 tasks + 12
dummies and 588 explicit edges per layer); the N_OUT_DIRECT_BLOCKS=20 mutant there has 4 more
tasks per layer (269 + 12 = 281 submits), one over the HEAD budget of 280.
"""

from __future__ import annotations

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


def test_a_what_if_under_overrides_is_a_note(capsys: pytest.CaptureFixture[str]) -> None:
    """-D N_OUT_DIRECT_BLOCKS=20 is the same graph as the edit above, as a what-if."""
    assert main(["check", str(HEAD_SPEC), "-D", "N_OUT_DIRECT_BLOCKS=20", "--notes"]) == 0
    err = capsys.readouterr().err
    assert ("note[PG121 budget-exceeded]: submits_per_layer is 281 tasks, over its budget of 280 (+1; submit_task "
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
    --layers, under which budgets are notes."""
    spec = spec_with(tmp_path, "")
    spec.write_text(spec.read_text().replace("budget sim_us <= 1060 * NUM_LAYERS + 100", "budget sim_us <= 1000"))
    consts = tmp_path / "qwen3_14b.pgl"
    text = consts.read_text(encoding="utf-8")
    line = next(row for row in text.split("\n") if row.startswith("const NUM_LAYERS ") and row.endswith("= 40"))
    consts.write_text(text.replace(line, line.replace("= 40", "= 1")), encoding="utf-8")
    assert main(["check", str(spec)]) == 0  # check does not simulate
    capsys.readouterr()
    assert main(["sim", str(spec)]) == 1
    err = capsys.readouterr().err
    assert "error[PG121 budget-exceeded]: sim_us is 1,0" in err and "over its budget of 1,000" in err
    assert main(["sim", str(HEAD_SPEC), "--layers", "1"]) == 0


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
