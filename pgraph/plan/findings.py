"""The planner's reports of what earlier stages met of its rules (`pgraph.findings`): each
reporter sits in the file of its rule family, beside the check of the resolved Program."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pgraph import findings as f
from pgraph.diagnostics import DiagnosticBag
from pgraph.plan import declarations, kernels, regions, waves

#: The finding classes whose rules the planner owns, and its reporter of each.
REPORTERS: dict[type, Callable[[Any, DiagnosticBag], None]] = {
    f.LiteralTooLarge: declarations.literal_too_large,    # PG018
    f.ConstantCycle: declarations.constant_cycle,         # PG018
    f.ConstantChain: declarations.constant_chain,         # PG018
    f.Unevaluable: declarations.unevaluable,              # PG018
    f.NotConstant: declarations.not_constant,             # PG018
    f.AtIndexSpace: regions.at_index_space,               # PG020
    f.MissingIndexSpace: regions.missing_index_space,     # PG020
    f.NoWave: waves.no_wave,                              # PG021
    f.TableNeedsIndex: kernels.table_needs_index,         # PG039
    f.BlockKernelIndex: kernels.block_kernel_index,       # PG039
    f.KernelTakesNoIndex: kernels.kernel_takes_no_index,  # PG039
}
