"""The house rules of docs/architecture.md, checked on the code.

- imports go from a later stage to an earlier one only, never back, and form no circle;
- pgraph/pipeline.py is the only module that knows the order of the stages;
- backends consume a Plan: none imports the frontend, lowering, expansion, the pipeline or the CLI;
- typed facts: a pass that reads a fact before it is produced is refused with a clear error;
- every check `build` relies on is a planner check: every corpus spec `check` accepts builds.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

from pgraph import pipeline
from pgraph.backends.target import BuildInfo, target
from pgraph.pipeline import Options, PipelineError, check_order, plan_program
from pgraph.plan.base import FactMissing, Plan
from pgraph.plan.critical_path import CriticalPathPass
from pgraph.plan.early_dispatch import EarlyDispatchPass
from pgraph.plan.reach import Reach
from tests.conftest import HEAD_SPEC, ROOT
from tests.unit.test_diagnostics import corpus_files, spec_options

PKG = ROOT / "pgraph"

#: The stage of each top-level part of the package, in pipeline order (docs/architecture.md).
STAGE = {"core": 0, "frontend": 1, "ir": 2, "lower": 3, "expand": 3, "plan": 4, "backends": 5,
         "pipeline": 6, "dump": 7, "explain": 7, "commands": 7, "cli": 8, "__main__": 9}
CORE = {"source", "diagnostics", "expr", "kinds", "suggest", "fastpath", "__init__"}
#: What each part may import besides itself and the core.
ALLOWED = {
    "frontend": set(), "ir": set(), "lower": {"frontend", "ir"}, "expand": {"ir"},
    "plan": {"ir", "expand"}, "backends": {"ir", "plan"},
}


def part(module: str) -> str:
    """`pgraph.plan.races` -> 'plan'; `pgraph.expr` -> 'core'."""
    parts = module.split(".")
    if len(parts) == 1:
        return "core"
    head = parts[1]
    return "core" if head in CORE else head


def imports() -> dict[str, set[str]]:
    """Module -> the pgraph modules it imports (TYPE_CHECKING-only imports excluded)."""
    out: dict[str, set[str]] = {}
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("")
        name = ".".join(rel.parts).removesuffix(".__init__")
        tree = ast.parse(path.read_text(encoding="utf-8"))
        typing_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                       and "TYPE_CHECKING" in ast.unparse(node.test) for n in ast.walk(node)}
        deps: set[str] = set()
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            if isinstance(node, ast.ImportFrom):
                if node.level:  # relative: from the module's package, one level up per extra dot
                    pkg = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
                    base = pkg[:len(pkg) - (node.level - 1)]
                    mod = ".".join([*base, node.module] if node.module else base)
                else:
                    mod = node.module or ""
                if mod.startswith("pgraph"):
                    deps.add(mod)
            elif isinstance(node, ast.Import):
                deps.update(a.name for a in node.names if a.name.startswith("pgraph"))
        out[name] = deps
    return out


def test_imports_go_back_in_the_pipeline_only() -> None:
    bad = []
    for mod, deps in imports().items():
        here = part(mod)
        for dep in deps:
            there = part(dep)
            if there in ("core", here):
                continue
            ok = there in ALLOWED[here] if here in ALLOWED else STAGE.get(there, 99) < STAGE.get(here, 99)
            if not ok:
                bad.append(f"{mod} imports {dep}")
    assert not bad, bad


def test_no_import_circle_between_modules() -> None:
    g = nx.DiGraph()
    graph = imports()
    for mod, deps in graph.items():
        for dep in deps:
            target_mod = dep if dep in graph else dep.rsplit(".", 1)[0]
            if target_mod in graph and target_mod != mod and not mod.startswith(target_mod + "."):
                g.add_edge(mod, target_mod)
    cycles = list(nx.simple_cycles(g))
    assert not cycles, cycles[:3]


def test_only_the_pipeline_knows_the_stage_order() -> None:
    """Only pgraph.pipeline drives the stages: it alone imports the lowering entry point, the
    expander, the form checks and the pass classes together."""
    drivers = {"pgraph.lower.lowerer", "pgraph.expand.expander", "pgraph.lower.forms"}
    for mod, deps in imports().items():
        if mod == "pgraph.pipeline" or part(mod) in ("lower", "expand", "frontend", "plan"):
            continue
        assert not deps & drivers, f"{mod} imports {sorted(deps & drivers)}: only pgraph.pipeline runs stages"


def test_backends_consume_a_plan() -> None:
    for mod, deps in imports().items():
        if part(mod) != "backends":
            continue
        for dep in deps:
            assert part(dep) not in ("frontend", "lower", "expand", "pipeline", "cli", "commands", "dump"), \
                f"{mod} imports {dep}"


def test_a_pass_reading_a_fact_before_it_is_produced_is_refused() -> None:
    passes = list(pipeline.PASSES)
    i, j = passes.index(next(p for p in passes if isinstance(p, EarlyDispatchPass))), \
        passes.index(next(p for p in passes if isinstance(p, CriticalPathPass)))
    passes[i], passes[j] = passes[j], passes[i]
    with pytest.raises(PipelineError, match=r"pass 'critical-path' requires EarlyStatus, which no earlier pass "
                                            r"produces \('early-dispatch' produces it later\)"):
        check_order(tuple(passes))
    check_order(pipeline.PASSES)  # the real order is accepted


def test_reading_a_missing_fact_at_run_time_names_it() -> None:
    plan, _ = plan_program(HEAD_SPEC, Options(layers=1))
    assert plan is not None
    bare = Plan(plan.program, plan.graph, plan.bag)
    with pytest.raises(FactMissing, match="Reach"):   # the first fact the pass reads
        CriticalPathPass().run(bare)
    bare.put(plan.get(Reach))
    with pytest.raises(FactMissing, match="EarlyStatus"):
        CriticalPathPass().run(bare)


@pytest.mark.parametrize("spec", corpus_files(), ids=lambda p: p.stem)
def test_every_spec_check_accepts_builds(spec: Path) -> None:
    """A check `build` needs is the planner's: whatever `check` accepts, every target emits."""
    opts, _ = spec_options(spec)
    plan, bag = plan_program(spec, opts)
    if plan is None or bag.has_errors:
        return
    for name in ("a2a3", "dot"):
        files = target(name).emit(plan, BuildInfo(str(spec)))
        assert files and all(isinstance(t, str) and t for t in files.values())
