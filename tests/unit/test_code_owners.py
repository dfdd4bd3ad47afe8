"""Each diagnostic code has one owning stage (pgraph.pipeline.CODE_OWNERS), and only that stage's
package names the code: checked on the source (every `PGxxx` literal, every Diagnostic built) and
at run time (with verification on, as in the tests, a bag refuses a code added from another
stage's module, so every test that runs the pipeline checks it too). What a stage meets of
another's rule goes to the owner as a pgraph.findings record, reported at once."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import attrs
import pytest

from pgraph import findings
from pgraph.diagnostics import RULES, DiagnosticBag
from pgraph.kinds import InternalError
from pgraph.pipeline import CODE_OWNERS, FINDING_REPORTERS, OWNER_OF, Options, owned_bag, plan_program
from pgraph.source import SourceFile, Span
from tests.conftest import ROOT

PKG = ROOT / "pgraph"
CODE = re.compile(r"PG\d{3}")
#: Where a code is named without being reported: the rule table and the ownership table.
TABLES = {"pgraph.diagnostics": "RULES", "pgraph.pipeline": "CODE_OWNERS"}


def room(module: str) -> str:
    """The stage package of a module: `pgraph.lower.forms` -> 'lower', `pgraph.diagnostics` -> 'diagnostics'."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def misplaced(module: str, source: str) -> list[str]:
    """Every code literal of `source` (module `module`) that its owner's package does not hold,
    and every Diagnostic built outside pgraph.diagnostics (the bag builds them)."""
    tree = ast.parse(source)
    skip: set[int] = set()
    table = TABLES.get(module)
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) \
            else []
        if any(isinstance(t, ast.Name) and t.id == table for t in targets):
            skip |= {id(n) for n in ast.walk(node)}
    bad = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and CODE.fullmatch(node.value):
            owner = OWNER_OF.get(node.value, "nobody")
            if owner != room(module):
                bad.append(f"{module}:{node.lineno}: {node.value} (owned by {owner})")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Diagnostic" \
                and module != "pgraph.diagnostics":
            bad.append(f"{module}:{node.lineno}: builds a Diagnostic (add it to the bag)")
    return bad


def package_modules() -> dict[str, str]:
    out = {}
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("")
        out[".".join(rel.parts).removesuffix(".__init__")] = path.read_text(encoding="utf-8")
    return out


def test_every_code_has_exactly_one_owner() -> None:
    named = [c for codes in CODE_OWNERS.values() for c in codes]
    assert sorted(named) == sorted(RULES) and len(named) == len(set(named))
    assert set(CODE_OWNERS) == {"frontend", "lower", "plan", "diagnostics"}


def test_no_module_names_a_code_its_stage_does_not_own() -> None:
    bad = [b for module, text in package_modules().items() for b in misplaced(module, text)]
    assert not bad, bad


def test_the_source_scan_finds_a_planted_code() -> None:
    """The scan of the test above, on planted texts: it must refuse each."""
    assert misplaced("pgraph.lower.tasks", 'ctx.err("PG018", "x", None)\n') == \
        ["pgraph.lower.tasks:1: PG018 (owned by plan)"]
    assert misplaced("pgraph.frontend.x", 'bag.add("PG002" if a else "PG001", "m")\n') == \
        ["pgraph.frontend.x:1: PG002 (owned by lower)"]
    assert sorted(misplaced("pgraph.backends.x", 'd = Diagnostic("PG100", "m")\n')) == \
        ["pgraph.backends.x:1: PG100 (owned by plan)", "pgraph.backends.x:1: builds a Diagnostic (add it to the bag)"]
    assert misplaced("pgraph.plan.x", 'RULES = {"PG001": 1}\n') == ["pgraph.plan.x:1: PG001 (owned by frontend)"]
    assert misplaced("pgraph.plan.races", 'bag.add("PG100", "m")\n') == []
    assert misplaced("pgraph.diagnostics", 'RULES = {"PG001": 1}\nx = "PG030"\n') == []


def test_every_finding_has_one_reporter_in_its_owners_package() -> None:
    kinds = {c for c in vars(findings).values() if isinstance(c, type) and issubclass(c, findings.Finding)
             and c is not findings.Finding}
    owners: dict[type, str] = {}
    for stage, reporters in FINDING_REPORTERS.items():
        for cls, fn in reporters.items():
            assert cls not in owners, f"{cls.__name__} has two reporters"
            owners[cls] = stage
            assert room(fn.__module__) == stage, f"{fn.__module__} reports {cls.__name__} for {stage}"
    assert set(owners) == kinds


def _span() -> Span:
    return Span(SourceFile("<t>", "x\n"), 1, 1, 1, 2)


def test_the_run_time_check_refuses_a_code_added_from_another_stage() -> None:
    bag = owned_bag(check_owners=True)
    lowering = {"__name__": "pgraph.lower.fake", "bag": bag}
    exec("bag.add('PG002', 'undefined')", lowering)  # lowering's own code
    with pytest.raises(InternalError, match=r"pgraph.lower.fake reports PG018, whose owning stage is plan"):
        exec("bag.add('PG018', 'cannot be evaluated')", lowering)
    with pytest.raises(InternalError, match="test_code_owners reports PG100"):
        bag.add("PG100", "a race")
    exec("bag.found(NoWave(span=span, tileset='t'))", {**lowering, "NoWave": findings.NoWave, "span": _span()})
    assert [d.code for d in bag.items] == ["PG002", "PG021"]  # handed over: reported by the planner


def test_a_finding_nobody_reports_is_an_error_and_an_internal_error_when_shown() -> None:
    bag = DiagnosticBag()
    bag.found(findings.NoWave(span=_span(), tileset="t"))
    assert bag.has_errors and not bag.items
    with pytest.raises(InternalError, match="NoWave was found but no stage reported it"):
        bag.sorted()
    into = owned_bag()
    note = findings.Note("in a file included from a.pgl:1:1")
    bag.forward(into, [note])
    assert [(d.code, d.notes) for d in into.sorted()] == [("PG021", (note,))]


def codes(path: Path, opts: Options | None = None) -> list[str]:
    _, bag = plan_program(path, opts or Options(verify=True))
    return sorted(d.code for d in bag.items)


BODY = """
tensor x : f32[4] external
kernel k aiv (a : out f32[4])
entry main {
  at t { call k(x) }
  at u deps(nowhere) { call k(x) }
}
"""


def test_findings_keep_the_stop_points(tmp_path: Path) -> None:
    """A finding is reported in the stage that met it, so what a run reports is what it was
    when that stage reported the code itself: a bad config file stops before lowering; a
    constant that divides by zero, `tiles` with no wave and `at` with an index space are
    reported with lowering's own errors, and stop before the program checks."""
    spec = tmp_path / "a.pgl"
    spec.write_text("const A = 1\n" + BODY, encoding="utf-8")
    config = tmp_path / "c.pgl"
    config.write_text("const A = 2\nconst A = 3\nassert 1 == 1\n", encoding="utf-8")
    assert codes(spec) == ["PG002"]
    assert codes(spec, Options(config=str(config), verify=True)) == ["PG003", "PG019"]  # not lowered: no PG002
    spec.write_text("const Z = 1 / 0\n" + BODY.replace("at t {", "at t[i in 0..2] {").replace(
        "entry main {", "entry main {\n  tiles w[i in 0..2] { call k(x) }"), encoding="utf-8")
    assert codes(spec) == ["PG002", "PG018", "PG020", "PG021"]
    spec.write_text("const Z = 1 / 0\n" + BODY.replace("f32[4] external", "f32[4 - 8] external")
                    .replace("deps(nowhere) ", ""), encoding="utf-8")
    assert codes(spec) == ["PG018"]  # lowering's stage stops before the shape checks (PG006)
    spec.write_text(BODY.replace("f32[4] external", "f32[4 - 8] external").replace("deps(nowhere) ", ""),
                    encoding="utf-8")
    assert codes(spec) == ["PG006", "PG006", "PG006"]  # the tensor and the two call regions


def test_a_literal_too_large_in_an_included_file_names_the_chain(tmp_path: Path) -> None:
    (tmp_path / "inc.pgl").write_text("const BIG = " + "9" * 5000 + "\n", encoding="utf-8")
    spec = tmp_path / "a.pgl"
    spec.write_text('include "inc.pgl"\n' + BODY.replace("deps(nowhere) ", ""), encoding="utf-8")
    _, bag = plan_program(spec, Options(verify=True))
    [d] = bag.sorted()
    assert (d.code, d.message, d.span.line if d.span else 0) == \
        ("PG018", "an integer literal of 5,000 digits is too large (the limit is 2**4096)", 1)
    assert [n.message for n in d.notes] == [f"in a file included from {spec}:1:1"]


def test_findings_are_frozen_records() -> None:
    f = findings.ConstantCycle(span=_span(), name="A")
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        f.name = "B"  # type: ignore[misc]


def compact(codes: tuple[str, ...]) -> str:
    """`PG006, PG007, PG008` -> `PG006-PG008` (runs of three or more), comma-separated."""
    nums = sorted(int(c[2:]) for c in codes)
    runs: list[list[int]] = []
    for n in nums:
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    return ", ".join(f"PG{r[0]:03d}-PG{r[-1]:03d}" if len(r) >= 3 else ", ".join(f"PG{n:03d}" for n in r)
                     for r in runs)


def test_docs_list_each_stages_codes_from_the_table() -> None:
    """docs/planner.md's lists of codes per stage are the table's (write `compact(...)` there)."""
    text = (ROOT / "docs" / "planner.md").read_text(encoding="utf-8")
    found = dict(re.findall(r"<!-- owners:(\w+) -->(.*?)<!-- /owners -->", text))
    assert found == {stage: compact(codes) for stage, codes in CODE_OWNERS.items() if stage != "diagnostics"}
    assert compact(("PG001", "PG002", "PG003", "PG005", "PG007", "PG008")) == "PG001-PG003, PG005, PG007, PG008"
