"""The house rules of docs/architecture.md, checked on the code.

- imports go from a later stage to an earlier one only, never back, and form no circle
  (`from pgraph import pipeline` is an import of pgraph.pipeline; type-only imports count);
- pgraph/pipeline.py is the only module that knows the order of the stages;
- backends consume a Plan: none imports the frontend, lowering, expansion, the pipeline or the CLI;
- typed facts: a pass that reads a fact before it is produced is refused with a clear error;
- every check `build` relies on is a planner check: every corpus spec `check` accepts builds.
"""

from __future__ import annotations

import ast
import functools
import textwrap
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
CORE = {"source", "diagnostics", "expr", "kinds", "suggest", "fastpath", "records", "findings", "interrupts",
        "__init__"}
#: What each part may import besides itself and the core.
ALLOWED = {
    "frontend": set(), "ir": set(), "lower": {"frontend", "ir"}, "expand": {"ir"},
    "plan": {"ir", "expand"}, "backends": {"ir", "plan"},
}
#: Import circles known and being removed on another branch, each as the set of its modules
#: (test_pending_circles_still_exist says when one is gone). None today.
PENDING_CIRCLES: list[frozenset[str]] = []

#: module -> (its source text, whether it is a package's __init__)
Sources = dict[str, tuple[str, bool]]
#: module -> {imported pgraph module: True when every import of it is type-only}
Graph = dict[str, dict[str, bool]]


def part(module: str) -> str:
    """`pgraph.plan.races` -> 'plan'; `pgraph.expr` -> 'core'."""
    parts = module.split(".")
    if len(parts) == 1:
        return "core"
    head = parts[1]
    return "core" if head in CORE else head


def package_sources(root: Path = PKG) -> Sources:
    """Every module of the package under `root` (named from its parent folder) and its text."""
    out: Sources = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent).with_suffix("")
        out[".".join(rel.parts).removesuffix(".__init__")] = (path.read_text(encoding="utf-8"), path.name == "__init__.py")
    return out


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def module_imports(name: str, source: str, is_package: bool, modules: set[str] | Sources) -> dict[str, bool]:
    """The pgraph modules `name` imports, each with whether only `if TYPE_CHECKING:` blocks do.

    `from pkg import x` is an import of the module `pkg.x` when that is one of `modules` (a
    submodule), else of `pkg` (a name defined there): `from pgraph import pipeline` imports
    pgraph.pipeline, not the package root. Imports inside functions count like any other."""
    tree = ast.parse(source)
    typing_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and _type_checking(node.test)
                   for stmt in node.body for n in ast.walk(stmt)}
    deps: dict[str, bool] = {}

    def found(mod: str, node: ast.AST) -> None:
        if mod == "pgraph" or mod.startswith("pgraph."):
            deps[mod] = deps.get(mod, True) and id(node) in typing_only

    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from the module's package, one level up per extra dot
                pkg = name.split(".") if is_package else name.split(".")[:-1]
                base = pkg[:len(pkg) - (node.level - 1)]
                mod = ".".join([*base, node.module] if node.module else base)
            else:
                mod = node.module or ""
            for alias in node.names:
                sub = f"{mod}.{alias.name}"
                found(sub if sub in modules else mod, node)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                found(alias.name, node)
    return deps


def import_graph(sources: Sources) -> Graph:
    """Module -> the pgraph modules it imports (type-only imports included, and marked)."""
    return {name: module_imports(name, text, is_pkg, sources) for name, (text, is_pkg) in sources.items()}


@functools.cache
def imports() -> Graph:
    """The import graph of the package (read once per test session; callers do not change it)."""
    return import_graph(package_sources())


def layer_violations(graph: Graph) -> list[str]:
    """Imports from a stage to a later one (or to one its row of ALLOWED leaves out). Type-only
    imports count: an annotation naming a later stage's type is knowledge of that stage, which
    the order forbids as much as a call does (and being only in annotations is how it slips in)."""
    bad = []
    for mod, deps in graph.items():
        here = part(mod)
        for dep in deps:
            there = part(dep)
            if there in ("core", here):
                continue
            ok = there in ALLOWED[here] if here in ALLOWED else STAGE.get(there, 99) < STAGE.get(here, 99)
            if not ok:
                bad.append(f"{mod} imports {dep}")
    return sorted(bad)


def circles(graph: Graph) -> list[list[str]]:
    """Every import circle between modules, type-only imports included (a module importing its
    own package's __init__ is not one)."""
    g = nx.DiGraph()
    for mod, deps in graph.items():
        for dep in deps:
            if dep in graph and dep != mod and not mod.startswith(dep + "."):
                g.add_edge(mod, dep)
    return sorted(sorted(c) for c in nx.simple_cycles(g))


def backend_violations(graph: Graph) -> list[str]:
    """Backend imports of the frontend, lowering, expansion, the pipeline, the commands or the CLI."""
    return sorted(f"{mod} imports {dep}" for mod, deps in graph.items() if part(mod) == "backends"
                  for dep in deps if part(dep) in ("frontend", "lower", "expand", "pipeline", "cli", "commands", "dump"))


def test_imports_go_back_in_the_pipeline_only() -> None:
    bad = layer_violations(imports())
    assert not bad, bad


def test_no_import_circle_between_modules() -> None:
    found = [c for c in circles(imports()) if frozenset(c) not in PENDING_CIRCLES]
    assert not found, found[:3]


def test_pending_circles_still_exist() -> None:
    """An entry of PENDING_CIRCLES whose circle is gone is removed from the list."""
    now = {frozenset(c) for c in circles(imports())}
    assert all(c in now for c in PENDING_CIRCLES), [sorted(c) for c in PENDING_CIRCLES if c not in now]


# ---- the scanner's own tests: planted sources the checks above must refuse ----

def _planted(**modules: str) -> Graph:
    """The real package's graph with the modules given (`pgraph__backends__fake="..."`) added or replaced."""
    graph = dict(imports())
    names = {key.replace("__", "."): textwrap.dedent(text) for key, text in modules.items()}
    known = set(graph) | set(names)
    graph.update({name: module_imports(name, text, False, known) for name, text in names.items()})
    return graph


def test_scanner_resolves_from_package_import_module() -> None:
    deps = module_imports("pgraph.backends.fake", "from pgraph import pipeline, records\nfrom pgraph.plan import base\n"
                          "from pgraph.ir.program import Program\n", False, set(imports()))
    assert deps == {"pgraph.pipeline": False, "pgraph.records": False, "pgraph.plan.base": False,
                    "pgraph.ir.program": False}
    assert module_imports("pgraph.plan.x", "from pgraph import __version__\n", False, set(imports())) == \
        {"pgraph": False}  # a name of the package root, not a module


def test_a_backend_importing_the_pipeline_through_the_root_is_refused() -> None:
    graph = _planted(pgraph__backends__fake="from pgraph import pipeline\n")
    assert "pgraph.backends.fake imports pgraph.pipeline" in layer_violations(graph)
    assert "pgraph.backends.fake imports pgraph.pipeline" in backend_violations(graph)
    lazy = _planted(pgraph__backends__fake="def f():\n    from pgraph import pipeline\n    return pipeline\n")
    assert "pgraph.backends.fake imports pgraph.pipeline" in backend_violations(lazy)


def test_a_type_only_import_is_seen_by_every_check() -> None:
    graph = _planted(pgraph__backends__fake="""
        from typing import TYPE_CHECKING
        if TYPE_CHECKING:
            from pgraph.pipeline import Options
        else:
            from pgraph.plan import base
        """)
    assert graph["pgraph.backends.fake"] == {"pgraph.pipeline": True, "pgraph.plan.base": False}
    assert "pgraph.backends.fake imports pgraph.pipeline" in layer_violations(graph)
    assert "pgraph.backends.fake imports pgraph.pipeline" in backend_violations(graph)


def test_a_type_only_circle_is_refused() -> None:
    graph = _planted(pgraph__plan__fake_a="""
        from __future__ import annotations
        import typing
        if typing.TYPE_CHECKING:
            from pgraph.plan.fake_b import B
        def use(b: B) -> None: ...
        """, pgraph__plan__fake_b="from pgraph.plan import fake_a\nclass B: ...\n")
    found = [c for c in circles(graph) if frozenset(c) not in PENDING_CIRCLES]
    assert found == [["pgraph.plan.fake_a", "pgraph.plan.fake_b"]]
    assert not layer_violations(graph)  # (one stage: only the circle check can see it)


def test_only_the_pipeline_knows_the_stage_order() -> None:
    """Only pgraph.pipeline drives the stages: it alone imports the lowering entry point, the
    expander, the form checks and the pass classes together."""
    drivers = {"pgraph.lower.lowerer", "pgraph.expand.expander", "pgraph.lower.forms"}
    for mod, deps in imports().items():
        if mod == "pgraph.pipeline" or part(mod) in ("lower", "expand", "frontend", "plan"):
            continue
        assert not deps.keys() & drivers, f"{mod} imports {sorted(deps.keys() & drivers)}: only pgraph.pipeline runs stages"


def test_backends_consume_a_plan() -> None:
    bad = backend_violations(imports())
    assert not bad, bad


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
