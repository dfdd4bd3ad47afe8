"""The old-compiler mode (PG123, pgraph/plan/compat.py): a compiler before pypto #1987 drops every
empty-deps dummy, and the planner names the consumers that lose their gate.

Expected values come from the reference's task table (docs/upstream.md §7.4: seed_dummy gates
rows 3, 6 and 7, rms_recip, kv_seed and mlp_out_seed; 265 tasks + 12 dummies and 588 explicit
edges per layer; 481 dummies over 40 layers, prev_out included) by hand: without seed_dummy a
layer has 11 dummies and 588 - 3 edges, the program 481 - 40 - 1 dummies (prev_out, the TaskId
placeholder, goes too) and 23,521 - 40 x 3 edges.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pgraph.cli import main
from pgraph.diagnostics import Severity
from pgraph.ir.limits import drops_empty_dummies, parse_compat
from pgraph.pipeline import Options, plan_program
from pgraph.plan.compat import Ungated
from pgraph.plan.counts import Counts
from pgraph.plan.early_dispatch import EarlyState, EarlyStatus

ROOT = Path(__file__).resolve().parents[2]
DECODE = ROOT / "specs" / "decode_layer.pgl"
CASE = ROOT / "tests" / "diagnostics" / "PG123_old_compiler_ungated.pgl"
OLD = Options(compat=(("pypto_pr", 1986),))


def test_parse_compat() -> None:
    assert parse_compat("pypto<1987") == ("pypto_pr", 1986)
    assert parse_compat("pypto < 1600") == ("pypto_pr", 1599)
    for bad in ("pypto>1987", "simpler<3", "pypto<", "pypto<x", "1987"):
        with pytest.raises(ValueError):
            parse_compat(bad)
    assert drops_empty_dummies({"pypto_pr": 1986}) and not drops_empty_dummies({"pypto_pr": 1987})
    assert not drops_empty_dummies({})


def test_the_decode_seed_dummy_ungates_its_three_consumers() -> None:
    plan, bag = plan_program(DECODE, OLD)
    assert plan is not None and not [d for d in bag.items if d.level is Severity.ERROR]
    (w,) = [d for d in bag.items if d.code == "PG123"]
    assert w.level is Severity.WARNING
    assert "drops the empty-deps dummy 'seed_dummy': rms_recip, kv_seed, mlp_out_seed lose their gate" in w.message
    notes = " / ".join(n.message for n in w.notes)
    assert "now early-dispatch candidates (the dummy evicted them from the early window): rms_recip, kv_seed, " \
           "mlp_out_seed" in notes
    assert "no race results" in notes
    ungated = plan.get(Ungated)
    names = {plan.graph.instances[n].dispatch for n in ungated.consumers["seed_dummy"]}
    assert names == {"rms_recip", "kv_seed", "mlp_out_seed"}
    assert ungated.empty == ["prev_out", "seed_dummy"]
    counts = plan.get(Counts)
    assert counts.per_layer is not None
    assert (counts.per_layer["dummy_tasks"], counts.per_layer["explicit_edges"]) == (11, 585)
    assert (counts.summary["dummy_tasks"], counts.summary["explicit_edges"]) == (440, 23_401)


def test_the_current_compiler_keeps_the_gate() -> None:
    old, _ = plan_program(DECODE, OLD)
    new, bag = plan_program(DECODE, Options())
    assert old is not None and new is not None
    assert not [d for d in bag.items if d.code == "PG123"] and new.get(Ungated).consumers == {}
    for plan, state in ((new, EarlyState.INELIGIBLE), (old, EarlyState.CANDIDATE)):
        status = plan.get(EarlyStatus).status
        for inst in plan.graph.instances:
            if inst.dispatch in ("rms_recip", "kv_seed", "mlp_out_seed") and plan.in_layer(inst):
                assert status[inst.id][0] is state, (inst.label, status[inst.id])


def test_the_target_table_and_the_option_agree(tmp_path: Path) -> None:
    plan, bag = plan_program(CASE, Options())
    assert plan is not None
    (w,) = [d for d in bag.items if d.code == "PG123"]
    assert "'seed_dummy': rms_recip, kv_seed, mlp_out_seed lose their gate" in w.message
    current = tmp_path / "current.pgl"
    current.write_text(CASE.read_text(encoding="utf-8").replace("  pypto_pr = 1986", "  task_window = 16384"),
                       encoding="utf-8")
    _, bag_new = plan_program(current, Options())
    assert not [d for d in bag_new.items if d.code == "PG123"]
    _, bag_opt = plan_program(current, OLD)
    assert [d.message for d in bag_opt.items if d.code == "PG123"] == [w.message]


def test_cli_compat(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(DECODE), "--compat", "pypto<1987"]) == 0  # a warning, not an error
    err = capsys.readouterr()
    assert "PG123 old-compiler-ungated" in err.out + err.err
    with pytest.raises(SystemExit) as e:
        main(["check", str(DECODE), "--compat", "pypto>1987"])
    assert e.value.code == 2
