"""The Target interface of the five backends (pgraph/backends/target.py) and the rules it keeps.

- the registry: every target says what it is (emitter or runner) and whether it needs a full
  expansion, and is imported only when asked for (`pgraph check` loads no backend);
- a target that needs a full expansion refuses a windowed plan (InternalError), and the
  commands plan as the target asks (`build --target deps-json` without `--full`);
- `plan --dot`, `build --target dot`, `export --deps-json` and `build --target deps-json` write
  what the registered emitters emit;
- backends read facts: no backend imports another backend's package, and from `pgraph.plan`
  a backend imports only Plan, fact classes and the enums their fields hold (never a planner
  function); the scanner that checks it has tests of its own (planted imports);
- the facts sim reads (EarlyStatus.flagged, FalseSerializations) against values by hand.
"""

from __future__ import annotations

import ast
import contextlib
import enum
import importlib
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from pgraph.backends.target import EMITTERS, RUNNERS, TARGETS, BuildInfo, emitter, runner, target
from pgraph.cli import main
from pgraph.kinds import InternalError, TaskKind
from pgraph.plan.base import Fact, Plan
from pgraph.plan.early_dispatch import EarlyStatus, classify
from pgraph.plan.races import FalseSerializations
from tests.conftest import HEAD_SPEC, KEEP_ENV, ROOT, SPECS, plan_ok

BACKENDS_DIR = ROOT / "pgraph" / "backends"
#: The backends: the top-level part under pgraph.backends of every registered target's module.
BACKENDS = frozenset(module.split(".")[2] for module, _ in TARGETS.values())

#: What each target reads, by hand: a2a3 emits loops as C++ loops and dot draws each loop once
#: (the window is enough); deps.json lists every task, the executor and the simulator run each.
NEEDS_FULL = {"a2a3": False, "dot": False, "deps-json": True, "numpy": True, "sim": True}


def cli(*argv: str) -> tuple[int, str, str]:
    """`pgraph ARGV` in process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


# ---- the registry ---------------------------------------------------------------------------------


def test_the_registry_holds_five_targets_of_two_kinds() -> None:
    assert {"a2a3", "depsjson", "dot", "numpy", "sim"} == BACKENDS
    assert set(EMITTERS) == {"a2a3", "dot", "deps-json"} and set(RUNNERS) == {"numpy", "sim"}
    for name, (_module, description) in TARGETS.items():
        t = target(name)
        assert (t.name, t.description, t.needs_full) == (name, description, NEEDS_FULL[name])
        assert callable(getattr(t, "emit" if name in EMITTERS else "run"))
    assert emitter("dot") is target("dot") and runner("sim") is target("sim")
    with pytest.raises(KeyError, match="no emitter named 'numpy'"):
        emitter("numpy")
    with pytest.raises(KeyError, match="no runner named 'a2a3'"):
        runner("a2a3")


def test_check_and_the_build_options_load_no_backend() -> None:
    """`pgraph check` imports no backend; building `build`'s options reads the registry only."""
    code = (
        "import sys\n"
        "from pgraph.cli import build_parser, main\n"
        f"assert main(['check', {str(HEAD_SPEC)!r}]) == 0\n"
        "after_check = sorted(m for m in sys.modules if m.startswith('pgraph.backends.'))\n"
        "build_parser('build')\n"
        "after_parser = sorted(m for m in sys.modules if m.startswith('pgraph.backends.'))\n"
        "print(after_check, after_parser)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**KEEP_ENV, "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "[] ['pgraph.backends.target']"


# ---- full expansion -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def windowed() -> Plan:
    plan = plan_ok(HEAD_SPEC, layers=2)
    assert not plan.graph.full
    return plan


def test_a_target_that_needs_a_full_expansion_refuses_a_windowed_plan(windowed: Plan) -> None:
    from pgraph.backends.numpy.runner import RunOptions
    from pgraph.backends.sim.config import load_config
    from pgraph.backends.sim.target import SimOptions

    lines: list[str] = []
    with pytest.raises(InternalError, match="the deps-json target needs every loop iteration expanded"):
        emitter("deps-json").emit(windowed, BuildInfo(str(HEAD_SPEC)))
    with pytest.raises(InternalError, match="the numpy target needs every loop iteration expanded"):
        runner("numpy").run(windowed, RunOptions(echo=lines.append))
    with pytest.raises(InternalError, match="the sim target needs every loop iteration expanded"):
        runner("sim").run(windowed, SimOptions(load_config((), ())))
    assert lines == []  # refused before anything ran
    for name in ("a2a3", "dot"):  # the window is enough for these
        assert emitter(name).emit(windowed, BuildInfo(str(HEAD_SPEC)))


def test_build_plans_as_the_target_asks(tmp_path: Path) -> None:
    """`build --target deps-json` without `--full` plans every iteration (the emitter would refuse
    a windowed plan) and writes the bytes `export --deps-json` writes."""
    code, out, _ = cli("build", str(HEAD_SPEC), "--layers", "2", "--target", "deps-json", "-o", str(tmp_path / "b"))
    assert code == 0 and out == f"wrote {tmp_path / 'b' / 'deps.json'}\n"
    code, out, _ = cli("export", str(HEAD_SPEC), "--layers", "2", "--deps-json", str(tmp_path / "e.json"))
    assert code == 0
    built = (tmp_path / "b" / "deps.json").read_bytes()
    assert built == (tmp_path / "e.json").read_bytes()
    # every task of both layers: the window would stand one copy for several (tests/unit/test_depsjson.py
    # counts the tasks per layer by hand)
    assert len(json.loads(built)["tasks"]) == int(out.split(": ")[1].split(" tasks")[0].replace(",", ""))


def test_plan_dot_is_the_dot_emitter(tmp_path: Path, windowed: Plan) -> None:
    code, out, _ = cli("plan", str(HEAD_SPEC), "--layers", "2", "--dot")
    assert code == 0
    assert out == emitter("dot").emit(windowed, BuildInfo(str(HEAD_SPEC)))["decode_fwd_layers.dot"]
    code, _, _ = cli("build", str(HEAD_SPEC), "--layers", "2", "--target", "dot", "-o", str(tmp_path / "d"))
    assert code == 0 and (tmp_path / "d" / "decode_fwd_layers.dot").read_text(encoding="utf-8") == out


def test_export_keeps_allow_include_outside(tmp_path: Path) -> None:
    """`export` plans with the command's options, `--allow-include-outside` included (it used to
    rebuild the options from the overrides only, so the include was refused with PG005)."""
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "pgraph.toml").write_text("", encoding="utf-8")
    (tmp_path / "shared.pgl").write_text("tensor x : f32[16, 64] external\nkernel k aiv (a : inout f32[16, 64])\n",
                                         encoding="utf-8")
    (proj / "main.pgl").write_text('include "../shared.pgl"\nentry e { at a { call k(x) } }\n', encoding="utf-8")
    out = tmp_path / "o.json"
    code, _, err = cli("export", str(proj / "main.pgl"), "--deps-json", str(out))
    assert code == 1 and "PG005" in err
    code, stdout, err = cli("export", str(proj / "main.pgl"), "--deps-json", str(out), "--allow-include-outside")
    assert code == 0, err
    assert stdout == f"wrote {out}: 1 tasks, 1 tensors, 0 edge records\n"  # one `at` task on one tensor


# ---- the facts sim reads --------------------------------------------------------------------------


def test_early_status_says_which_instances_are_flagged() -> None:
    plan = plan_ok(HEAD_SPEC, layers=2, full=True)
    status = plan.get(EarlyStatus)
    instances = plan.graph.instances
    assert len(status.flagged) == len(instances)
    # flagged `early` in the spec (by hand, as tests/unit/test_a2a3.py counts them in the C++)
    assert {i.dispatch for i in instances if i.kind not in (TaskKind.ALLOC, TaskKind.DUMMY) and status.flagged[i.id]} \
        == {"pa_tiling", "x_gamma0", "attn_out_seed", "q_seed", "mlp_out_seed", "rms_recip", "q_proj", "k_proj",
            "v_proj", "fa_fused", "residual_rms_cast", "down_proj", "dcr_xgamma"}
    assert all(status.flagged[i.id] for i in instances if i.kind is TaskKind.ALLOC)  # alloc tasks always
    assert not any(status.flagged[i.id] for i in instances if i.kind is TaskKind.DUMMY)  # dummies never
    # the states are the runtime's rule, instance by instance
    for inst in instances:
        if inst.kind is not TaskKind.ALLOC:
            assert status.status[inst.id] == classify(plan, inst.id), inst.label


def test_false_serializations_name_the_serialised_writers() -> None:
    # HEAD's dcr_xgamma is one spmd grid; the #546 what-if makes it five `parallel` tasks, each
    # writing its slice of the two inout outputs (next_hidden <- layer_out, next_normed)
    assert plan_ok(HEAD_SPEC, layers=2).get(FalseSerializations).dispatches == {}
    serial = plan_ok(SPECS / "variants" / "decode_layer_dcr_serial.pgl", layers=2)
    assert serial.get(FalseSerializations).dispatches == {"dcr_xgamma": (["layer_out", "next_normed"], 2)}


# ---- backends read facts, and no other backend ----------------------------------------------------


def _is_module(name: str) -> bool:
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def imported(module: str, source: str, is_package: bool = False) -> list[tuple[str, str | None, int]]:
    """(module, name or None for the module itself, line) of every pgraph import in `source`, the
    source of `module`: relative imports resolved, `from pkg import mod` read as the module,
    imports inside functions and under `if TYPE_CHECKING:` included."""
    out: list[tuple[str, str | None, int]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out.extend((a.name, None, node.lineno) for a in node.names if a.name.startswith("pgraph"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                pkg = module.split(".") if is_package else module.split(".")[:-1]
                base = pkg[:len(pkg) - (node.level - 1)]
                mod = ".".join([*base, node.module] if node.module else base)
            else:
                mod = node.module or ""
            if not mod.startswith("pgraph"):
                continue
            for a in node.names:
                full = f"{mod}.{a.name}"
                out.append((full, None, node.lineno) if _is_module(full) else (mod, a.name, node.lineno))
    return out


def backend_of(module: str) -> str | None:
    """`pgraph.backends.sim.engine` -> 'sim'; a module shared by backends (target, output, escape,
    report, simpler) or outside pgraph.backends -> None."""
    parts = module.split(".")
    return parts[2] if parts[:2] == ["pgraph", "backends"] and len(parts) > 2 and parts[2] in BACKENDS else None


def _reads_facts_only(mod: str, name: str | None) -> bool:
    """From pgraph.plan: Plan, a fact class, or an enum (the values facts hold); never a module."""
    if name is None:
        return False
    obj = getattr(importlib.import_module(mod), name, None)
    return obj is Plan or (isinstance(obj, type) and issubclass(obj, (Fact, enum.Enum)))


def violations(module: str, source: str, is_package: bool = False) -> list[str]:
    """The imports of backend code that break the rules of docs/architecture.md."""
    here = backend_of(module)
    bad = []
    for mod, name, line in imported(module, source, is_package):
        what = mod if name is None else f"{mod}.{name}"
        there = backend_of(mod)
        if there is not None and there != here:
            bad.append(f"{module}:{line} imports {what}: another backend's package")
        if (mod == "pgraph.plan" or mod.startswith("pgraph.plan.")) and not _reads_facts_only(mod, name):
            bad.append(f"{module}:{line} imports {what}: a backend reads the Plan and its facts, not planner code")
    return bad


def backend_modules() -> list[tuple[str, str, bool]]:
    out = []
    for path in sorted(BACKENDS_DIR.rglob("*.py")):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        out.append((name, path.read_text(encoding="utf-8"), path.name == "__init__.py"))
    return out


def test_backends_import_no_other_backend_and_no_planner_function() -> None:
    bad = [v for name, source, pkg in backend_modules() for v in violations(name, source, pkg)]
    assert not bad, bad


@pytest.mark.parametrize("module, source", [
    ("pgraph.backends.sim.graph_input", "from pgraph.backends.a2a3.kernel_config import FuncIds\n"),
    ("pgraph.backends.sim.graph_input", "from ..a2a3 import kernel_config\n"),
    ("pgraph.backends.depsjson.export", "from pgraph.backends import a2a3\n"),
    ("pgraph.backends.dot", "import pgraph.backends.numpy.runner\n"),
    ("pgraph.backends.simpler", "from pgraph.backends.a2a3.dtypes import DTYPES\n"),  # a shared module
    ("pgraph.backends.a2a3.emitter",
     "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pgraph.backends.sim.records import SimGraph\n"),
    ("pgraph.backends.sim.graph_input", "def f():\n    from pgraph.plan.races import false_serializations\n"),
    ("pgraph.backends.sim.graph_input", "from pgraph.plan.early_dispatch import EarlyState, classify\n"),
    ("pgraph.backends.sim.graph_input", "from pgraph.plan import races\n"),
    ("pgraph.backends.report", "import pgraph.plan.early_dispatch\n"),
    ("pgraph.backends.numpy.runner", "from pgraph.plan.base import Plan, layer_share\n"),
])
def test_the_scanner_finds_a_planted_import(module: str, source: str) -> None:
    assert len(violations(module, source)) == 1, violations(module, source)


def test_the_scanner_accepts_what_a_backend_may_import() -> None:
    source = ("from pgraph.plan.base import Plan\n"
              "from pgraph.plan.early_dispatch import EarlyState, EarlyStatus\n"
              "from pgraph.plan.races import FalseSerializations\n"
              "from pgraph.backends.simpler import FuncIds\n"
              "from pgraph.backends.target import require_full\n"
              "from pgraph.backends.sim import records\n"
              "from .engine import simulate\n"
              "from pgraph.ir.queries import kernel_at\n")
    assert violations("pgraph.backends.sim.target", source) == []
    assert [m for m, _, _ in imported("pgraph.backends.sim.target", source)][-3:] == [
        "pgraph.backends.sim.records", "pgraph.backends.sim.engine", "pgraph.ir.queries"]
