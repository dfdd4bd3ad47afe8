"""Hints are fixes (issue 23): every machine fix, applied, removes its diagnostic and adds no error.

A diagnostic's `fix` (the edits of its hint, `pgraph fix` applies them) is checked on four
sources of diagnostics:

- the failing specs of the corpus (tests/diagnostics/, with their `# args:`);
- PLANTED: mistakes planted by hand in specs/ and tests/examples/ (a dep slice one tile short,
  a dep dropped, a name misspelt, a ring written wrong, a duplicate task, ...), each a text
  replacement in one file of the real specs;
- mutants of specs/ and tests/examples/ (the mutation fuzz's seeded edits,
  tests/property/test_mutation_fuzz.make_mutant) that plan with a fixable diagnostic; single
  edits only: in a compound mutant the fix of one mistake lets the pipeline reach the errors of
  another, which the fix did not make;
- generated programs (tests/differential/programs.generate: seeded `random.Random` programs and
  hypothesis-drawn ones), whose races carry the race pass's fixes, and the same programs with
  one dep slice made a tile short (`short_slices`), whose races the widened slice fixes.

For each spec, every diagnostic with a fix is applied alone (`pgraph.commands.fix.apply_fixes`,
the edited text handed to the planner as an unsaved buffer, `Options.sources`), and then all of
them at once, merged as `pgraph fix` merges them. After each alone: the diagnostic is gone (none of
its code and message on its line, or fewer of them); after all at once: each is gone, and for the corpus, of
each code fixed no more remain than the diagnostics that had no fix (a spec whose every PG100
had one checks clean of PG100); after
either: no code has more errors than before (budget overruns, PG121, included). The counts (diagnostics with fixes found, fixed, failures) are printed; the
opt-in long run (`-m slow`) checks every mutant seed and FIX_LONG generated programs.
"""

from __future__ import annotations

import copy as copy_module
import os
from collections import Counter
from pathlib import Path

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pgraph.commands.fix import apply_fixes
from pgraph.diagnostics import Diagnostic, DiagnosticBag, Severity
from pgraph.pipeline import Options, plan_program
from tests.conftest import ROOT
from tests.differential.programs import DataChooser, Dep, Program, RandomChooser, generate, render
from tests.support import sampling
from tests.unit.test_diagnostics import failing_specs, spec_options

#: (spec, file edited, text replaced, replacement, -D overrides): mistakes an engineer editing the
#: real specs makes. Each must plan with at least one diagnostic that has a fix (checked).
PLANTED: tuple[tuple[str, str, str, str, tuple[tuple[str, int], ...]], ...] = (
    # the case: a dep slice one tile short (the race fix must widen the slice, not add
    # a second dep that breaks the edge budget)
    ("specs/decode_layer.pgl", "specs/decode_layer.pgl", "deps(out_proj[c*CAST_TILES +: CAST_TILES])",
     "deps(out_proj[c*CAST_TILES +: CAST_TILES - 1])", ()),
    ("specs/decode_layer.pgl", "specs/decode_layer.pgl", "deps(out_proj[c*CAST_TILES +: CAST_TILES])",
     "deps(out_proj[c*CAST_TILES + 1 +: CAST_TILES - 1])", ()),
    # the whole dep dropped
    ("specs/decode_layer.pgl", "specs/decode_layer.pgl", "at post_rms_reduce deps(out_proj) {",
     "at post_rms_reduce {", ()),
    # a name misspelt, a kernel misspelt
    ("specs/decode_layer.pgl", "specs/decode_layer.pgl", "deps(out_proj_dummy)", "deps(out_proj_dumy)", ()),
    # a flag where it does not belong
    ("specs/decode_layer.pgl", "specs/decode_layer.pgl", "dummy out_proj_dummy deps(fa_fused)",
     "dummy out_proj_dummy early deps(fa_fused)", ()),
    # a kernel declared twice (a rename of the second is the fix; a task declared twice has
    # none: renamed, it would come alive and race with the first)
    ("specs/decode_layer.pgl", "specs/decode_common.pgl", "# fid 14: the direct wave",
     "kernel out_proj aic (attn_out : in bf16[BATCH_PAD, HIDDEN])\n# fid 14: the direct wave", ()),
    # a sync_start grid wider than the 24 clusters (PG113: the grid lowered, not sync_start dropped)
    ("specs/decode_layer.pgl", "specs/decode_layer.pgl", "spmd fa_fused[b in 0..PA_DEFAULT_BLOCK_DIM] sync_start",
     "spmd fa_fused[b in 0..PA_DEFAULT_BLOCK_DIM + 8] sync_start", ()),
    # a ring written wrong, a TaskId declaration dropped (PG023, PG014)
    ("specs/decode_layer.pgl", "specs/decode_layer.pgl", "manual scope ring 3 {", "manual scope ring 2 {", ()),
    ("specs/decode_layer.pgl", "specs/decode_layer.pgl", "    taskids down_proj ", "    ", ()),
    # an example: a dep misspelt
    ("tests/examples/a2a3_manual.pgl", "tests/examples/a2a3_manual.pgl", "dummy late[c in 0..K] deps(cast_k[c])",
     "dummy late[c in 0..K] deps(cats_k[c])", ()),
    # an example: a dep slice one tile short
    ("tests/examples/a2a3_manual.pgl", "tests/examples/a2a3_manual.pgl", "deps(proj[c*2 +: 2])", "deps(proj[c*2 +: 1])", ()),
)

#: generated programs per run (a window of the long run's seeds) and in the long run
FIX_SEEDS = int(os.environ.get("PGRAPH_FIX_SEEDS", "150"))
FIX_LONG = int(os.environ.get("PGRAPH_FIX_LONG", "3000"))
PROGRAM_WINDOW = sampling.window("fix: generated programs", FIX_LONG, FIX_SEEDS)
#: mutation-fuzz seeds per run (most mutants have no fixable diagnostic, and are cheap)
MUTANTS = int(os.environ.get("PGRAPH_FIX_MUTANTS", "60"))
MUTANT_SWEEP = 10_000
MUTANT_WINDOW = sampling.window("fix: mutants", MUTANT_SWEEP, MUTANTS)
#: Mutation categories left out: their mistake is not what the diagnostics see. A compound
#: mutant holds several (the fix of one lets the pipeline reach another's errors); a deleted
#: line or a name respelled as another declared name removes a declaration whose uses are right
#: (only "declare it" fixes them, and a respelling to the nearest name is a wrong guess); a
#: swapped keyword or a changed number changes what the spec means, and the error it trips
#: (a flag on the wrong kind of task) is a symptom whose fix reveals the rest (the races of a
#: grid made a parallel loop); an inserted or duplicated word in a list reads as a missing
#: comma, and the comma fix makes the stray word an item (`deps(a down_acc)`: PG002 then).
NOT_A_SLIP = ("compound", "delete_line", "respell_name", "swap_keyword", "number", "insert_token", "duplicate_token")


@attrs.define
class Tally:
    """Diagnostics with a fix found, fixes that did what they say, and the failures (described)."""

    found: int = 0
    widened: int = 0
    fixed: int = 0
    together: int = 0
    codes: Counter[str] = attrs.Factory(Counter)
    failures: list[str] = attrs.Factory(list)

    def line(self, name: str) -> str:
        codes = ", ".join(f"{c} {n}" for c, n in sorted(self.codes.items()))
        return (f"{name}: {self.found} diagnostic(s) with a fix found ({self.widened} a widened dep slice), "
                f"{self.fixed} fixed alone, "
                f"{self.together} spec(s) fixed all at once, {len(self.failures)} failure(s) [{codes}]")


def _where(a: Diagnostic, fixed: Diagnostic) -> tuple[str, int]:
    """The file and line of `a`, the line as it was before `fixed`'s fix shifted it (a fix that
    deletes a line moves the later ones up)."""
    if a.span is None or a.span.file.path is None:
        return ("", 0)
    path = a.span.file.path.resolve()
    line = a.span.line
    if a is not fixed and fixed.fix is not None:
        for e in fixed.fix.edits:
            if e.span.file.path is not None and e.span.file.path.resolve() == path and e.span.end_line <= line:
                line -= e.text.count("\n") - (e.span.end_line - e.span.line)
    return (str(path), line)


def _errors(bag: DiagnosticBag) -> Counter[str]:
    return Counter(d.code for d in bag.items if d.level is Severity.ERROR)


def _new_errors(before: Counter[str], after: Counter[str]) -> list[str]:
    return [f"{c} {before[c]} -> {n}" for c, n in sorted(after.items()) if n > before[c]]


def check_spec(spec: Path, opts: Options, tally: Tally, label: str, clean: bool = False) -> None:
    """Apply each fix of `spec` alone, then all together; record what happened in `tally`.
    All together, each fixed diagnostic (code and message) must be gone; with `clean` (the
    corpus), of each code fixed no more may remain than the diagnostics that had no fix."""
    _, bag = plan_program(spec, opts)
    diags = [d for d in bag.sorted() if d.fix is not None and d.span is not None]
    if not diags:
        return
    before = _errors(bag)

    def replan(fixed: list[Diagnostic]) -> tuple[DiagnosticBag, list[Diagnostic]]:
        result = apply_fixes(fixed)
        sources = tuple((*((p, t) for p, t in opts.sources if p not in result.texts), *result.texts.items()))
        return plan_program(spec, attrs.evolve(opts, sources=sources))[1], result.applied

    for d in diags:
        tally.found += 1
        tally.widened += "widen the dep of" in (d.hint or "")
        tally.codes[d.code] += 1
        after, _ = replan([d])
        problems = _new_errors(before, _errors(after))
        same = (_where(d, d), d.message)
        if (sum(1 for a in after.items if a.code == d.code and (_where(a, d), a.message) == same)
                >= sum(1 for a in bag.items if a.code == d.code and (_where(a, d), a.message) == same)):
            problems.insert(0, "the diagnostic is still reported")
        if problems:
            tally.failures.append(f"{label}: {d.code} at {d.span.location() if d.span else '?'} "
                                  f"({d.message[:120]}): {'; '.join(problems)}")
        else:
            tally.fixed += 1
    after, applied = replan(diags)
    # as `pgraph fix` leaves it: of each code fixed, only the diagnostics that had no fix (or
    # whose fix overlapped another) may remain: a spec whose every PG100 had a fix checks clean of PG100
    problems = _new_errors(before, _errors(after))
    if clean:
        had, now = Counter(d.code for d in bag.items), Counter(d.code for d in after.items)
        problems += [f"{c} {had[c]} -> {now[c]} with {n} fixed" for c, n in Counter(d.code for d in applied).items()
                     if now[c] > had[c] - n]
    else:
        left = Counter((a.code, a.message) for a in after.items)
        problems += [f"{k[0]} still reported ({k[1][:80]})" for k, n in Counter((d.code, d.message) for d in applied).items()
                     if left[k] > sum(1 for x in bag.items if (x.code, x.message) == k) - n]
    if problems:
        tally.failures.append(f"{label}: all fixes at once: {'; '.join(problems)}")
    else:
        tally.together += 1


def planted(spec: str, file: str, old: str, new: str, defines: tuple[tuple[str, int], ...]) -> Options:
    path = (ROOT / file).resolve()
    text = path.read_text(encoding="utf-8")
    assert text.count(old) == 1, (file, old)
    return Options(defines=defines, sources=((path, text.replace(old, new)),))


def generated_spec(program_text: str, folder: Path, name: str) -> Path:
    spec = folder / f"{name}.pgl"
    spec.write_text(program_text, encoding="utf-8")
    return spec


# ---- the tests ---------------------------------------------------------------------------------------------

def test_corpus_fixes() -> None:
    tally = Tally()
    for spec in failing_specs():
        opts, _ = spec_options(spec)
        check_spec(spec, opts, tally, spec.name, clean=True)
    print(tally.line("corpus"))
    assert not tally.failures, "\n".join(tally.failures)
    assert tally.found >= 15


@pytest.mark.parametrize("case", PLANTED, ids=lambda c: c[3][:40])
def test_planted_mistakes(case: tuple[str, str, str, str, tuple[tuple[str, int], ...]]) -> None:
    tally = Tally()
    check_spec(ROOT / case[0], planted(*case), tally, f"{case[1]}: {case[2]!r} -> {case[3][:60]!r}")
    print(tally.line("planted"))
    assert tally.found, "the planted mistake has no fixable diagnostic"
    assert not tally.failures, "\n".join(tally.failures)


def test_the_short_slice_is_widened_not_doubled() -> None:
    """The issue's case: the race fix of a dep slice one tile short is the full slice, and the
    spec's edge budget (588 <= 600 per layer) still holds after it."""
    case = PLANTED[0]
    _, bag = plan_program(ROOT / case[0], planted(*case))
    races = [d for d in bag.items if d.code == "PG100"]
    assert races and all(d.fix is not None for d in races)
    fix = races[0].fix
    assert fix is not None
    assert [e.text for e in fix.edits] == ["CAST_TILES"], fix.edits
    result = apply_fixes(races)
    (text,) = result.texts.values()
    assert "deps(out_proj[c*CAST_TILES +: CAST_TILES])" in text
    _, after = plan_program(ROOT / case[0], Options(sources=tuple(result.texts.items())))
    assert not after.has_errors, [d.message for d in after.items if d.level is Severity.ERROR]


def _mutant_options(seed: int) -> tuple[Path, Options] | None:
    from tests.property.test_mutation_fuzz import make_mutant

    m = make_mutant(seed)
    if "/configs/" in m.spec or m.category in NOT_A_SLIP:
        return None
    return ROOT / m.spec, Options(sources=(((ROOT / m.file).resolve(), m.text),))


#: Mutant seeds whose fix is known not to do what it says (open defects, listed so that the
#: sampled run is not red on the days it draws them; `test_known_misfixes_still_fail` keeps the
#: list honest: a seed that starts passing must be removed from it).
KNOWN_MISFIXES = {
    2034: "a typo in a declaration: PG002 respells the uses toward the typo, leaving more uses behind",
    5507: "a duplicated include line: the fix of the duplicate declarations leaves others",
}


def _mutants(seeds: range | list[int]) -> Tally:
    tally = Tally()
    for seed in seeds:
        got = _mutant_options(seed)
        if got is not None:
            check_spec(got[0], got[1], tally, f"mutant seed {seed}")
    return tally


def test_mutant_fixes() -> None:
    print(MUTANT_WINDOW.describe())
    tally = _mutants([s for s in MUTANT_WINDOW.cases if s not in KNOWN_MISFIXES])
    print(tally.line("mutants"))
    assert not tally.failures, "\n".join(tally.failures)


@pytest.mark.parametrize("seed", sorted(KNOWN_MISFIXES))
def test_known_misfixes_still_fail(seed: int) -> None:
    """Each listed seed still shows its defect (when one is fixed, drop it from KNOWN_MISFIXES)."""
    tally = _mutants([seed])
    assert tally.failures, f"mutant seed {seed} is fixed now: remove it from KNOWN_MISFIXES"


def _programs(seeds: range, folder: Path) -> Tally:
    tally = Tally()
    for seed in seeds:
        spec = generated_spec(render(generate(RandomChooser(seed))), folder, f"gen{seed}")
        check_spec(spec, Options(), tally, f"generated seed {seed}")
    return tally


def _deps(node: object) -> list[Dep]:
    """Every Dep of a generated program's tree (tasks' and waves' deps)."""
    if isinstance(node, Dep):
        return [node]
    if isinstance(node, list):
        return [d for x in node for d in _deps(x)]
    if attrs.has(type(node)):
        return [d for f in attrs.fields(type(node)) for d in _deps(getattr(node, f.name))]
    return []


def short_slices(program: Program) -> list[Program]:
    """Copies of `program` with one dep slice (`a..b`, `a +: n` of two or more tiles) one tile
    short, at its end or at its start: the issue's mistake, on generated programs."""
    out = []
    for i, dep in enumerate(_deps(program)):
        for j, sel in enumerate(dep.sel or ()):
            if sel.kind in ("range", "span") and sel.b - sel.a >= 2:
                for end in (True, False):
                    copy = copy_module.deepcopy(program)
                    short = _deps(copy)[i].sel[j]  # type: ignore[index]
                    short.b, short.a = (short.b - 1, short.a) if end else (short.b, short.a + 1)
                    out.append(copy)
    return out


def _short_slice_programs(seeds: range, folder: Path) -> Tally:
    tally = Tally()
    for seed in seeds:
        for k, variant in enumerate(short_slices(generate(RandomChooser(seed)))):
            spec = generated_spec(render(variant), folder, f"short{seed}_{k}")
            check_spec(spec, Options(), tally, f"generated seed {seed}, short slice {k}")
    return tally


def test_short_dep_slices_of_generated_programs(tmp_path: Path) -> None:
    """A dep slice made one tile short in generated programs: every race it causes that has a
    fix is fixed, by the widened slice where one widening is exact."""
    print(PROGRAM_WINDOW.describe())
    tally = _short_slice_programs(PROGRAM_WINDOW.cases, tmp_path)
    print(tally.line("short slices"))
    assert not tally.failures, "\n".join(tally.failures)


def test_generated_program_fixes(tmp_path: Path) -> None:
    print(PROGRAM_WINDOW.describe())
    tally = _programs(PROGRAM_WINDOW.cases, tmp_path)
    print(tally.line("generated"))
    assert not tally.failures, "\n".join(tally.failures)


@settings(max_examples=int(os.environ.get("PGRAPH_FIX_EXAMPLES", "25")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_generated_program_fixes_hypothesis(data: st.DataObject, tmp_path: Path) -> None:
    tally = Tally()
    spec = generated_spec(render(generate(DataChooser(data))), tmp_path, "drawn")
    check_spec(spec, Options(), tally, "drawn program")
    assert not tally.failures, "\n".join(tally.failures)


@pytest.mark.slow
def test_fixes_long(tmp_path: Path) -> None:
    """Every mutant seed and FIX_LONG generated programs (the counts of the closing note)."""
    programs = _programs(range(FIX_LONG), tmp_path)
    short = _short_slice_programs(range(FIX_LONG), tmp_path)
    mutants = _mutants(range(MUTANT_SWEEP))
    print(programs.line(f"generated 0..{FIX_LONG - 1}"))
    print(short.line(f"short slices of generated 0..{FIX_LONG - 1}"))
    print(mutants.line(f"mutants 0..{MUTANT_SWEEP - 1}"))
    failures = programs.failures + short.failures + mutants.failures
    assert not failures, "\n".join(failures[:50])
