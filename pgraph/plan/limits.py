"""Runtime limits of one task and one tensor: sync_start occupancy (PG113, code 7) and what the
argument and tensor descriptors can hold (PG114).

simpler (docs/upstream.md §2.3, §5.5): CoreTaskArgs holds 32 tensors and 16
scalars; a ChipTensor has at most 5 dimensions; TensorCreateInfo and view shapes and offsets
are `uint32_t`, and `TensorCreateInfo` needs every dimension >= 1; with sync_start and
block_num > 1 the grid must fit the clusters (MIX/AIC) or AIV cores. The a2a3 build relies on
every one of these; checking them here is what lets `pgraph check` promise a build.
"""

from __future__ import annotations

from pgraph.diagnostics import DiagnosticBag, Edit, Fix
from pgraph.ir.program import Dispatch, Program
from pgraph.kinds import Core, Storage, TaskKind
from pgraph.plan.base import Pass, Plan, ProgramCheck

U32 = 2**32


def _at_most(d: Dispatch, blocks: int) -> Fix | None:
    """The fix 'use at most `blocks` blocks' of a grid over one block axis: its upper bound lowered
    (dropping sync_start instead would let blocks that touch one region race: PG102)."""
    if len(d.block_axes) != 1:
        return None
    a = d.block_axes[0]
    return Fix((Edit(a.span, f"{a.var} in {a.lo}..{a.lo + blocks}"),))


class TaskLimitsCheck(ProgramCheck):
    """PG113 sync_start grids wider than their cores; PG114 argument counts, dimensions, alloc shapes."""

    name = "task-limits"

    def run(self, program: Program, bag: DiagnosticBag) -> None:
        p = program
        t = p.target
        for d in p.dispatches:
            if d.kind is TaskKind.DUMMY or d.kernel is None:
                continue
            core = p.kernels[d.kernel].core
            blocks = d.block_count
            if d.sync_start and blocks > 1:
                limit, what = (t["aiv"], "AIV cores") if core is Core.AIV else (t["clusters"], "clusters")
                if blocks > limit:
                    bag.add("PG113", f"sync_start grid '{d.name}' has {blocks} blocks but only {limit} {what} "
                            "can start together", d.span,
                            hint="REQUIRE_SYNC_START_INVALID (code 7): a sync_start cohort launches all-or-nothing; "
                                 f"use at most {limit} blocks, or drop sync_start",
                            fix=_at_most(d, limit))
            tensors = [a for a in d.args if a.region is not None]
            scalars = [a for a in d.args if a.region is None]
            problems = []
            if len(tensors) > t["max_tensor_args"]:
                problems.append(f"{len(tensors)} tensor arguments (max {t['max_tensor_args']})")
            if len(scalars) > t["max_scalar_args"]:
                problems.append(f"{len(scalars)} scalar arguments (max {t['max_scalar_args']})")
            for a in tensors:
                assert a.region is not None
                name = a.region.tensor
                ndims = len(p.tensors[name].shape) if name in p.tensors else 0
                if ndims > t["max_dims"]:
                    problems.append(f"'{name}' has {ndims} dimensions (max {t['max_dims']})")
            if problems:
                bag.add("PG114", f"task '{d.name}' exceeds the runtime's per-task limits: {'; '.join(problems)}",
                        d.span, hint="CoreTaskArgs holds 32 tensors and 16 scalars of at most 5 dimensions "
                                     "(simpler arg_direction.h); split the kernel or pack arguments")
        for tensor in p.tensors.values():
            if tensor.storage is not Storage.ALLOC:
                continue
            if len(tensor.shape) > t["max_dims"]:
                bag.add("PG114", f"tensor '{tensor.name}' has {len(tensor.shape)} dimensions; the runtime allows "
                        f"{t['max_dims']}", tensor.span, hint="reshape it to at most 5 dimensions (a `view`)")
            elif any(not 0 < n < U32 for n in tensor.shape):
                bag.add("PG114", f"allocated tensor '{tensor.name}' has shape {list(tensor.shape)}; TensorCreateInfo "
                        "takes uint32_t dimensions from 1 to 2**32 - 1", tensor.span,
                        hint="give every dimension of an allocation at least one element (drop an empty buffer)")


class ViewLimitsPass(Pass):
    """PG114: a task argument's view offset or extent that does not fit `uint32_t` (ChipTensor.view)."""

    name = "view-limits"

    def run(self, plan: Plan) -> None:
        done: set[tuple[str, str]] = set()
        fits: dict[tuple[tuple[int, int], ...], bool] = {}  # per distinct box (boxes repeat across layers)
        for node, args in plan.graph.args.items():
            for a in args:
                ok = fits.get(a.box)
                if ok is None:
                    ok = fits[a.box] = all(0 <= lo < hi and hi - lo < U32 and lo < U32 for lo, hi in a.box)
                if ok:
                    continue
                inst = plan.graph.instances[node]
                empty = any(hi <= lo for lo, hi in a.box)
                key = (inst.dispatch, a.param.name)
                if key in done:
                    continue
                done.add(key)
                d = plan.program.dispatch(inst.dispatch)
                span = next((arg.span for arg in d.args if arg.param.name == a.param.name), d.span)
                if empty:
                    plan.bag.add("PG114", f"'{inst.label}' passes '{a.tensor}' to '{a.param.name}' as the empty "
                                 f"view {list(a.box)}", span,
                                 hint="the runtime accepts an empty view, but the TensorMap's extent of it (from "
                                      "shape - 1) is not defined, so no edge can be promised; pass a non-empty "
                                      "region and state what the kernel touches with a `writes`/`reads` clause "
                                      "(#762 attn_out_seed), or make the empty range the task's grid (0 blocks: "
                                      "nothing is submitted)")
                    continue
                plan.bag.add("PG114", f"'{inst.label}' passes '{a.tensor}' to '{a.param.name}' with the view "
                             f"{list(a.box)}, whose offsets or extents do not fit uint32_t", d.span,
                             hint="ChipTensor views take uint32_t shapes and offsets; split the tensor")
