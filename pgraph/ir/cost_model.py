"""The one cost model of a task on a2a3, shared by `pgraph plan`'s modelled critical path and `pgraph sim`.

Data: `a2a3_timing.toml` (package data beside this module: every machine, scheduler and kernel
figure with its source) and `a2a3_variants.toml` (the documented variants of those figures: the
ends of the measured ranges, the latency bounds, the alternative readings and the assumptions).

What one block of a task costs (µs), in order of precedence:

1. a calibration (`pgraph sim --calibration`, per kernel; the simulator applies it);
2. a fixed duration: a `cost KERNEL = N` line of the spec, or a shape line `cost aic|aiv|mix = N`
   whose value differs from the planner's default table (`pgraph.ir.limits.DEFAULT_COSTS`);
3. the roofline of the block's declared work (`block_work`): its HBM bytes at the per-core
   bandwidth cap (`cost.core_gbps` per core it occupies, at most `cost.hbm_gbps`), and its FLOPs
   at `cost.cube_tflops` (AIC) or its vector elements at `cost.vector_gops` (AIV), whichever is
   longer. Run alone: the simulator then shares HBM among the blocks streaming at once.

What a task costs on a path with nothing else running (`task_us`): its waves
(ceil(blocks / units of its shape)) times the block cost, plus the scheduling of one hop
(`hop_us`): the dispatch claim, the doorbell and the core's setup before it runs, the FIN
latency and the completion after it. The simulator charges the same figures event by event,
with polling, contention and early dispatch on top; the planner's longest path under
`task_us` is the path the simulator's would be without them.
"""

from __future__ import annotations

import math
import tomllib
from collections import defaultdict
from importlib import resources
from typing import Any

import attrs

from pgraph import records
from pgraph.ir import program as ir
from pgraph.ir.instances import BlockAccesses, Instance, InstanceGraph
from pgraph.ir.limits import DEFAULT_COSTS
from pgraph.ir.queries import instance_env, kernel_at
from pgraph.kinds import AccessKind, Core, TaskKind

#: Cores one block of each kernel shape occupies (MIX: 1 AIC + 2 AIV of one cluster).
CORES_PER_BLOCK = {Core.AIC: 1, Core.AIV: 1, Core.MIX: 3}


def timing_text() -> str:
    """The text of `a2a3_timing.toml`."""
    return resources.files("pgraph.ir").joinpath("a2a3_timing.toml").read_text(encoding="utf-8")


def variants_text() -> str:
    """The text of `a2a3_variants.toml`."""
    return resources.files("pgraph.ir").joinpath("a2a3_variants.toml").read_text(encoding="utf-8")


def default_figures() -> dict[str, Any]:
    """Every figure of `a2a3_timing.toml` by `section.key`: its value (the sources stay in the file)."""
    data = tomllib.loads(timing_text())
    return {f"{sec}.{key}": (raw["value"] if isinstance(raw, dict) else raw)
            for sec, items in data.items() for key, raw in items.items()}


@records.value
@attrs.frozen(repr=False, eq=False)
class BlockWork:
    """The declared work of one block: HBM bytes, cube FLOPs, vector elements, matmul weight bytes."""

    bytes: float
    flops: float
    vector_ops: float
    weight_bytes: float


def matmul(p: ir.Program, block: BlockAccesses) -> tuple[float, float] | None:
    """(FLOPs, weight bytes) of one block reading x[M,K] and w[K,N] into [M,N], else None."""
    def extent(box: tuple[tuple[int, int], ...]) -> tuple[int, ...]:
        return tuple(hi - lo for lo, hi in box)

    reads = [(t, extent(box)) for t, _k, box, _i in block[AccessKind.READ] if len(box) == 2]
    outs = {extent(box) for kind in (AccessKind.WRITE, AccessKind.ATOMIC) for _t, _k, box, _i in block[kind]
            if len(box) == 2}
    for xi, (_xt, (m, k)) in enumerate(reads):
        for wi, (wt, (k2, n)) in enumerate(reads):
            if wi != xi and k2 == k and (m, n) in outs:
                return 2.0 * m * n * k, float(k * n * ir.DTYPE_BYTES[p.tensors[wt].dtype])
    return None


def _scatter_rows(p: ir.Program, d: ir.Dispatch, tname: str) -> int | None:
    """Rows an indirect write to `tname` can reach: the smallest index tensor's element count."""
    counts = []
    for acc in d.accesses:
        if acc.region.tensor == tname and acc.region.indirect:
            counts += [p.tensors[n].numel for n in acc.region.indirect if n in p.tensors]
    return min(counts) if counts else None


def block_work(p: ir.Program, g: InstanceGraph, inst: Instance, kernel: ir.Kernel | None,
               matmuls: dict[str, tuple[float, float] | None] | None = None) -> BlockWork:
    """The mean declared work of one block of `inst`.

    Bytes: box volume x dtype size of each declared region; a box that several blocks of the task
    declare (a whole-tensor argument of every block) is shared among them; an indirect read is its
    whole bounding box, an indirect write at most one row per entry of its smallest index tensor.
    FLOPs: 2*M*N*K for an AIC task whose first block reads [M, K] and [K, N] into [M, N]. Vector
    elements: those an AIV kernel's block touches. `matmuls`, when given, memoises the matmul
    shape per dispatch (every instance of a dispatch has the tile of its first one).
    """
    blocks = g.blocks.get(inst.id) or []
    if not blocks:
        return BlockWork(0.0, 0.0, 0.0, 0.0)
    d = p.dispatch(inst.dispatch)
    uses: dict[tuple[object, ...], int] = defaultdict(int)
    per_block: list[list[tuple[tuple[object, ...], float, float]]] = []
    for blk in blocks:
        seen: dict[tuple[object, ...], tuple[float, float]] = {}
        for kind, items in blk.items():
            for tname, key, box, indirect in items:
                t = p.tensors[tname]
                elems = float(math.prod(hi - lo for lo, hi in box))
                cls = "read" if kind == "read" else "write"
                if indirect and cls == "write":
                    rows = _scatter_rows(p, d, tname)
                    row = float(math.prod(hi - lo for lo, hi in box[1:]))
                    if rows is not None:
                        elems = min(elems, rows * row)
                seen[(key, tname, box, cls)] = (elems * ir.DTYPE_BYTES[t.dtype], elems)
        per_block.append([(ident, nb, el) for ident, (nb, el) in seen.items()])
        for ident in seen:
            uses[ident] += 1
    n = len(blocks)
    nbytes = sum(nb / uses[ident] for blk in per_block for ident, nb, _ in blk) / n
    elems = sum(el / uses[ident] for blk in per_block for ident, _, el in blk) / n
    flops = wbytes = 0.0
    if kernel is not None and kernel.core is Core.AIC:
        if matmuls is None:
            mm = matmul(p, blocks[0])
        else:
            if inst.dispatch not in matmuls:
                matmuls[inst.dispatch] = matmul(p, blocks[0])
            mm = matmuls[inst.dispatch]
        if mm is not None:
            flops, wbytes = mm
    return BlockWork(nbytes, flops, elems if kernel is not None and kernel.core is Core.AIV else 0.0, wbytes)


def fixed_block_us(p: ir.Program, kernel: ir.Kernel | None) -> tuple[float | None, str]:
    """(µs per block, source) from the spec's `cost` lines, or (None, "roofline")."""
    if kernel is None:
        return None, "roofline"
    costs = p.costs
    if kernel.name in costs:
        return float(costs[kernel.name]), f"cost {kernel.name} = {costs[kernel.name]} (spec)"
    if kernel.core in costs and costs[kernel.core] != DEFAULT_COSTS.get(kernel.core):
        return float(costs[kernel.core]), f"cost {kernel.core} = {costs[kernel.core]} (spec)"
    return None, "roofline"


def compute_us(work: BlockWork, fig: dict[str, Any]) -> float:
    """The compute floor of one block (µs): FLOPs at the cube rate plus vector elements at the vector rate."""
    return work.flops / (fig["cost.cube_tflops"] * 1e6) + work.vector_ops / (fig["cost.vector_gops"] * 1e3)


def cap_bytes_per_us(core: Core, fig: dict[str, Any]) -> float:
    """The bandwidth cap of one block of `core`'s shape (bytes/µs): the per-core cap per core it occupies."""
    return CORES_PER_BLOCK[core] * fig["cost.core_gbps"] * 1e3


def roofline_us(work: BlockWork, core: Core, fig: dict[str, Any]) -> float:
    """One block run alone (µs): its bytes at min(its cap, HBM), or its compute, whichever is longer."""
    rate = min(cap_bytes_per_us(core, fig), fig["cost.hbm_gbps"] * 1e3)
    return max(work.bytes / rate if work.bytes else 0.0, compute_us(work, fig))


def hop_us(fig: dict[str, Any], blocks: int = 1) -> float:
    """The scheduling of one task on a path (µs): the dispatch claim (per task and per block), the
    doorbell and setup before it runs, the FIN latency and the completion after it."""
    return (fig["scheduler.dispatch_task_us"] + fig["scheduler.dispatch_block_us"] * blocks + fig["core.doorbell_us"]
            + fig["core.setup_us"] + fig["scheduler.fin_latency_us"] + fig["scheduler.complete_task_us"])


def shape_units(target: dict[str, int], core: Core) -> int:
    """Units of a shape the target has: AIC cores, AIV cores, or whole clusters for MIX."""
    match core:
        case Core.AIC:
            return target["aic"]
        case Core.AIV:
            return target["aiv"]
        case Core.MIX:
            return min(target["clusters"], target["aic"], target["aiv"] // 2)


def task_us(p: ir.Program, g: InstanceGraph, inst: Instance, fig: dict[str, Any],
            matmuls: dict[str, tuple[float, float] | None] | None = None) -> float:
    """A task alone on a path (µs): waves x block cost + one hop; a dummy one completion
    (`scheduler.dummy_us`); an alloc task nothing (it completes at submit). `matmuls`: as for
    `block_work`."""
    if inst.kind is TaskKind.ALLOC:
        return 0.0
    if inst.kind is TaskKind.DUMMY:
        return float(fig["scheduler.dummy_us"])
    d = p.dispatch(inst.dispatch)
    name = kernel_at(p, d, instance_env(p, d, inst.iters, inst.index))
    kernel = p.kernels[name] if name else None
    core = kernel.core if kernel else Core.AIV
    units = max(1, shape_units(p.target, core))
    waves = -(-inst.blocks // units) if inst.blocks else 0
    fixed, _ = fixed_block_us(p, kernel)
    block = fixed if fixed is not None else roofline_us(block_work(p, g, inst, kernel, matmuls), core, fig)
    return waves * block + hop_us(fig, min(inst.blocks, units))
