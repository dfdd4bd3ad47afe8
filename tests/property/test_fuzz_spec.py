"""Mutation fuzzing of the real decode spec: every mutant ends in exit 0/1 with coded diagnostics.

The three spec files (specs/decode_layer.pgl and the two files it includes) are copied
into a temporary folder, one to three token-level mutations are applied (delete,
duplicate, swap with the next token, a number replaced by an out-of-range value, a name
replaced by another name of the files or by an out-of-range number), and `pgraph plan`
runs in-process on the mutant (`pgraph.cli.main`, output captured). The run must return 0 or 1 (never raise, never exit 2), every diagnostic must carry a
code of `pgraph.diagnostics.RULES`, and exit code 1 must come with at least one error.

The default test is sampled (tests/support/sampling.py): it draws 50 examples from the run's
sample key (PGRAPH_SAMPLE, else the date; printed in the report header and in a failure), so
successive runs draw different mutants and a failure reruns with the key; the `slow` variant
draws fresh examples: `python3 -m pytest -m slow tests/property/test_fuzz_spec.py`.
`PGRAPH_FUZZ_EXAMPLES=N` changes the slow count.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from pgraph.cli import main
from pgraph.diagnostics import RULES
from tests.conftest import time_limit
from tests.support import sampling
from tests.unit.test_grammar_words import grammar_words

SPECS = Path(__file__).resolve().parents[2] / "specs"
FILES = ("decode_layer.pgl", "qwen3_14b.pgl", "decode_common.pgl")
ORIGINAL = {name: (SPECS / name).read_text(encoding="utf-8") for name in FILES}

#: One token: a string, a comment (skipped), a word, an integer, a two-character operator, any other character.
TOKEN_RE = re.compile(r'"[^"\n]*"|#[^\n]*|[A-Za-z_][A-Za-z_0-9]*|[0-9][0-9_]*|\.\.|\+:|==|!=|<=|>=|\S')
#: Every keyword of the grammar, never a mutation's name: the words of its terminals, quoted ("include",
#: "interleave") and regex alternations alike (`at|spmd|...`, `early|sync_start`, the dtypes, the units).
KEYWORDS = grammar_words()
#: Out-of-range replacements for a number: zero, negative, one, huge (past i32, i64), and near the original.
FIXED_NUMBERS = ("0", "-1", "1", "2", "3", "-1000000", "2147483648", "9223372036854775808", "1" + "0" * 30)
#: Mutation kinds, weighted towards the ones that get past the parser (a token edit is mostly PG001).
OPS = ("delete", "duplicate", "swap", "number", "number", "number", "name", "name", "name", "value", "value")
SLOW_EXAMPLES = int(os.environ.get("PGRAPH_FUZZ_EXAMPLES", "3000"))
#: One example may take this long before it counts as a hang (the planner must stay bounded).
EXAMPLE_TIMEOUT_S = 20
DIAG_HEAD = re.compile(r"^(?:\S.*?: |pgraph: )(error|warning|note)\[(PG\d{3}) ([a-z-]+)\]: ", re.M)


def tokens(text: str) -> list[tuple[str, int, int]]:
    """(kind, start, end) of every token outside comments; kind is name, keyword, int, string or punct."""
    out = []
    for m in TOKEN_RE.finditer(text):
        s = m.group(0)
        if s.startswith("#"):
            continue
        if s[0].isdigit():
            kind = "int"
        elif s[0] == '"':
            kind = "string"
        elif s[0].isalpha() or s[0] == "_":
            kind = "keyword" if s in KEYWORDS else "name"
        else:
            kind = "punct"
        out.append((kind, m.start(), m.end()))
    return out


NAMES = sorted({ORIGINAL[f][a:b] for f in FILES for kind, a, b in tokens(ORIGINAL[f]) if kind == "name"})


def number_values(original: str) -> list[str]:
    """Replacement texts for the integer token `original`."""
    v = int(original.replace("_", ""))
    near = [v + 1, v - 1, v * 2, v // 2, v * 1000, -v]
    return [*FIXED_NUMBERS, *(str(n) for n in near)]


class Mutant:
    """The three files after mutation, with a short description of each edit (shown on failure)."""

    def __init__(self, texts: dict[str, str], edits: list[str]) -> None:
        self.texts = texts
        self.edits = edits

    def __repr__(self) -> str:
        return "Mutant(" + "; ".join(self.edits) + ")"


def _where(text: str, pos: int) -> str:
    line = text.count("\n", 0, pos) + 1
    return f"{line}:{pos - (text.rfind(chr(10), 0, pos) + 1) + 1}"


@st.composite
def mutated(draw: st.DrawFn, max_edits: int = 3) -> Mutant:
    """The three files with one to `max_edits` mutations applied (re-tokenised after each)."""
    texts = dict(ORIGINAL)
    edits = []
    for _ in range(draw(st.integers(1, max_edits))):
        name = draw(st.sampled_from(FILES))
        text = texts[name]
        toks = tokens(text)
        op = draw(st.sampled_from(OPS))
        if op == "number":
            _, a, b = draw(st.sampled_from([t for t in toks if t[0] == "int"]))
            new = draw(st.sampled_from(number_values(text[a:b])))
        elif op == "value":  # a name (usually a constant in a bound or extent) becomes an out-of-range number
            _, a, b = draw(st.sampled_from([t for t in toks if t[0] == "name"]))
            new = draw(st.sampled_from(FIXED_NUMBERS))
        elif op == "name":
            _, a, b = draw(st.sampled_from([t for t in toks if t[0] == "name"]))
            new = draw(st.sampled_from(NAMES))
        else:
            i = draw(st.integers(0, len(toks) - 1))
            _, a, b = toks[i]
            if op == "delete":
                new = " "
            elif op == "duplicate":
                new = text[a:b] + " " + text[a:b]
            elif i + 1 < len(toks):
                _, c, d = toks[i + 1]
                new, b = text[c:d] + text[b:c] + text[a:b], d
            else:
                new = text[a:b]
        edits.append(f"{name}:{_where(text, a)} {op} {text[a:b]!r} -> {new!r}")
        texts[name] = text[:a] + new + text[b:]
    return Mutant(texts, edits)


class Hang(BaseException):
    """An example ran past EXAMPLE_TIMEOUT_S (a BaseException, so no `except Exception` in pgraph hides it)."""




def run_cli(argv: list[str]) -> tuple[int, str, str]:
    """`pgraph.cli.main(argv)` in-process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), time_limit(EXAMPLE_TIMEOUT_S, Hang):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def check_outcome(code: int, stdout: str, stderr: str, fmt: str) -> None:
    """Exit 0/1; every diagnostic coded (a RULES code with its slug); exit 1 iff at least one error."""
    assert code in (0, 1), (code, stderr[-2000:])
    assert "Traceback" not in stderr
    if fmt == "json":
        doc = json.loads(stdout)
        diags = doc["diagnostics"]
        levels = []
        for d in diags:
            assert d["code"] in RULES, d
            assert d["slug"] == RULES[d["code"]].slug, d
            levels.append(d["severity"])
    else:
        heads = DIAG_HEAD.findall(stderr)
        for _level, rule_code, slug in heads:
            assert rule_code in RULES and RULES[rule_code].slug == slug, (rule_code, slug)
        levels = [level for level, _, _ in heads]
        # every rendered diagnostic header is coded: no "error:" line without a [PG### slug]
        stray = [ln for ln in stderr.splitlines() if re.match(r"^\S.*: (error|warning)(?!\[PG\d{3} )", ln)
                 and not re.search(r"\d+ error\(s\), \d+ warning\(s\)$", ln)]
        assert not stray, stray
        if code == 0:  # the report's first line: `<spec>: entry decode_fwd_layers, N layer(s); ...`
            assert ": entry " in stdout.splitlines()[0], stdout[:200]
    assert (code == 1) == ("error" in levels), (code, levels)


def plan_mutant(mutant: Mutant, fmt: str) -> None:
    """Write the mutant into a fresh folder and check `pgraph plan --format FMT` on it."""
    with tempfile.TemporaryDirectory(prefix="pgraph-fuzz-") as tmp:
        for other in SPECS.glob("*.pgl"):  # any further include of the spec resolves too
            shutil.copy(other, Path(tmp) / other.name)
        for name, text in mutant.texts.items():
            (Path(tmp) / name).write_text(text, encoding="utf-8")
        code, stdout, stderr = run_cli(["plan", "--format", fmt, str(Path(tmp) / FILES[0])])
    check_outcome(code, stdout, stderr, fmt)


def test_unmutated_spec_plans_clean() -> None:
    """The harness itself: the copied, unmutated files plan with exit 0 and no errors."""
    with tempfile.TemporaryDirectory(prefix="pgraph-fuzz-") as tmp:
        for name in FILES:
            shutil.copy(SPECS / name, Path(tmp) / name)
        code, stdout, stderr = run_cli(["plan", "--format", "json", str(Path(tmp) / FILES[0])])
    assert code == 0, stderr
    check_outcome(code, stdout, stderr, "json")
    assert json.loads(stdout)["layers"] == 40


def test_tokens_cover_numbers_and_names() -> None:
    """The tokeniser sees the constants and the names the mutations draw from."""
    text = ORIGINAL["qwen3_14b.pgl"]
    ints = [text[a:b] for kind, a, b in tokens(text) if kind == "int"]
    assert "17408" in ints and "66132544" in ints
    assert "5120" not in ints  # only in the comment `# 5120`
    assert {"HIDDEN", "NUM_LAYERS", "wq", "fa_fused", "residual_rms_casts"} <= set(NAMES)
    assert "entry" not in NAMES and "deps" not in NAMES


FUZZ = settings(max_examples=50, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@hypothesis_seed(sampling.run_key())
@FUZZ
@given(mutant=mutated(), fmt=st.sampled_from(("json", "json", "text")))
def test_mutated_spec_gives_coded_diagnostics(mutant: Mutant, fmt: str) -> None:
    """50 mutants of the real spec drawn from the run's sample key: exit 0/1 with coded
    diagnostics, never a traceback (fresh ones: test_mutated_spec_gives_coded_diagnostics_many)."""
    try:
        plan_mutant(mutant, fmt)
    except AssertionError as e:
        raise AssertionError(f"{e} ({sampling.ENV}={sampling.run_key()})") from None


@settings(max_examples=SLOW_EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(mutant=mutated(), fmt=st.sampled_from(("json", "json", "text")))
def _fuzz_many(mutant: Mutant, fmt: str) -> None:
    plan_mutant(mutant, fmt)


@pytest.mark.slow
def test_mutated_spec_gives_coded_diagnostics_many(request: pytest.FixtureRequest) -> None:
    """Fresh random mutants (3000 by default, about 6 minutes): same contract as the default run."""
    if "slow" not in (request.config.getoption("markexpr") or ""):
        pytest.skip("opt-in: python3 -m pytest -m slow tests/property/test_fuzz_spec.py")
    _fuzz_many()


OVERRIDABLE = sorted({ORIGINAL["qwen3_14b.pgl"][a:b] for kind, a, b in tokens(ORIGINAL["qwen3_14b.pgl"])
                      if kind == "name" and ORIGINAL["qwen3_14b.pgl"][a:b].isupper()})


@settings(max_examples=40, deadline=None, derandomize=True, database=None)
@given(name=st.sampled_from(OVERRIDABLE),
       value=st.sampled_from((0, -1, 1, 3, 1000, 2**31, 2**63, 10**30)))
def test_define_out_of_range_gives_coded_diagnostics(name: str, value: int) -> None:
    """`-D NAME=VALUE` with out-of-range values on the unmutated spec: exit 0/1, coded diagnostics."""
    code, stdout, stderr = run_cli(["plan", "--format", "json", "-D", f"{name}={value}", str(SPECS / FILES[0])])
    check_outcome(code, stdout, stderr, "json")
