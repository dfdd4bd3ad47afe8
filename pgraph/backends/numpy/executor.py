"""Execute a planned instance graph with NumPy kernels in a given legal order.

Buffers: allocations start poisoned (NaN / 0xA5 bytes, `storage.poison_fill`); read-only
inputs are shared with `Inputs` (never written); per-layer inputs are read layer by layer
through `Inputs.layer` (generated on demand, `storage.LayeredStorage`); written external
tensors get private storage: the paged KV caches a row overlay over the inputs, any other
(`out`) a poisoned copy.
Each task runs its blocks one after another (order chosen by the caller: SPMD blocks run
concurrently on the device, so their order is free); a sync_start grid runs once over the
union of its blocks' regions. An optional RaceDetector checks every block's declared
accesses before the kernel runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import attrs
import numpy as np

from pgraph import records
from pgraph.backends.numpy import attention as _attention  # noqa: F401  (registers the attention kernels)
from pgraph.backends.numpy.binding import Binder, BlockCall, ParamBinding
from pgraph.backends.numpy.inputs import LAYERED, Inputs
from pgraph.backends.numpy.kernels import KERNELS, BlockContext
from pgraph.backends.numpy.races import RaceDetector
from pgraph.backends.numpy.storage import (
    NP_DTYPES,
    DenseStorage,
    GuardedTensor,
    KernelFault,
    LayeredStorage,
    OverlayStorage,
    RowAccess,
    Storage,
    box_shape,
    poison_fill,
    poisoned,
    reshape_view,
)
from pgraph.ir.instances import Box, BufferKey, InstanceGraph
from pgraph.ir.queries import instance_env, kernel_at
from pgraph.kinds import AccessKind, Direction
from pgraph.kinds import Storage as Placement

BlockOrder = Callable[[int, int], Sequence[int]]


class ReadOnlyStorage(DenseStorage):
    """An input array shared with Inputs: views are read-only, row writes are refused."""

    def view(self, tshape: tuple[int, ...], box: Box, writable: bool) -> np.ndarray:
        if writable:
            raise KernelFault("input tensors are read-only")
        return super().view(tshape, box, False)

    def put(self, tshape: tuple[int, ...], rows: np.ndarray, values: np.ndarray) -> None:
        raise KernelFault("input tensors are read-only")


@records.value
@attrs.frozen(repr=False, eq=False)
class _Pending:
    """A `checked` argument: the kernel's copy and its state before the call."""

    storage: Storage
    tshape: tuple[int, ...]
    pb: ParamBinding
    copy: np.ndarray
    before: np.ndarray


@records.shared_repr
@attrs.define(repr=False)
class RunResult:
    """Buffers after one execution, the order used, and the race reports."""

    order: list[int]
    storage: dict[BufferKey, Storage]
    races: list
    faults: list[str]

    def array(self, key: BufferKey) -> np.ndarray:
        """The whole dense buffer `key` (KeyError if never touched)."""
        st = self.storage[key]
        if not isinstance(st, DenseStorage):
            raise TypeError(f"buffer {key} is not dense")
        return st.array


def written_externals(ig: InstanceGraph) -> set[str]:
    """External tensors (root names) that some block writes or accumulates into."""
    out = set()
    for blocks in ig.blocks.values():
        for acc in blocks:
            for kind in (AccessKind.WRITE, AccessKind.ATOMIC):
                for _t, key, _b, _i in acc[kind]:
                    if ig.program.tensors[key[0]].storage is Placement.EXTERNAL:
                        out.add(key[0])
    return out


class Executor:
    """Runs one plan's instance graph on one set of inputs; create one per execution."""

    def __init__(self, ig: InstanceGraph, inputs: Inputs, binder: Binder | None = None,
                 detector: RaceDetector | None = None) -> None:
        self.ig = ig
        self.program = ig.program
        self.inputs = inputs
        self.binder = binder or Binder(ig, inputs.scalars)
        self.detector = detector
        self.storage: dict[BufferKey, Storage] = {}
        self.written = written_externals(ig)

    # ---- buffers ----
    def _external(self, name: str) -> Storage:
        t = self.program.tensors[name]
        if name in LAYERED:
            inputs = self.inputs
            src: Storage = LayeredStorage(lambda layer: inputs.layer(name, layer), inputs.period[name], t.shape,
                                          NP_DTYPES[t.dtype])
            return OverlayStorage(src) if name in self.written else src
        data = self.inputs.arrays.get(name)
        if name in self.written:
            arr = np.array(data) if data is not None else poisoned(t.shape, NP_DTYPES[t.dtype])
            return DenseStorage(arr)
        if data is None:
            raise KernelFault(f"no input data for external tensor '{name}'")
        return ReadOnlyStorage(data)

    def buffer(self, key: BufferKey) -> Storage:
        """The storage of buffer instance `key`, created (poisoned) on first use."""
        st = self.storage.get(key)
        if st is None:
            t = self.program.tensors[key[0]]
            if t.storage is Placement.EXTERNAL:
                st = self._external(key[0])
            else:
                st = DenseStorage(poisoned(t.shape, NP_DTYPES[t.dtype]))
            self.storage[key] = st
        return st

    # ---- arguments ----
    def _arg(self, pb: ParamBinding, label: str) -> tuple[object, _Pending | None]:
        if pb.mode == "scalar":
            return pb.scalar, None
        assert pb.tensor is not None and pb.buffer is not None and pb.box is not None
        st = self.buffer(pb.buffer)
        tshape = self.program.tensors[pb.tensor].shape
        direction = pb.param.direction
        if pb.mode == "rows":
            return RowAccess(st, tshape, pb.box, pb.tensor, list(pb.read_boxes), list(pb.write_boxes)), None
        if pb.mode == "view":
            v = st.view(tshape, pb.box, writable=direction != "in")
            return reshape_view(v, pb.param.shape), None
        if pb.mode == "guarded":
            return GuardedTensor(st, tshape, pb.box, pb.tensor, pb.param.name, pb.read_boxes, pb.write_boxes,
                                 label), None
        return self._checked(st, tshape, pb)

    def _checked(self, st: Storage, tshape: tuple[int, ...], pb: ParamBinding) -> tuple[object, _Pending]:
        assert pb.box is not None
        copy = np.array(st.view(tshape, pb.box, writable=False))
        readable = self._mask(pb.box, pb.read_boxes)
        if not readable.all():
            hidden = copy[~readable]
            poison_fill(hidden)
            copy[~readable] = hidden
        before = copy.copy()
        return reshape_view(copy, pb.param.shape), _Pending(st, tshape, pb, copy, before)

    @staticmethod
    def _mask(box: Box, boxes: Sequence[Box]) -> np.ndarray:
        m = np.zeros(box_shape(box), dtype=bool)
        for b in boxes:
            m[tuple(slice(max(lo, blo) - lo, min(hi, bhi) - lo)
                    for (lo, hi), (blo, bhi) in zip(box, b, strict=False))] = True
        return m

    def _commit(self, pending: _Pending, label: str) -> None:
        st, tshape, pb, copy, before = pending.storage, pending.tshape, pending.pb, pending.copy, pending.before
        assert pb.box is not None
        writable = self._mask(pb.box, pb.write_boxes)
        a = copy.view(np.uint8).reshape(*copy.shape, -1)
        b = before.view(np.uint8).reshape(*before.shape, -1)
        changed = (a != b).any(axis=-1)
        if (changed & ~writable).any():
            where = tuple(int(i[0]) for i in np.nonzero(changed & ~writable))
            raise KernelFault(f"{label}: '{pb.param.name}' wrote {pb.tensor} at offset {where} of its region, "
                              f"outside the regions the spec declares")
        if not writable.any():
            return
        target = st.view(tshape, pb.box, writable=True)
        target[writable] = copy[writable]

    # ---- execution ----
    def run_call(self, node: int, call: BlockCall) -> None:
        """Check (race detector) and run one block call of instance `node`."""
        inst = self.ig.instances[node]
        d = self.program.dispatch(inst.dispatch)
        if self.detector is not None:
            self.detector.check_block(node, call.block_idx, call.accesses, d.sync_start)
        name = kernel_at(self.program, d, instance_env(self.program, d, inst.iters, inst.index))
        assert name is not None
        body = self.program.kernels[name].body  # an alias runs the body of the kernel it aliases
        fn = KERNELS.get(body)
        if fn is None:
            raise KernelFault(f"no NumPy implementation of kernel '{body}'")
        args = []
        pending: list[_Pending] = []
        for pb in call.params:
            value, chk = self._arg(pb, inst.label)
            args.append(value)
            if chk is not None:
                pending.append(chk)
        ctx = BlockContext(call.block_idx, call.block_num, inst.label)
        try:
            fn(ctx, *args)
        except ValueError as err:
            if "read-only" not in str(err):
                raise
            # the NumPy kernel writes a parameter the spec declares `in` (its view is read-only)
            ins = [pb.param.name for pb in call.params if pb.param.direction == Direction.IN]
            raise KernelFault(f"kernel '{name}' writes an argument passed read-only "
                              f"(its `in` parameters: {', '.join(ins) or 'none'}); declare the written "
                              f"parameter `out` or `inout` and the region `writes`") from None
        for chk in pending:
            self._commit(chk, inst.label)

    def run(self, order: Sequence[int], block_order: BlockOrder | None = None,
            keep_going: bool = False) -> RunResult:
        """Execute instances in `order` (a legal order of the executed graph).

        `block_order(node, n)` permutes the n block calls of a task (default: 0..n-1).
        A KernelFault propagates, or with `keep_going` is recorded (`faults`) and the run
        continues with the next task (so a race detector still sees every access).
        RaceFound propagates from a stop-at-first detector.
        """
        faults: list[str] = []
        for node in order:
            calls = self.binder.calls(node)
            idx: Sequence[int] = range(len(calls)) if block_order is None else block_order(node, len(calls))
            try:
                for i in idx:
                    self.run_call(node, calls[i])
            except KernelFault as err:
                if not keep_going:
                    raise
                faults.append(f"{self.ig.instances[node].label}: {err}")
        races = list(self.detector.reports) if self.detector is not None else []
        return RunResult(list(order), self.storage, races, faults)
