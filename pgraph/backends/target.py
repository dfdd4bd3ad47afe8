"""The one interface of pgraph's five backends, and the registry the commands read.

A target consumes a Plan without errors. There are two kinds:

- an **emitter** turns it into files: `emit(plan, info) -> {relative path: text}`, byte-for-byte
  deterministic (a2a3: `pgraph build --target a2a3`; dot: `pgraph plan --dot` and `build
  --target dot`; deps-json: `pgraph export --deps-json` and `build --target deps-json`);
- a **runner** executes or simulates it: `run(plan, options) -> result`, where the options and
  the result are the runner's own classes, which the command fills from its arguments and
  renders (numpy: `pgraph run`; sim: `pgraph sim`).

An emitter with options of its own holds them as a field of its instance, a class of the
backend that the command fills (dot: `DotView`, from `--focus`, `--depth`, `--collapse`): the
command evolves the registered TARGET (`attrs.evolve(TARGET, view=...)`), so `emit` keeps one
signature for every emitter.

Every target states `needs_full`: True when it reads every loop iteration (deps.json lists
every task; the executor and the simulator run each task once), False when the window
expansion's two iterations per loop are enough. The command asks the target before it plans
(`plan_full`: the expansion is full when the target needs it, whatever `--full` says), and a
target that needs a full expansion raises InternalError when it is handed a windowed plan
anyway (`require_full`: a bug of the command, not of the spec).

A target never re-checks legality (the planner proved it; a check a target needs is a
planner check), never re-plans or re-expands, reads the Plan and its facts (`plan.get`),
never a planner function, and never writes: `pgraph.backends.output` does, atomically. A
target that cannot take its options for this plan (a batch the spec cannot take, a run over
the memory limit, a picture focused on a task the plan does not have) raises `TargetRefused`,
which the command reports as a usage error.

Targets register by name in `EMITTERS` and `RUNNERS` (module and description); the registry
imports a backend only when it is asked for, so `pgraph check` loads none.
"""

from __future__ import annotations

import importlib
from typing import Any, Protocol, TypeVar

import attrs

from pgraph import records
from pgraph.kinds import InternalError
from pgraph.plan.base import Plan


@records.value
@attrs.frozen(repr=False, eq=False)
class BuildInfo:
    """What an emitter may say about the build in its headers: the spec as displayed, the overrides."""

    spec: str
    overrides: str = ""


class Target(Protocol):
    """A backend: a name, a one-line description, and whether it needs a full expansion."""

    @property
    def name(self) -> str:
        """The registered name (`pgraph build --target NAME`)."""
        ...

    @property
    def description(self) -> str:
        """One line for the help texts (the registry's description)."""
        ...

    @property
    def needs_full(self) -> bool:
        """True when the target reads every loop iteration: the command plans with `full=True`."""
        ...


class Emitter(Target, Protocol):
    """A target that writes files: `emit`."""

    def emit(self, plan: Plan, info: BuildInfo) -> dict[str, str]:
        """The output files of `plan` (relative path -> text), byte-for-byte deterministic."""
        ...


O_contra = TypeVar("O_contra", contravariant=True)
R_co = TypeVar("R_co", covariant=True)


class Runner(Target, Protocol[O_contra, R_co]):
    """A target that executes or simulates the plan: `run`, with options and a result of its own."""

    def run(self, plan: Plan, options: O_contra) -> R_co:
        """Run `plan` under `options`; the command renders the result (TargetRefused for options
        this plan cannot take)."""
        ...


class TargetRefused(Exception):
    """A target cannot take these options for this plan; the message says why and what to do
    instead. The command reports it as a usage error (exit 2)."""


#: Registered emitters: name -> (module holding the `TARGET` instance, description).
EMITTERS: dict[str, tuple[str, str]] = {
    "a2a3": ("pgraph.backends.a2a3",
             "orchestration C++ and kernel_config.py for simpler's tensormap_and_ringbuffer runtime"),
    "deps-json": ("pgraph.backends.depsjson.export",
                  "simpler's deps.json of the planned instance graph, every task (deps.json)"),
    "dot": ("pgraph.backends.dot", "the Graphviz picture of the plan (<entry>.dot)"),
}

#: Registered runners: name -> (module holding the `TARGET` instance, description).
RUNNERS: dict[str, tuple[str, str]] = {
    "numpy": ("pgraph.backends.numpy.runner",
              "execute the task graph with NumPy kernels and check it against the dense reference (`pgraph run`)"),
    "sim": ("pgraph.backends.sim.target",
            "simulate the simpler scheduler on a2a3: makespan, critical path, waits (`pgraph sim`)"),
}

#: Every registered target (emitters and runners): name -> (module, description).
TARGETS: dict[str, tuple[str, str]] = {**EMITTERS, **RUNNERS}


def _load(name: str, table: dict[str, tuple[str, str]], kind: str) -> Any:
    if name not in table:
        raise KeyError(f"no {kind} named {name!r} (registered: {', '.join(sorted(table))})")
    return importlib.import_module(table[name][0]).TARGET


def target(name: str) -> Target:
    """The registered target `name`, emitter or runner (KeyError for an unknown one)."""
    return _load(name, TARGETS, "target")  # type: ignore[no-any-return]


def emitter(name: str) -> Emitter:
    """The registered emitter `name` (KeyError for an unknown one or a runner)."""
    return _load(name, EMITTERS, "emitter")  # type: ignore[no-any-return]


def runner(name: str) -> Runner[Any, Any]:
    """The registered runner `name` (KeyError for an unknown one or an emitter)."""
    return _load(name, RUNNERS, "runner")  # type: ignore[no-any-return]


def plan_full(t: Target, full: bool) -> bool:
    """Whether the command plans `t`'s input with a full expansion: when `t` needs one, or when
    the user asked for it (`full`, the `--full` flag)."""
    return full or t.needs_full


def require_full(t: Target, plan: Plan) -> None:
    """InternalError when `t` needs a full expansion and `plan` was expanded by the window (the
    command did not plan it with `plan_full`)."""
    if t.needs_full and not plan.graph.full:
        raise InternalError(f"the {t.name} target needs every loop iteration expanded and was handed a windowed "
                            "plan (plan it with full=True: pgraph.backends.target.plan_full)")
