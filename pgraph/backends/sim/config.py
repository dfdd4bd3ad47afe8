"""The simulator's figures: the checked-in a2a3 TOML (value + source per figure) and its overrides.

`load_config()` reads the cost model's timing table (`pgraph/ir/a2a3_timing.toml`, package data of
`pgraph.ir.cost_model`, shared with `pgraph plan`'s modelled critical path) with `tomllib`, then
applies, in order, any `--timing FILE.toml` files (same layout; a value may be given bare or
as `{ value = ..., source = ... }`) and any `--set SECTION.KEY=VALUE` strings. An unknown key
or a value of the wrong type is a `ConfigError` (the CLI turns it into a usage error, exit 2).
"""

from __future__ import annotations

import math
import tomllib
from importlib import resources
from pathlib import Path
from typing import Any

import attrs

from pgraph import records
from pgraph.source import MAX_TABLE_BYTES, read_input


class ConfigError(Exception):
    """A timing file or `--set` override that names an unknown figure or has a bad value."""


@records.value
@attrs.frozen(repr=False, eq=False)
class Figure:
    """One figure of the TOML: its value and where it comes from (a measurement, a derivation, an assumption)."""

    value: Any
    source: str


def _flatten(data: dict[str, Any], where: str) -> dict[str, Figure]:
    out: dict[str, Figure] = {}
    for section, items in data.items():
        if not isinstance(items, dict):
            raise ConfigError(f"{where}: '{section}' must be a [section] of figures")
        for key, raw in items.items():
            name = f"{section}.{key}"
            if isinstance(raw, dict):
                if "value" not in raw:
                    raise ConfigError(f"{where}: {name} has no 'value'")
                out[name] = Figure(raw["value"], str(raw.get("source", f"override from {where}")))
            else:
                out[name] = Figure(raw, f"override from {where}")
    return out


def _default_figures() -> dict[str, Figure]:
    # the cost model's table (pgraph.ir.cost_model.timing_text reads the same file)
    text = resources.files("pgraph.ir").joinpath("a2a3_timing.toml").read_text(encoding="utf-8")
    return _flatten(tomllib.loads(text), "a2a3_timing.toml")


def _coerce(name: str, old: Any, new: Any) -> Any:
    """`new` converted to the type of the default `old` (int, float, bool or str)."""
    if isinstance(old, bool):
        if isinstance(new, bool):
            return new
        if isinstance(new, str) and new.lower() in ("true", "false", "1", "0"):
            return new.lower() in ("true", "1")
        raise ConfigError(f"{name} expects true or false, got {new!r}")
    if isinstance(old, int):
        try:
            value = int(new) if not isinstance(new, float) else None
        except (TypeError, ValueError):
            value = None
        if value is None:
            raise ConfigError(f"{name} expects an integer, got {new!r}")
        return value
    if isinstance(old, float):
        try:
            return float(new)
        except (TypeError, ValueError):
            raise ConfigError(f"{name} expects a number, got {new!r}") from None
    return str(new)


def _check_value(name: str, value: Any) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"{name} must be a finite number, got {value}")
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value < 0:
        raise ConfigError(f"{name} must not be negative, got {value}")


@records.value
@attrs.frozen(repr=False, eq=False)
class SimConfig:
    """Every figure by `section.key`; typed accessors for the engine.

    Units: microseconds (`*_us`), GB/s (`*_gbps`), TFLOP/s (`cube_tflops`), G element-ops/s
    (`vector_gops`), bytes (`heap`), counts elsewhere.
    """

    figures: dict[str, Figure]

    def __getitem__(self, name: str) -> Any:
        return self.figures[name].value

    def source(self, name: str) -> str:
        """Where figure `name` comes from."""
        return self.figures[name].source

    def with_overrides(self, sets: list[str] | tuple[str, ...] = (), files: list[Path] | tuple[Path, ...] = ()) -> SimConfig:
        """A copy with `--timing` files then `--set NAME=VALUE` strings applied (ConfigError on bad input)."""
        figs = dict(self.figures)
        for path in files:
            try:
                data = tomllib.loads(read_input(path, MAX_TABLE_BYTES).decode("utf-8"))
            except OSError as err:
                raise ConfigError(f"cannot read timing file {path}: {err.strerror or err}") from None
            except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
                raise ConfigError(f"timing file {path} is not valid TOML: {err}") from None
            for name, fig in _flatten(data, str(path)).items():
                if name not in figs:
                    raise ConfigError(f"timing file {path}: unknown figure '{name}' (known: {', '.join(sorted(figs))})")
                value = _coerce(name, figs[name].value, fig.value)
                _check_value(name, value)
                figs[name] = Figure(value, fig.source)
        for text in sets:
            name, sep, raw = text.partition("=")
            name = name.strip()
            if not sep:
                raise ConfigError(f"--set expects SECTION.KEY=VALUE, got '{text}'")
            if name not in figs:
                raise ConfigError(f"--set: unknown figure '{name}' (known: {', '.join(sorted(figs))})")
            value = _coerce(name, figs[name].value, raw.strip())
            _check_value(name, value)
            figs[name] = Figure(value, f"--set {name}={raw.strip()}")
        cfg = SimConfig(figs)
        cfg.validate()
        return cfg

    def validate(self) -> None:
        """Structural limits the engine relies on (ConfigError otherwise)."""
        if self["machine.clusters"] < 1:
            raise ConfigError("machine.clusters must be at least 1")
        if self["machine.scheduler_threads"] < 1:
            raise ConfigError("machine.scheduler_threads must be at least 1")
        if self["ring.task_window"] < 4:
            raise ConfigError("ring.task_window must be at least 4 (simpler: a power of 2, at least 4)")
        if self["cost.hbm_gbps"] <= 0 or self["cost.core_gbps"] <= 0:
            raise ConfigError("cost.hbm_gbps and cost.core_gbps must be positive")
        if self["cost.cube_tflops"] <= 0 or self["cost.vector_gops"] <= 0:
            raise ConfigError("cost.cube_tflops and cost.vector_gops must be positive")
        if self["scheduler.requeue"] not in ("tail", "head"):
            raise ConfigError("scheduler.requeue is 'tail' or 'head'")


def load_config(sets: list[str] | tuple[str, ...] = (), files: list[Path] | tuple[Path, ...] = ()) -> SimConfig:
    """The a2a3 figures with overrides applied."""
    return SimConfig(_default_figures()).with_overrides(sets, files)
