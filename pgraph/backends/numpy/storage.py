"""Buffers of the NumPy executor: dtypes, poison, dense / per-layer (generated) / row-overlay storage.

Every buffer instance of the plan (an external tensor, or an allocation of one scope
iteration) is one Storage. A kernel sees a tensor region either as a NumPy view of exactly
that region (direct regions) or as a `RowAccess` bounded by the declared box (indirect
regions, whose rows are data-dependent: paged KV caches, rows chosen by seq_lens).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import ml_dtypes
import numpy as np

from pgraph.ir.instances import Box

#: .pgl dtype → NumPy dtype. bf16 is ml_dtypes.bfloat16 (round-to-nearest-even casts).
NP_DTYPES: dict[str, np.dtype] = {
    "bf16": np.dtype(ml_dtypes.bfloat16),
    "f16": np.dtype(np.float16),
    "f32": np.dtype(np.float32),
    "i8": np.dtype(np.int8),
    "i16": np.dtype(np.int16),
    "i32": np.dtype(np.int32),
    "i64": np.dtype(np.int64),
    "u8": np.dtype(np.uint8),
    "u16": np.dtype(np.uint16),
    "u32": np.dtype(np.uint32),
    "u64": np.dtype(np.uint64),
}

#: Byte written into every byte of an allocated integer buffer (i32 reads -1515870811).
POISON_BYTE = 0xA5


class KernelFault(Exception):
    """A kernel touched memory outside its declared regions, or read a poisoned/invalid value."""


def poison_fill(a: np.ndarray) -> None:
    """Poison `a` in place: NaN for floating dtypes, 0xA5 in every byte for integers."""
    if a.dtype.kind == "f" or a.dtype == NP_DTYPES["bf16"]:
        a[...] = np.nan
    else:
        a.view(np.uint8).reshape(-1)[...] = POISON_BYTE


def poisoned(shape: Sequence[int], dtype: np.dtype) -> np.ndarray:
    """A new array of `shape`/`dtype` filled with poison (see `poison_fill`)."""
    a = np.empty(tuple(shape), dtype=dtype)
    poison_fill(a)
    return a


def box_slices(box: Box) -> tuple[slice, ...]:
    """Box ((lo, hi) per dim) → tuple of slices."""
    return tuple(slice(lo, hi) for lo, hi in box)


def box_shape(box: Box) -> tuple[int, ...]:
    """Extent of every dimension of `box`."""
    return tuple(hi - lo for lo, hi in box)


def reshape_view(a: np.ndarray, shape: tuple[int, ...] | None) -> np.ndarray:
    """Reshape `a` to `shape` without copying (ValueError if that would need a copy)."""
    if shape is None or tuple(a.shape) == tuple(shape):
        return a
    return a.reshape(shape, copy=False)


class Storage:
    """One buffer instance. Subclasses give direct views and row-level access."""

    shape: tuple[int, ...]
    dtype: np.dtype

    def view(self, tshape: tuple[int, ...], box: Box, writable: bool) -> np.ndarray:
        """The region `box` of the buffer seen with shape `tshape` (a view of the same bytes)."""
        raise NotImplementedError

    def take(self, tshape: tuple[int, ...], rows: np.ndarray) -> np.ndarray:
        """Copy of rows `rows` (absolute indices of dim 0 of the `tshape` view)."""
        raise NotImplementedError

    def put(self, tshape: tuple[int, ...], rows: np.ndarray, values: np.ndarray) -> None:
        """Write `values` into rows `rows` (absolute indices of dim 0 of the `tshape` view)."""
        raise NotImplementedError


class DenseStorage(Storage):
    """A plain ndarray holding the whole buffer (allocations and small external tensors)."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = array
        self.shape = tuple(array.shape)
        self.dtype = array.dtype
        self._shaped: dict[tuple[int, ...], np.ndarray] = {}

    def shaped(self, tshape: tuple[int, ...]) -> np.ndarray:
        """The whole buffer reshaped to `tshape` (a view tensor of this root)."""
        got = self._shaped.get(tshape)
        if got is None:
            got = reshape_view(self.array, tshape)
            self._shaped[tshape] = got
        return got

    def view(self, tshape: tuple[int, ...], box: Box, writable: bool) -> np.ndarray:
        v = self.shaped(tshape)[box_slices(box)]
        if not writable:
            v = v.view()
            v.flags.writeable = False
        return v

    def take(self, tshape: tuple[int, ...], rows: np.ndarray) -> np.ndarray:
        return self.shaped(tshape)[rows]

    def put(self, tshape: tuple[int, ...], rows: np.ndarray, values: np.ndarray) -> None:
        self.shaped(tshape)[rows] = values


class LayeredStorage(Storage):
    """A read-only per-layer input tensor [layers*period, ...] whose layers come from `source`.

    `source(layer)` returns that layer's [period, ...] rows (`Inputs.layer`: generated on
    demand, kept in a small LRU, layer 0 for every layer with replicated weights), so the
    executor never holds the whole stack: 40 distinct full-size layers are ~36 GB. A direct
    region must lie inside one layer; row reads (`take`) may mix layers.
    """

    def __init__(self, source: Callable[[int], np.ndarray], period: int, shape: tuple[int, ...],
                 dtype: np.dtype) -> None:
        self.source = source
        self.period = period
        self.shape = tuple(shape)
        self.dtype = dtype

    def _check(self, tshape: tuple[int, ...]) -> None:
        if tshape != self.shape:
            raise KernelFault("a per-layer input tensor is only accessed with its own shape")

    def view(self, tshape: tuple[int, ...], box: Box, writable: bool) -> np.ndarray:
        if writable:
            raise KernelFault("input tensors are read-only")
        self._check(tshape)
        lo, hi = box[0]
        layer = lo // self.period
        if hi > lo and (hi - 1) // self.period != layer:
            raise KernelFault(f"rows {lo}..{hi} span two layers (period {self.period})")
        local = ((lo - layer * self.period, hi - layer * self.period), *box[1:])
        v = self.source(layer)[box_slices(local)].view()
        v.flags.writeable = False
        return v

    def take(self, tshape: tuple[int, ...], rows: np.ndarray) -> np.ndarray:
        self._check(tshape)
        r = np.asarray(rows, dtype=np.int64)
        out = np.empty((*r.shape, *self.shape[1:]), dtype=self.dtype)
        layer_of = r // self.period
        for layer in np.unique(layer_of).tolist():
            m = layer_of == layer
            out[m] = self.source(layer)[r[m] - layer * self.period]
        return out

    def put(self, tshape: tuple[int, ...], rows: np.ndarray, values: np.ndarray) -> None:
        raise KernelFault("input tensors are read-only")


class OverlayStorage(Storage):
    """Row-granular copy-on-write over a read-only source (the per-layer paged KV caches).

    Reads gather from the source and apply the rows written so far; writes go to a dict of
    rows. The executor never copies the 128 MiB-per-layer full-size cache.
    """

    def __init__(self, source: Storage) -> None:
        self.source = source
        self.shape = source.shape
        self.dtype = source.dtype
        self.rows: dict[int, np.ndarray] = {}

    def _check(self, tshape: tuple[int, ...]) -> None:
        if tshape != self.shape:
            raise KernelFault("an overlay tensor is only accessed with its own shape")

    def view(self, tshape: tuple[int, ...], box: Box, writable: bool) -> np.ndarray:
        if writable:
            raise KernelFault("a row-overlay tensor (paged KV cache) is written through indirect rows only")
        self._check(tshape)
        rows = np.arange(box[0][0], box[0][1])
        out = self.take(tshape, rows)[(slice(None), *box_slices(box[1:]))]
        out.flags.writeable = False
        return out

    def take(self, tshape: tuple[int, ...], rows: np.ndarray) -> np.ndarray:
        self._check(tshape)
        rows = np.asarray(rows)
        out = np.array(self.source.take(tshape, rows))
        if self.rows:
            flat = rows.reshape(-1)
            hit = np.flatnonzero(np.isin(flat, np.fromiter(self.rows, dtype=np.int64)))
            view = out.reshape(flat.shape[0], *self.shape[1:])
            for i in hit:
                view[i] = self.rows[int(flat[i])]
        return out

    def put(self, tshape: tuple[int, ...], rows: np.ndarray, values: np.ndarray) -> None:
        self._check(tshape)
        flat = np.asarray(rows).reshape(-1)
        vals = np.broadcast_to(np.asarray(values, dtype=self.dtype), (*np.asarray(rows).shape, *self.shape[1:]))
        vals = vals.reshape(flat.shape[0], *self.shape[1:])
        for r, v in zip(flat.tolist(), vals, strict=False):
            self.rows[r] = np.array(v)


class RowAccess:
    """An indirect region as a kernel sees it: rows of dim 0 chosen at run time.

    Indices are relative to the region's first row (like a device pointer to the region);
    every access is bounds-checked against the declared boxes (KernelFault otherwise).
    `origin` is the absolute first row.
    Shape is the region's shape; the trailing dims are always accessed whole.
    """

    def __init__(self, storage: Storage, tshape: tuple[int, ...], box: Box, name: str,
                 read_boxes: list[Box], write_boxes: list[Box]) -> None:
        self.storage = storage
        self.tshape = tshape
        self.box = box
        self.name = name
        self.origin = box[0][0]
        self.shape = box_shape(box)
        self.dtype = storage.dtype
        self.read_boxes = read_boxes
        self.write_boxes = write_boxes

    def _absolute(self, rows: np.ndarray | int, boxes: list[Box], what: str) -> np.ndarray:
        r = np.asarray(rows, dtype=np.int64)
        if r.size == 0:
            return r + self.origin
        if r.min() < 0 or r.max() >= self.shape[0]:
            raise KernelFault(f"{what} row {int(r.min()) if r.min() < 0 else int(r.max())} of '{self.name}' "
                              f"is outside the region's {self.shape[0]} rows")
        a = r + self.origin
        ok = np.zeros(a.shape, dtype=bool)
        for b in boxes:
            ok |= (a >= b[0][0]) & (a < b[0][1])
        if not ok.all():
            bad = int(a[~ok].reshape(-1)[0])
            raise KernelFault(f"{what} row {bad} of '{self.name}' is outside the regions the spec declares")
        return a

    def _cols_ok(self, boxes: list[Box], what: str) -> None:
        full = tuple((0, n) for n in self.tshape[1:])
        if not any(tuple(b[1:]) == full for b in boxes) and len(self.tshape) > 1:
            raise KernelFault(f"{what} '{self.name}': the declared region does not cover whole rows")

    def take(self, rows: np.ndarray | int) -> np.ndarray:
        """Copy of the region rows `rows` (relative), with all trailing dims."""
        a = self._absolute(rows, self.read_boxes, "read of")
        self._cols_ok(self.read_boxes, "read of")
        return self.storage.take(self.tshape, a)

    def put(self, rows: np.ndarray | int, values: np.ndarray) -> None:
        """Write `values` (cast to the buffer dtype) into region rows `rows` (relative)."""
        a = self._absolute(rows, self.write_boxes, "write to")
        self._cols_ok(self.write_boxes, "write to")
        self.storage.put(self.tshape, a, np.asarray(values).astype(self.dtype))


def inside_one(box: Box, boxes: Sequence[Box]) -> bool:
    """True when one box of `boxes` contains all of `box` (the common case: no mask needed)."""
    return any(all(blo <= lo and hi <= bhi for (lo, hi), (blo, bhi) in zip(box, b, strict=False)) for b in boxes)


def coverage(box: Box, boxes: Sequence[Box]) -> np.ndarray:
    """Boolean mask over `box` (absolute coordinates): True where some box of `boxes` covers it."""
    m = np.zeros(box_shape(box), dtype=bool)
    for b in boxes:
        m[tuple(slice(max(lo, blo) - lo, max(min(hi, bhi) - lo, 0))
                for (lo, hi), (blo, bhi) in zip(box, b, strict=False))] = True
    return m


class GuardedTensor:
    """A tensor argument wider than what its block declares, seen through its declared accesses.

    The kernel receives what the orchestration passes (a whole tensor, or a view of it) and
    picks its own part from its block index and scalar offsets, as the real kernels do. Reads
    (`t[key]`, `np.asarray(t)`) return a copy of that part in which every element outside the
    declared read boxes is poisoned; a write (`t[key] = v`, `t[key] += v`) that reaches an
    element outside the declared write boxes is a KernelFault. Only basic indexing (integers,
    unit-step slices, `...`) is supported. Coordinates are relative to the passed region `box`.
    """

    def __init__(self, storage: Storage, tshape: tuple[int, ...], box: Box, name: str, param: str,
                 read_boxes: Sequence[Box], write_boxes: Sequence[Box], label: str) -> None:
        self.storage = storage
        self.tshape = tshape
        self.box = box
        self.name = name
        self.param = param
        self.read_boxes = list(read_boxes)
        self.write_boxes = list(write_boxes)
        self.label = label
        self.shape = box_shape(box)
        self.ndim = len(self.shape)
        self.dtype = storage.dtype

    def _select(self, key: object) -> tuple[Box, tuple[int, ...]]:
        """The absolute box `key` selects and the dims an integer index drops."""
        keys = key if isinstance(key, tuple) else (key,)
        if any(k is Ellipsis for k in keys):
            i = next(j for j, k in enumerate(keys) if k is Ellipsis)
            fill = (slice(None),) * (self.ndim - (len(keys) - 1))
            keys = (*keys[:i], *fill, *keys[i + 1:])
        keys = (*keys, *(slice(None),) * (self.ndim - len(keys)))
        if len(keys) != self.ndim:
            raise KernelFault(f"{self.label}: '{self.param}' indexed with {len(keys)} indices, it has {self.ndim}")
        out: list[tuple[int, int]] = []
        dropped: list[int] = []
        for d, (k, n, (lo, _hi)) in enumerate(zip(keys, self.shape, self.box, strict=True)):
            if isinstance(k, (int, np.integer)):
                i = int(k) + (n if k < 0 else 0)
                if not 0 <= i < n:
                    raise KernelFault(f"{self.label}: index {int(k)} of '{self.param}' dim {d} outside 0..{n - 1}")
                out.append((lo + i, lo + i + 1))
                dropped.append(d)
            elif isinstance(k, slice):
                a, b, step = k.indices(n)
                if step != 1:
                    raise KernelFault(f"{self.label}: '{self.param}' sliced with step {step}")
                out.append((lo + a, lo + max(a, b)))
            else:
                raise KernelFault(f"{self.label}: '{self.param}' takes integer and slice indices only")
        return tuple(out), tuple(dropped)

    def __getitem__(self, key: object) -> np.ndarray:
        keys = key if isinstance(key, tuple) else (key,)
        if any(isinstance(k, (np.ndarray, list)) for k in keys):
            return self._gather(keys)
        box, dropped = self._select(key)
        data = np.array(self.storage.view(self.tshape, box, writable=False))
        readable = None if inside_one(box, self.read_boxes) else coverage(box, self.read_boxes)
        if readable is not None and not readable.all():
            hidden = data[~readable]
            poison_fill(hidden)
            data[~readable] = hidden
        return data.reshape(tuple(n for d, n in enumerate(box_shape(box)) if d not in dropped))

    def _gather(self, keys: tuple[object, ...]) -> np.ndarray:
        """Integer-array (advanced) indexing on a read: read the bounding box of the selection
        (poisoned outside the declared reads), then index it."""
        bound: list[object] = []
        local: list[object] = []
        for k in keys:
            if isinstance(k, (np.ndarray, list)):
                a = np.asarray(k, dtype=np.int64)
                lo, hi = (int(a.min()), int(a.max()) + 1) if a.size else (0, 0)
                bound.append(slice(lo, hi))
                local.append(a - lo)
            else:
                bound.append(k)
                local.append(slice(None) if isinstance(k, slice) else 0)
        part = self[tuple(bound)]
        squeezed = tuple(x for x, k in zip(local, keys, strict=True) if not isinstance(k, (int, np.integer)))
        return part[squeezed]  # type: ignore[index]

    def __setitem__(self, key: object, value: object) -> None:
        box, dropped = self._select(key)
        writable = None if inside_one(box, self.write_boxes) else coverage(box, self.write_boxes)
        if writable is not None and not writable.all():
            where = tuple(int(i[0]) for i in np.nonzero(~writable))
            raise KernelFault(f"{self.label}: '{self.param}' wrote {self.name} at offset {where} of the selected "
                              "part, outside the regions the spec declares")
        target = self.storage.view(self.tshape, box, writable=True)
        target[...] = np.broadcast_to(np.asarray(value), target.reshape(
            tuple(n for d, n in enumerate(target.shape) if d not in dropped)).shape).reshape(target.shape)

    def __array__(self, dtype: np.dtype | None = None, copy: bool | None = None) -> np.ndarray:
        out = self[...]
        return out if dtype is None else out.astype(dtype)
