"""The Target interface of build backends, and the registry the CLI reads.

A target turns a Plan without errors into files: `emit(plan, info) -> {relative path: text}`.
It never re-checks legality (the planner proved it), never re-plans or re-expands, and
never writes: `pgraph.backends.output` does, atomically. Targets register by name; the
registry imports a backend only when it is asked for, so `pgraph check` loads none.
"""

from __future__ import annotations

import importlib
from typing import Protocol

import attrs

from pgraph import records
from pgraph.plan.base import Plan


@records.value
@attrs.frozen(repr=False, eq=False)
class BuildInfo:
    """What a target may say about the build in its headers: the spec as displayed, the overrides."""

    spec: str
    overrides: str = ""


class Target(Protocol):
    """A build backend: a name, a one-line description, and `emit`."""

    name: str
    description: str

    def emit(self, plan: Plan, info: BuildInfo) -> dict[str, str]:
        """The output files of `plan` (relative path -> text), byte-for-byte deterministic."""
        ...


#: Registered targets: name -> (module, attribute of the Target instance, description).
TARGETS: dict[str, tuple[str, str, str]] = {
    "a2a3": ("pgraph.backends.a2a3", "TARGET",
             "orchestration C++ and kernel_config.py for simpler's tensormap_and_ringbuffer runtime"),
    "dot": ("pgraph.backends.dot", "TARGET", "the Graphviz picture of the plan (<entry>.dot)"),
}


def target(name: str) -> Target:
    """The registered target `name` (KeyError for an unknown one)."""
    module, attr, _ = TARGETS[name]
    return getattr(importlib.import_module(module), attr)  # type: ignore[no-any-return]
