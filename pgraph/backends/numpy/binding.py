"""Bind a task instance's kernel arguments per block: scalars, regions, declared accesses.

For every block (or once for a sync_start grid, over the union of its blocks' regions) each
parameter gets one of four modes:

- `scalar`: the evaluated scalar expression;
- `view`: a direct region whose declared accesses are exactly the argument region; the kernel
  gets a NumPy view of that region (read-only for `in`);
- `rows`: an indirect region (on the argument or in the task's declared accesses); the kernel
  gets a `RowAccess` bounded by the declared boxes;
- `guarded`: a direct argument wider than the block's declared accesses (a whole tensor passed
  to a kernel that picks its part from its block index and scalars, as the real kernels do);
  the kernel gets a `GuardedTensor`: its reads see poison outside the declared read boxes and a
  write outside the declared write boxes is a KernelFault, element by element, without copying
  the whole tensor;
- `checked`: the same for an argument whose parameter shape differs from the region's (a
  region with single indices); the kernel gets a copy in which every element outside the
  declared read boxes is poisoned, and after the call any change outside the declared write
  boxes is a KernelFault; only the declared write boxes are written back.
"""

from __future__ import annotations

import itertools

import attrs

from pgraph import records
from pgraph.expr import EvalError
from pgraph.ir import program as ir
from pgraph.ir.instances import BlockAccess, BlockAccesses, Box, BufferKey, InstanceGraph, empty_accesses
from pgraph.ir.program import Program
from pgraph.ir.queries import Evaluator, RegionError, resolve_buffer
from pgraph.kinds import AccessKind, Direction, TaskKind

Access = BlockAccess
WRITE_KINDS = (AccessKind.WRITE, AccessKind.ATOMIC)


class BindError(Exception):
    """The plan cannot be bound to kernel arguments (an internal inconsistency)."""


@records.value
@attrs.frozen(repr=False, eq=False)
class ParamBinding:
    """One kernel parameter of one block call."""

    param: ir.Param
    mode: str
    scalar: int | None = None
    tensor: str | None = None
    buffer: BufferKey | None = None
    box: Box | None = None
    read_boxes: tuple[Box, ...] = ()
    write_boxes: tuple[Box, ...] = ()


@records.value
@attrs.frozen(repr=False, eq=False)
class BlockCall:
    """A kernel call: block index (None for a whole sync_start grid), arguments, accesses."""

    block_idx: int | None
    block_num: int
    params: tuple[ParamBinding, ...]
    accesses: BlockAccesses


class Binder:
    """Evaluates regions and scalars of instances with the IR's one evaluator (pgraph.ir.queries)."""

    def __init__(self, ig: InstanceGraph, scalars: dict[str, int]) -> None:
        self.ig = ig
        self.program: Program = ig.program
        self.scalars = dict(scalars)
        self.ev = Evaluator()
        self.cache: dict[int, list[BlockCall]] = {}

    def last_iteration(self, lid: int) -> int | None:
        """The last expanded iteration of loop `lid` (the graph is expanded in full)."""
        its = self.ig.loop_weights.get(lid, {})
        return max(its) if its else None

    def calls(self, node: int) -> list[BlockCall]:
        """The block calls of instance `node` (cached); [] for alloc and dummy instances."""
        got = self.cache.get(node)
        if got is None:
            got = self._bind(node)
            self.cache[node] = got
        return got

    def _bind(self, node: int) -> list[BlockCall]:
        inst = self.ig.instances[node]
        if inst.kind in (TaskKind.ALLOC, TaskKind.DUMMY):
            return []
        d = self.program.dispatch(inst.dispatch)
        env = dict(self.scalars)
        env.update({self.program.loops[lid].axis.var: v for lid, v in zip(d.loops, inst.iters, strict=True)})
        env.update({a.var: v for a, v in zip(d.task_axes, inst.index, strict=False)})
        iters_by_loop = dict(zip(d.loops, inst.iters, strict=False))
        blocks = self.ig.blocks[node]
        bidxs = list(itertools.product(*(range(a.lo, a.hi) for a in d.block_axes))) if d.block_axes else [()]
        if len(bidxs) != len(blocks):
            raise BindError(f"{inst.label}: {len(bidxs)} block indices but {len(blocks)} access sets")
        per_block = []
        for bidx, acc in zip(bidxs, blocks, strict=False):
            benv = dict(env)
            benv.update({a.var: v for a, v in zip(d.block_axes, bidx, strict=False)})
            per_block.append((benv, acc))
        if d.sync_start:
            merged = empty_accesses()
            for _benv, acc in per_block:
                for kind, items in acc.items():
                    merged[kind].extend(items)
            params = self._params(d, per_block[0][0], iters_by_loop, merged, inst.label, union=per_block)
            return [BlockCall(None, len(blocks), params, merged)]
        out = []
        for i, (benv, acc) in enumerate(per_block):
            params = self._params(d, benv, iters_by_loop, acc, inst.label)
            out.append(BlockCall(i if d.block_axes else 0, len(blocks), params, acc))
        return out

    def _box(self, region: ir.RegionRef, tensor: str, env: dict[str, int], label: str) -> Box:
        try:
            return self.ev.region_box(region, self.program.tensors[tensor].shape, env)
        except (RegionError, EvalError):
            raise BindError(f"{label}: region of '{region.tensor}' cannot be evaluated") from None

    def _params(self, d: ir.Dispatch, env: dict[str, int], iters_by_loop: dict[int, int],
                acc: BlockAccesses, label: str,
                union: list[tuple[dict[str, int], BlockAccesses]] | None = None) -> tuple[ParamBinding, ...]:
        out = []
        for arg in d.args:
            if arg.region is None:
                assert arg.scalar is not None
                value = self.ev(arg.scalar, env)
                out.append(ParamBinding(arg.param, "scalar", scalar=value))
                continue
            tensor, key = resolve_buffer(self.program, arg.region.tensor, iters_by_loop, self.last_iteration)
            if union is None:
                box = self._box(arg.region, tensor, env, label)
            else:
                boxes = [self._box(arg.region, tensor, benv, label) for benv, _acc in union]
                box = tuple((min(b[i][0] for b in boxes), max(b[i][1] for b in boxes)) for i in range(len(boxes[0])))
            out.append(self._region_param(arg, tensor, key, box, acc, label))
        return tuple(out)

    def _region_param(self, arg: ir.Arg, tensor: str, key: BufferKey, box: Box, acc: BlockAccesses,
                      label: str) -> ParamBinding:
        reads: list[Box] = []
        writes: list[Box] = []
        indirect = arg.region is not None and arg.region.indirect is not None
        for kind, items in acc.items():
            for tname, k, b, ind in items:
                if k != key:
                    continue
                if tname != tensor:
                    raise BindError(f"{label}: '{tname}' and '{tensor}' (one buffer) in one call are not supported")
                indirect = indirect or ind
                if kind is AccessKind.READ:
                    reads.append(b)
                elif kind in WRITE_KINDS:
                    writes.append(b)
                    if kind is AccessKind.ATOMIC:
                        reads.append(b)
        direction = arg.param.direction
        if indirect:
            return ParamBinding(arg.param, "rows", tensor=tensor, buffer=key, box=box,
                                read_boxes=tuple(reads), write_boxes=tuple(writes))
        want_read = direction is not Direction.OUT
        want_write = direction is not Direction.IN
        exact = ((not want_read or set(reads) == {box}) and (not want_write or set(writes) == {box}))
        shape = tuple(hi - lo for lo, hi in box)
        mode = "view" if exact else "guarded" if arg.param.shape in (None, shape) else "checked"
        return ParamBinding(arg.param, mode, tensor=tensor, buffer=key, box=box,
                            read_boxes=tuple(dict.fromkeys(reads)), write_boxes=tuple(dict.fromkeys(writes)))
