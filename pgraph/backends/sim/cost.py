"""Kernel cost model: a per-block roofline from declared bytes and FLOPs, or a fixed duration.

The rules are `pgraph.ir.cost_model`'s (shared with `pgraph plan`'s modelled critical path);
this module holds them per task of one simulation, with the HBM sharing left to the engine.

A block of task t, once started, must (a) move `bytes_per_block` through HBM and (b) do its
compute: `flops_per_block / (cube_tflops * 1e6)` µs on a cube core, or
`vector_ops_per_block / (vector_gops * 1e3)` µs on a vector core. It ends when both are done:
max(memory done, start + compute). Memory is not a fixed time: every streaming block shares
the HBM bandwidth (`cost.hbm_gbps`) max-min fairly with the others, each capped at
`cost.core_gbps` per core it occupies (a MIX block occupies 3). That sharing is done by the
engine (`pgraph.backends.sim.engine.Hbm`); this module only says what each block needs.

A fixed duration replaces the roofline when the spec has a `cost` line for the kernel (or a
changed shape default), and a calibration file (`--calibration`, written by
`pgraph sim --calibrate`) overrides both, per kernel.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import attrs

from pgraph import records
from pgraph.source import MAX_TABLE_BYTES, read_input

from .config import ConfigError, SimConfig
from .records import Shape, TaskRecord

#: Cores one block occupies, by shape (MIX: 1 AIC + 2 AIV of one cluster; simpler §3.4).
CORES_PER_BLOCK = {Shape.AIC: 1, Shape.AIV: 1, Shape.MIX: 3}


@records.value
@attrs.frozen(repr=False, eq=False)
class BlockCost:
    """What one block of a task needs: HBM bytes, a compute floor, a bandwidth cap (or a fixed duration).

    Units: `bytes` in bytes; `compute_us` and `fixed_us` in µs; `cap_bytes_per_us` in bytes/µs.
    With `fixed_us` set the block simply runs that long (no HBM sharing).
    """

    bytes: float
    compute_us: float
    cap_bytes_per_us: float
    fixed_us: float | None
    source: str


def load_calibration(path: str | Path) -> dict[str, float]:
    """Per-kernel µs per block from a calibration TOML (`[kernels] NAME = { us = ..., ... }` or `NAME = us`)."""
    try:
        data = tomllib.loads(read_input(path, MAX_TABLE_BYTES).decode("utf-8"))
    except OSError as err:
        raise ConfigError(f"cannot read calibration file {path}: {err.strerror or err}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise ConfigError(f"calibration file {path} is not valid TOML: {err}") from None
    kernels = data.get("kernels")
    if not isinstance(kernels, dict):
        raise ConfigError(f"calibration file {path} has no [kernels] table")
    out: dict[str, float] = {}
    for name, row in kernels.items():
        value = row.get("us") if isinstance(row, dict) else row
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
            raise ConfigError(f"calibration file {path}: kernel '{name}' needs a non-negative `us`")
        out[str(name)] = float(value)
    return out


class CostModel:
    """Per-block costs of the tasks of one graph under one configuration and calibration."""

    def __init__(self, cfg: SimConfig, calibration: dict[str, float] | None = None) -> None:
        self.cfg = cfg
        self.calibration = calibration or {}
        self.hbm = cfg["cost.hbm_gbps"] * 1e3        # GB/s -> bytes per µs
        self.core_bw = cfg["cost.core_gbps"] * 1e3
        self.cube = cfg["cost.cube_tflops"] * 1e6    # TFLOP/s -> FLOP per µs
        self.vector = cfg["cost.vector_gops"] * 1e3  # G op/s -> op per µs
        self.figures = {k: f.value for k, f in cfg.figures.items()}
        from pgraph.ir import cost_model  # the shared rules

        self.rules = cost_model

    def block(self, t: TaskRecord) -> BlockCost:
        """The cost of one block of `t` (a core task)."""
        cores = CORES_PER_BLOCK.get(t.shape, 1)
        if t.kernel is not None and t.kernel in self.calibration:
            return BlockCost(0.0, 0.0, 0.0, self.calibration[t.kernel], f"calibration ({t.kernel})")
        if t.fixed_us is not None:
            return BlockCost(0.0, 0.0, 0.0, t.fixed_us, t.cost_source)
        work = self.rules.BlockWork(t.bytes_per_block, t.flops_per_block, t.vector_ops_per_block,
                                    t.weight_bytes_per_block)
        return BlockCost(t.bytes_per_block, self.rules.compute_us(work, self.figures), cores * self.core_bw, None,
                         "roofline")

    def alone_us(self, t: TaskRecord) -> float:
        """Duration of one block running with no other block streaming (µs)."""
        c = self.block(t)
        if c.fixed_us is not None:
            return c.fixed_us
        rate = min(c.cap_bytes_per_us, self.hbm)
        return max(c.bytes / rate if c.bytes else 0.0, c.compute_us)
