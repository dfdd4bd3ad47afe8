"""Mutation fuzz of every real spec and example: `check`, `plan`, `build` and `run` never fail inside pgraph.

The corpus is every `.pgl` under specs/ (the decode layer, its includes and its variants),
tests/examples/ and bench/specs/ (when it exists), copied with its folder layout into a
temporary project (a `pgraph.toml` at its top, so `include "../decode_layer.pgl"` stays inside
the project root). A mutant is one file of the corpus with one seeded edit of a category
(`CATEGORIES`: a token deleted, duplicated, swapped with the next or inserted; a number set to
0, -1, 1, 2**31, 2**63, 10**30, 2**1024 or near its value; a name respelled as another name of
the corpus or with a typo; a line deleted or duplicated; a parameter direction, a keyword of
one family (auto/manual, at/spmd/parallel/dummy/tiles, ...) or a dtype swapped; a brace
deleted), or 2-4 edits of random categories ('compound'). It is run on a spec whose include
closure holds the file (the file itself when it is a spec with an entry).

For each mutant, in-process through `pgraph.cli.main`: `check`; when that exits 0, `plan` and
`build --target a2a3` into a folder of the project; when that exits 0, `run` (the NumPy executor:
`--config small --layers 1` for the decode specs under specs/, the spec's own constants for the
examples, `--max-memory 2`). Every exit code must be 0, 1 or 2, never 3
(the internal-error guard must never fire), stderr holds no Python traceback, and a mutant
`check` accepts must also `plan` with exit 0. A mutant that runs past EXAMPLE_TIMEOUT_S is a
failure too (a hang).

Default (sampled, tests/support/sampling.py): one window of MUTANTS_PER_RUN consecutive seeds
of the long run's 0..SWEEP-1 (about 15 s), chosen by PGRAPH_SAMPLE, else the date, and printed,
so that the windows of successive runs together check the long run's mutants
(docs/reliability.md, "Sampling"). Opt-in long run:
`python3 -m pytest -m slow tests/property/test_mutation_fuzz.py` with PGRAPH_MUTANTS (default
10,000) from PGRAPH_MUTATION_SEED (default 0); it writes its counts into docs/reliability.md
between the `mutation-fuzz` markers and saves every failing mutant under PGRAPH_FUZZ_REPROS
(default: a temporary folder, printed).
"""

from __future__ import annotations

import contextlib
import io
import os
import random
import re
import shutil
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

from pgraph.cli import main
from tests.conftest import locked, time_limit
from tests.property.test_fuzz_spec import tokens  # the same lexer: kinds name, keyword, int, string, punct
from tests.support import sampling
from tests.unit.test_grammar_words import grammar_words

ROOT = Path(__file__).resolve().parents[2]
CORPUS_DIRS = ("specs", "tests/examples", "bench/specs")
MUTANTS_PER_RUN = int(os.environ.get("PGRAPH_MUTANTS_PER_RUN", "100"))
LONG_MUTANTS = int(os.environ.get("PGRAPH_MUTANTS", "10000"))
SEED_BASE = int(os.environ.get("PGRAPH_MUTATION_SEED", "0"))
#: the long run's seeds (0..SWEEP-1), of which each run checks one window of MUTANTS_PER_RUN
SWEEP = 10_000
WINDOW = sampling.window("mutation fuzz seeds", SWEEP, MUTANTS_PER_RUN)
EXAMPLE_TIMEOUT_S = 60
#: Issue 10: no accepted input should need more than about 2 GiB; a mutant over this is recorded.
MEMORY_NOTE_BYTES = 2 * 2**30
#: The long run's address-space cap (RLIMIT_AS): past it a mutant fails with MemoryError.
MEMORY_CAP_BYTES = 6 * 2**30
RELIABILITY = ROOT / "docs" / "reliability.md"
BEGIN, END = "<!-- mutation-fuzz:begin -->", "<!-- mutation-fuzz:end -->"

#: One token: a string, a comment (skipped), a word, an integer, a two-character operator, any other character.
KEYWORDS = grammar_words()
#: Replacement numbers: zero, negative, one, past i32/u32/i64/u64, past any float, and huge.
FIXED_NUMBERS = ("0", "-1", "1", "2", "2147483648", "4294967296", "9223372036854775808", "18446744073709551616",
                 "1" + "0" * 30, str(2**1024))
#: Keyword families whose members are swapped for one another.
FAMILIES = (("in", "out", "inout", "atomic_add"), ("auto", "manual"), ("at", "spmd", "parallel", "dummy", "tiles"),
            ("reads", "writes", "atomic_add"), ("aic", "aiv", "mix"), ("early", "sync_start"),
            ("bf16", "f16", "f32", "i8", "i32", "i64", "u8", "u64"))
CATEGORIES = ("delete_token", "duplicate_token", "swap_tokens", "insert_token", "number", "respell_name",
              "typo_name", "delete_line", "duplicate_line", "swap_direction", "swap_keyword", "delete_brace",
              "compound")
#: Weight of a (mutated file, spec run) pair by the spec's folder: the decode specs take about
#: 1-3 s a mutant, the examples about 0.1 s.
FOLDER_WEIGHT = {"specs": 1, "tests/examples": 5, "bench/specs": 2}
DIAG_CODE = re.compile(r"\berror\[(PG\d{3}) ")


# ---- the corpus ----------------------------------------------------------------------------------------

def corpus_files() -> dict[str, str]:
    """Relative path -> text of every corpus .pgl (configs/ included: specs include nothing from it)."""
    out = {}
    for folder in CORPUS_DIRS:
        base = ROOT / folder
        if base.is_dir():
            for p in sorted(base.rglob("*.pgl")):
                out[p.relative_to(ROOT).as_posix()] = p.read_text(encoding="utf-8")
    return out


FILES = corpus_files()
INCLUDE_RE = re.compile(r'^\s*include\s+"([^"\n]*)"', re.M)


def closure(rel: str, seen: frozenset[str] = frozenset()) -> set[str]:
    """`rel` and every corpus file it includes, transitively."""
    out = {rel}
    for inc in INCLUDE_RE.findall(FILES[rel]):
        child = os.path.normpath(os.path.join(os.path.dirname(rel), inc))
        if child in FILES and child not in seen | {rel}:
            out |= closure(child, seen | {rel})
    return out


def _folder(rel: str) -> str:
    return next(f for f in CORPUS_DIRS if rel.startswith(f + "/"))


#: Bench specs not fuzzed: the stress specs sit at or past the runtime's limits on purpose (the
#: 20,000-dummy one is PG109/PG111), and prefill_351k takes seconds per check (its 31k sibling,
#: the same text at another tiling, is fuzzed).
NOT_FUZZED = ("bench/specs/stress_", "bench/specs/prefill_351k")
#: Specs to run: corpus files whose include closure declares an entry (not configs/).
SPECS = sorted(r for r in FILES if "/configs/" not in r and not r.startswith(NOT_FUZZED)
               and any(re.search(r"^\s*entry\s", FILES[f], re.M) for f in closure(r)))
#: (file to mutate, spec to run) and its weight.
PAIRS = sorted((f, s) for s in SPECS for f in closure(s))
WEIGHTS = [FOLDER_WEIGHT[_folder(s)] for _, s in PAIRS]



NAMES = sorted({t[a:b] for t in FILES.values() for kind, a, b in tokens(t) if kind == "name"})


# ---- mutants ---------------------------------------------------------------------------------------------

@attrs.frozen
class Mutant:
    """One mutated corpus file and the spec that is run on it."""

    seed: int
    category: str
    file: str
    spec: str
    text: str
    edits: tuple[str, ...]

    def describe(self) -> str:
        return f"seed {self.seed} [{self.category}] {self.file} (run on {self.spec}): " + "; ".join(self.edits)


def _where(text: str, pos: int) -> str:
    line = text.count("\n", 0, pos) + 1
    return f"{line}:{pos - (text.rfind(chr(10), 0, pos) + 1) + 1}"


def _number_values(original: str) -> list[str]:
    v = int(original.replace("_", ""))
    return [*FIXED_NUMBERS, *(str(n) for n in (v + 1, v - 1, v * 2, v // 2, v * 1000, -v))]


def edit(rng: random.Random, text: str, category: str) -> tuple[str, str] | None:
    """Apply one edit of `category` to `text`: (new text, description), or None when it does not apply."""
    toks = tokens(text)
    if not toks:
        return None

    def replace(a: int, b: int, new: str) -> tuple[str, str]:
        return text[:a] + new + text[b:], f"{_where(text, a)} {category} {text[a:b]!r} -> {new!r}"

    if category in ("delete_token", "duplicate_token", "swap_tokens", "insert_token"):
        i = rng.randrange(len(toks))
        _, a, b = toks[i]
        if category == "delete_token":
            return replace(a, b, " ")
        if category == "duplicate_token":
            return replace(a, b, text[a:b] + " " + text[a:b])
        if category == "insert_token":
            _, c, d = toks[rng.randrange(len(toks))]
            return replace(a, a, text[c:d] + " ")
        if i + 1 >= len(toks):
            return None
        _, c, d = toks[i + 1]
        return replace(a, d, text[c:d] + text[b:c] + text[a:b])
    if category == "number":
        ints = [t for t in toks if t[0] == "int"]
        if not ints:
            return None
        _, a, b = rng.choice(ints)
        return replace(a, b, rng.choice(_number_values(text[a:b])))
    if category in ("respell_name", "typo_name"):
        names = [t for t in toks if t[0] == "name"]
        if not names:
            return None
        _, a, b = rng.choice(names)
        word = text[a:b]
        if category == "respell_name":
            return replace(a, b, rng.choice(NAMES))
        k = rng.randrange(len(word))
        typo = rng.choice((word[:k] + word[k + 1:], word[:k] + word[k] + word[k:],
                           word[:k] + rng.choice("abcxyz_0") + word[k + 1:]))
        return replace(a, b, typo or "_")
    if category in ("delete_line", "duplicate_line"):
        lines = text.split("\n")
        candidates = [i for i, ln in enumerate(lines) if ln.strip() and not ln.lstrip().startswith("#")]
        if not candidates:
            return None
        i = rng.choice(candidates)
        a = sum(len(ln) + 1 for ln in lines[:i])
        b = a + len(lines[i])
        return replace(a, b, "" if category == "delete_line" else lines[i] + "\n" + lines[i])
    if category == "swap_direction":
        spots = [m for m in re.finditer(r":\s*(in|out|inout|atomic_add)\b", text)]
        if not spots:
            return None
        m = rng.choice(spots)
        others = [d for d in FAMILIES[0] if d != m.group(1)]
        return replace(m.start(1), m.end(1), rng.choice(others))
    if category == "swap_keyword":
        kws = [(t, fam) for t in toks if t[0] == "keyword" for fam in FAMILIES[1:] if text[t[1]:t[2]] in fam]
        if not kws:
            return None
        (_, a, b), fam = rng.choice(kws)
        return replace(a, b, rng.choice([w for w in fam if w != text[a:b]]))
    if category == "delete_brace":
        braces = [t for t in toks if text[t[1]:t[2]] in "{}"]
        if not braces:
            return None
        _, a, b = rng.choice(braces)
        return replace(a, b, " ")
    raise ValueError(category)


def make_mutant(seed: int) -> Mutant:
    """The mutant of `seed` (deterministic: the same seed gives the same mutant on every machine)."""
    rng = random.Random(f"pgraph-mutation-{seed}")
    category = CATEGORIES[seed % len(CATEGORIES)]  # every category equally often
    file, spec = rng.choices(PAIRS, weights=WEIGHTS)[0]
    text = FILES[file]
    edits: list[str] = []
    steps = [category] if category != "compound" else [rng.choice(CATEGORIES[:-1]) for _ in range(rng.randint(2, 4))]
    for step in steps:
        for _ in range(20):  # an edit that does not apply to this file: draw again
            got = edit(rng, text, step)
            if got is not None:
                text, what = got
                edits.append(what)
                break
    return Mutant(seed, category, file, spec, text, tuple(edits))


# ---- running ------------------------------------------------------------------------------------------------

class RssSampler:
    """The peak resident set size of this process between `reset()` and `peak()`, sampled from
    /proc/self/statm every 20 ms by a daemon thread (0 where /proc is missing)."""

    def __init__(self) -> None:
        import threading

        self._max = 0
        self._page = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _rss(self) -> int:
        try:
            with open("/proc/self/statm", encoding="ascii") as fh:
                return int(fh.read().split()[1]) * self._page
        except (OSError, ValueError, IndexError):
            return 0

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            self._max = max(self._max, self._rss())

    def reset(self) -> None:
        self._max = self._rss()

    def peak(self) -> int:
        return max(self._max, self._rss())

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


@contextlib.contextmanager
def address_space_cap(limit: int) -> Iterator[None]:
    """RLIMIT_AS lowered to `limit` bytes for the block, so that a mutant that would take the
    shared machine's memory gets a MemoryError instead (a resource finding, not a pass)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    new = limit if hard == resource.RLIM_INFINITY else min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (new, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


class Hang(BaseException):
    """A mutant ran past EXAMPLE_TIMEOUT_S (a BaseException, so no `except Exception` in pgraph hides it)."""




def run_cli(argv: list[str]) -> tuple[int, str]:
    """`pgraph.cli.main(argv)` in-process: (exit code, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), time_limit(EXAMPLE_TIMEOUT_S, Hang):
        code = main(argv)
    return code, err.getvalue()


@attrs.define
class Outcome:
    """What one mutant did: exit codes (None: not run), error codes reported, problems found."""

    check: int
    plan: int | None = None
    build: int | None = None
    run: int | None = None
    codes: frozenset[str] = frozenset()
    problems: list[str] = attrs.field(factory=list)
    peak_rss: int = 0
    memory: str = ""  # a resource finding (peak RSS over MEMORY_NOTE_BYTES, or MemoryError under the cap)


@contextlib.contextmanager
def project() -> Iterator[Path]:
    """A temporary project holding the corpus (and its pgraph.toml marker)."""
    with tempfile.TemporaryDirectory(prefix="pgraph-mutation-") as tmp:
        root = Path(tmp)
        (root / "pgraph.toml").write_text("", encoding="utf-8")
        for rel, text in FILES.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text, encoding="utf-8")
        yield root


def run_mutant(root: Path, m: Mutant) -> Outcome:
    """Write the mutant into the project, run check (then plan and build), restore the file."""
    path = root / m.file
    path.write_text(m.text, encoding="utf-8")
    try:
        spec = str(root / m.spec)
        outcome = Outcome(-1)
        run = ["run", spec, "--max-memory", "2"]
        if m.spec.startswith("specs/"):
            run += ["--config", str(root / "specs" / "configs" / "small.pgl"), "--layers", "1"]
        for cmd, argv in (("check", ["check", spec]), ("plan", ["plan", spec]),
                          ("build", ["build", spec, "--target", "a2a3", "-o", str(root / "out")]), ("run", run)):
            try:
                code, err = run_cli(argv)
            except Hang as hang:
                outcome.problems.append(f"{cmd}: {hang}")
                return outcome
            except MemoryError:  # raised outside pgraph's guard (the harness's own buffers)
                outcome.memory = f"{cmd}: MemoryError under the {MEMORY_CAP_BYTES // 2**30} GiB address-space cap"
                return outcome
            setattr(outcome, cmd, code)
            if cmd == "check":
                outcome.codes = frozenset(DIAG_CODE.findall(err))
            if code == 3 and "internal error: MemoryError" in err:
                outcome.memory = f"{cmd}: MemoryError under the {MEMORY_CAP_BYTES // 2**30} GiB address-space cap"
                return outcome
            if code not in (0, 1, 2):
                outcome.problems.append(f"{cmd}: exit {code}: {err.strip()[-1500:]}")
            if "Traceback" in err:
                outcome.problems.append(f"{cmd}: a traceback on stderr: {err.strip()[-1500:]}")
            if cmd == "plan" and code != 0:
                outcome.problems.append(f"plan exits {code} on a spec `check` accepts: {err.strip()[-800:]}")
            if code != 0:
                break
        return outcome
    finally:
        path.write_text(FILES[m.file], encoding="utf-8")


def save_repro(folder: Path, m: Mutant, outcome: Outcome) -> Path:
    """The project files needed to rerun a failing mutant: its closure, mutated, and a README."""
    where = folder / f"mutant_{m.seed}"
    for rel in closure(m.spec) | {m.file}:
        (where / rel).parent.mkdir(parents=True, exist_ok=True)
        (where / rel).write_text(m.text if rel == m.file else FILES[rel], encoding="utf-8")
    (where / "pgraph.toml").write_text("", encoding="utf-8")
    (where / "README.txt").write_text(f"{m.describe()}\nrun: pgraph check {m.spec}\n" + "\n".join(outcome.problems)
                                      + "\n", encoding="utf-8")
    return where


# ---- the tests -------------------------------------------------------------------------------------------------

def test_corpus_and_pairs_cover_every_spec() -> None:
    """The harness: the corpus holds the decode layer, its includes, its variants and the examples;
    each spec's closure is what its include lines name (by hand)."""
    assert {"specs/decode_layer.pgl", "specs/qwen3_14b.pgl", "specs/decode_common.pgl",
            "specs/variants/decode_layer_762.pgl", "tests/examples/lang_layer.pgl"} <= set(FILES)
    assert closure("specs/variants/decode_layer_762.pgl") == {
        "specs/variants/decode_layer_762.pgl", "specs/decode_layer.pgl", "specs/qwen3_14b.pgl",
        "specs/decode_common.pgl"}
    assert "specs/qwen3_14b.pgl" not in SPECS and "tests/examples/lang_common.pgl" not in SPECS
    assert ("tests/examples/lang_common.pgl", "tests/examples/lang_layer.pgl") in PAIRS


def test_mutants_are_deterministic_and_change_the_text() -> None:
    a, b = make_mutant(17), make_mutant(17)
    assert a == b
    changed = [make_mutant(s) for s in range(60)]
    assert sum(m.text != FILES[m.file] for m in changed) >= 55  # a swap of two equal tokens changes nothing
    assert {m.category for m in changed} == set(CATEGORIES)


def test_unmutated_corpus_passes() -> None:
    """The harness itself: every spec of the copied corpus checks, plans and builds with exit 0."""
    with project() as root:
        for spec in SPECS:
            outcome = run_mutant(root, Mutant(-1, "none", spec, spec, FILES[spec], ()))
            assert (outcome.check, outcome.plan, outcome.build, outcome.problems) == (0, 0, 0, []), spec
            # the decode specs run and pass; on the others run is a usage error (the NumPy backend runs decode specs)
            # (the dcr_serial what-if calls HEAD's SPMD kernel from five single-block tasks: a kernel fault)
            want = 2 if not spec.startswith("specs/") else 1 if spec.endswith("dcr_serial.pgl") else 0
            assert outcome.run == want, (spec, outcome.run)


def _fuzz(seeds: range, progress: int = 0) -> tuple[list[tuple[Mutant, Outcome]], list[tuple[Mutant, Outcome]]]:
    """Run the mutants of `seeds`: (every result, the failing ones). Each result carries the peak
    RSS of its run; one over MEMORY_NOTE_BYTES is a resource finding (`Outcome.memory`)."""
    results, failures = [], []
    sampler = RssSampler()
    try:
        with project() as root:
            for seed in seeds:
                m = make_mutant(seed)
                sampler.reset()
                outcome = run_mutant(root, m)
                outcome.peak_rss = sampler.peak()
                if not outcome.memory and outcome.peak_rss > MEMORY_NOTE_BYTES:
                    outcome.memory = f"peak RSS {outcome.peak_rss / 2**30:.1f} GiB"
                results.append((m, outcome))
                if outcome.problems:
                    failures.append((m, outcome))
                if progress and len(results) % progress == 0:
                    print(f"mutation fuzz: {len(results):,} mutants, {len(failures)} failing", flush=True)
    finally:
        sampler.close()
    return results, failures


def test_mutants_never_crash() -> None:
    """This run's window of the long run's mutants: exit 0/1/2 (never 3), no traceback, `plan`
    agrees with `check` (the whole sweep: test_mutants_never_crash_long, -m slow)."""
    print(WINDOW.describe())
    _, failures = _fuzz(WINDOW.cases)
    assert not failures, WINDOW.describe() + "\n" + "\n\n".join(
        f"{m.describe()}\n  " + "\n  ".join(o.problems) for m, o in failures[:5])


def test_windows_cover_the_long_run() -> None:
    """The windows of successive keys are the long run's seeds 0..SWEEP-1, each once."""
    seen = [s for key in range(WINDOW.parts) for s in sampling.window("x", SWEEP, MUTANTS_PER_RUN, key).cases]
    assert sorted(seen) == list(range(SWEEP))


# ---- the long run and its record ---------------------------------------------------------------------------------

def render_counts(results: list[tuple[Mutant, Outcome]], seeds: range) -> str:
    """The docs/reliability.md section of a run (deterministic for a given seed range)."""
    by_cat: dict[str, Counter[str]] = {c: Counter() for c in CATEGORIES}
    codes: Counter[str] = Counter()
    totals: Counter[str] = Counter()
    heavy = [(m, o) for m, o in results if o.memory]
    for m, o in results:
        row = by_cat[m.category]
        for c in (row, totals):
            c["mutants"] += 1
            c[f"check {o.check}"] += 1
            if o.plan is not None:
                c[f"plan {o.plan}"] += 1
            if o.build is not None:
                c[f"build {o.build}"] += 1
            if o.run is not None:
                c[f"run {o.run}"] += 1
            c["internal"] += sum(1 for p in o.problems if "exit 3" in p)
            c["problems"] += bool(o.problems)
            c["memory"] += bool(o.memory)
        codes.update(o.codes)
    files = Counter(_folder(m.spec) for m, _ in results)
    cols = ("mutants", "check 0", "check 1", "check 2", "plan 0", "build 0", "build 1", "build 2", "run 0", "run 1",
            "run 2", "internal", "problems", "memory")
    head = ["category", "mutants", "check: exit 0", "exit 1", "exit 2", "plan: exit 0", "build: exit 0", "exit 1",
            "exit 2", "run: exit 0", "exit 1", "exit 2", "internal errors (exit 3)", "other failures",
            f"over {MEMORY_NOTE_BYTES // 2**30} GiB"]
    lines = [
        BEGIN,
        "## Mutation fuzz (`tests/property/test_mutation_fuzz.py`)",
        "",
        f"Written by `PGRAPH_MUTANTS={len(seeds)} python3 -m pytest -m slow tests/property/test_mutation_fuzz.py`"
        f" (seeds {seeds.start}..{seeds.stop - 1}; the test rewrites this section). Every mutant is one file of the"
        " corpus (specs/, tests/examples/, bench/specs/) with one seeded edit of the category (or 2-4 edits:"
        " `compound`), run through `pgraph check` and, when that exits 0, `plan` and `build --target a2a3`, in"
        " process, then `run` (NumPy; `--config small --layers 1` for specs/) when `build` exits 0. Exit codes"
        " must be 0, 1 or 2, never 3 (internal error); no traceback; a mutant `check` accepts must `plan`"
        " with exit 0. Each command runs only after the one before exits 0, so its columns count those"
        " mutants; `run` exits 2 on the examples and bench specs (the NumPy backend runs the decode specs only).",
        "",
        "Mutants by the folder of the spec run: " + ", ".join(f"{f} {n:,}" for f, n in sorted(files.items())) + ".",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for cat in (*CATEGORIES, "total"):
        row = totals if cat == "total" else by_cat[cat]
        name = "**total**" if cat == "total" else f"`{cat}`"
        lines.append("| " + " | ".join([name, *(f"{row[c]:,}" for c in cols)]) + " |")
    lines += [
        "",
        "Error codes reported by `check`, by the number of mutants that got them (top 20):",
        "",
        "| code | mutants |",
        "|---|---|",
        *(f"| {code} | {n:,} |" for code, n in sorted(codes.items(), key=lambda kv: (-kv[1], kv[0]))[:20]),
        "",
        f"Internal errors: {totals['internal']}. Other failures (tracebacks, hangs past {EXAMPLE_TIMEOUT_S} s,"
        f" `plan` disagreeing with `check`): {totals['problems'] - totals['internal']}.",
        "",
        f"Resources: the run is capped at {MEMORY_CAP_BYTES // 2**30} GiB of address space (RLIMIT_AS), and the"
        f" peak RSS of every mutant is sampled; {totals['memory']} mutant(s) went over"
        f" {MEMORY_NOTE_BYTES // 2**30} GiB (issue 10: no accepted input should need more than about 2 GiB;"
        " the work guard is tracked there)" + (":" if heavy else "."),
        *(f"- seed {m.seed} [{m.category}] {m.file} (run on {m.spec}): {o.memory}; " + "; ".join(m.edits)
          for m, o in heavy[:20]),
        END,
    ]
    return "\n".join(lines) + "\n"


def write_section(text: str, path: Path = RELIABILITY) -> None:
    """Replace the mutation-fuzz section of docs/reliability.md (create the file or the section),
    under a lock on the file (the differential long run may rewrite its section at the same time)."""
    with locked(path):
        doc = path.read_text(encoding="utf-8") or (
            "# Reliability\n\nWhat the fuzz and differential tests ran, and what they found. Each section is"
            " written by the test named in it.\n\n")
        if BEGIN in doc and END in doc:
            head, rest = doc.split(BEGIN, 1)
            doc = head + text.rstrip("\n") + rest.split(END, 1)[1]
        else:
            doc = doc.rstrip("\n") + "\n\n" + text
        path.write_text(doc, encoding="utf-8")


def test_write_section_keeps_the_rest_of_the_file(tmp_path: Path) -> None:
    doc = tmp_path / "r.md"
    write_section(f"{BEGIN}\nfirst\n{END}\n", doc)
    doc.write_text(doc.read_text(encoding="utf-8") + "\n<!-- differential:begin -->\nlead's\n"
                   "<!-- differential:end -->\n", encoding="utf-8")
    write_section(f"{BEGIN}\nsecond\n{END}\n", doc)
    text = doc.read_text(encoding="utf-8")
    assert "second" in text and "first" not in text and "lead's" in text and text.count(BEGIN) == 1


@pytest.mark.slow
def test_mutants_never_crash_long(request: pytest.FixtureRequest) -> None:
    """PGRAPH_MUTANTS (10,000 by default) mutants from PGRAPH_MUTATION_SEED (0): every window the
    sampled test checks; writes docs/reliability.md."""
    if "slow" not in (request.config.getoption("markexpr") or ""):
        pytest.skip("opt-in: python3 -m pytest -m slow tests/property/test_mutation_fuzz.py")
    seeds = range(SEED_BASE, SEED_BASE + LONG_MUTANTS)
    with address_space_cap(MEMORY_CAP_BYTES):
        results, failures = _fuzz(seeds, progress=500)  # progress lines show with -s
    write_section(render_counts(results, seeds))
    folder = Path(os.environ.get("PGRAPH_FUZZ_REPROS") or tempfile.mkdtemp(prefix="pgraph-fuzz-repros-"))
    heavy = [(m, o) for m, o in results if o.memory]
    for m, o in heavy:  # resource findings: recorded and saved, for the work guard (not a crash of pgraph)
        save_repro(folder / "memory", m, attrs.evolve(o, problems=[o.memory]))
    if heavy:
        print(f"{len(heavy)} mutant(s) over {MEMORY_NOTE_BYTES // 2**30} GiB, saved under {folder / 'memory'}")
    if failures:
        saved = [save_repro(folder, m, o) for m, o in failures]
        shutil.copy(RELIABILITY, folder / "reliability.md")
        pytest.fail(f"{len(failures)} failing mutant(s), saved under {folder}:\n" + "\n".join(
            f"{m.describe()}\n  " + "\n  ".join(o.problems) + f"\n  -> {p}" for (m, o), p in
            zip(failures[:20], saved)))
