"""`pgraph check --emit ast|ir|graph|plan`: stable dumps, golden IR dumps, and the unparser's round trip.

The IR dumps of the examples are golden files (tests/golden/ir/, `--update-golden`): a change
of lowering shows up as a reviewed diff of them. The AST dump is the unparser's canonical
text, and `parse(unparse(m)) == m` (spans aside) for every spec, example and corpus file.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import attrs
import pytest

from pgraph.cli import main
from pgraph.diagnostics import DiagnosticBag
from pgraph.frontend.parser import parse_source
from pgraph.frontend.unparse import unparse
from pgraph.source import SourceFile, Span
from tests.conftest import HEAD_SPEC, KEEP_ENV, ROOT, write_golden

GOLDEN = ROOT / "tests" / "golden" / "ir"
EXAMPLES = sorted(p for p in (ROOT / "tests" / "examples").glob("*.pgl") if "entry " in p.read_text(encoding="utf-8"))
ALL_PGL = sorted({*ROOT.joinpath("specs").rglob("*.pgl"), *ROOT.joinpath("tests").rglob("*.pgl")})


def shape(node: object) -> object:
    """A node without its spans: attrs records as (class, fields...), tuples element-wise."""
    if isinstance(node, Span):
        return None
    if attrs.has(type(node)):
        return (type(node).__name__, *(shape(getattr(node, f.name)) for f in attrs.fields(type(node))
                                       if not isinstance(getattr(node, f.name), Span)
                                       and not (isinstance(getattr(node, f.name), tuple)
                                                and getattr(node, f.name)
                                                and all(isinstance(x, Span) for x in getattr(node, f.name)))))
    if isinstance(node, tuple):
        return tuple(shape(x) for x in node)
    return node


def parse(text: str, name: str = "<t>"):  # type: ignore[no-untyped-def]
    bag = DiagnosticBag()
    module = parse_source(SourceFile(name, text), bag)
    return module, bag


@pytest.mark.parametrize("path", ALL_PGL, ids=lambda p: str(p.relative_to(ROOT)))
def test_unparse_round_trips(path: Path) -> None:
    module, _ = parse(path.read_text(encoding="utf-8"), str(path))
    if module is None:
        return  # a syntax-error corpus file
    text = unparse(module)
    again, bag = parse(text)
    assert again is not None, [d.message for d in bag.items]
    assert shape(again) == shape(module)
    assert unparse(again) == text  # canonical: a fixed point


@pytest.mark.parametrize("spec", EXAMPLES, ids=lambda p: p.stem)
def test_ir_dump_golden(spec: Path, update_golden: bool, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["check", str(spec), "--emit", "ir"])
    assert code == 0
    text = capsys.readouterr().out
    golden = GOLDEN / f"{spec.stem}.ir"
    if update_golden:
        write_golden(golden, text)
    assert golden.is_file(), f"missing {golden}; run pytest with --update-golden"
    assert text == golden.read_text(encoding="utf-8"), f"{spec.stem}: the IR dump differs from {golden}"


@pytest.mark.parametrize("stage", ["ast", "ir", "graph", "plan"])
def test_every_stop_point_dumps(stage: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(HEAD_SPEC), "--layers", "2", "--emit", stage]) == 0
    out = capsys.readouterr().out
    first = {"ast": "const ", "ir": "program decode_fwd_layers", "graph": "graph window:", "plan": "{"}[stage]
    assert out.startswith(first), out[:80]


def test_graph_dump_by_hand(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "s.pgl"
    spec.write_text("tensor x : f32[4] external\nkernel k aiv (a : inout f32[4])\n"
                    "entry e { manual scope { at a { call k(x) } at b deps(a) { call k(x) } } }\n", encoding="utf-8")
    assert main(["check", str(spec), "--emit", "graph"]) == 0
    assert capsys.readouterr().out == (
        "graph window: 2 instances, 1 edges\n"
        "  %0 a at blocks 1 weight 1 scope#1\n"
        "  %1 b at blocks 1 weight 1 scope#1\n"
        "    <- %0 explicit\n")


def test_dumps_are_identical_across_processes_and_hash_seeds() -> None:
    outs = set()
    for seed in ("0", "1", "4242"):
        run = subprocess.run([sys.executable, "-m", "pgraph", "check", str(HEAD_SPEC), "--emit", "ir"],
                             capture_output=True, text=True, cwd=ROOT, check=True,
                             env={"PYTHONHASHSEED": seed, "PATH": "/usr/bin:/bin", **KEEP_ENV})
        outs.add(run.stdout)
    assert len(outs) == 1
