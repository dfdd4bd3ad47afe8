"""simpler's `deps.json` (`--enable-dep-gen`): the typed records, a tolerant reader and a writer.

Format (docs/upstream.md §2.7; simpler `docs/dfx/dep-gen.md`,
writer `TRB/host/dep_gen_replay.cpp`):

- `tasks[]`: `{task_id, scope "auto"|"manual", early_dispatch, kernel_ids [aic, aiv0, aiv1]
  (-1 = inactive), block_num, args[]}`, one per `submit_task` / `submit_dummy_task`, in submit
  order; alloc tasks are absent. Each arg: `{idx, type INPUT|OUTPUT|INOUT|OUTPUT_EXISTING,
  tensor_id, dtype, shape[], start_offset, strides[]}` (offsets and strides in elements).
- `tensors[]`: `{tensor_id (64-bit FNV-1a of buffer address and version), buffer_addr, version,
  dtype, buffer_numel}`.
- `edges[]`: `{pred, succ, arg (-1 for explicit), source explicit|creator|tensormap, flags ⊆
  [wait, retain]}`; creator and tensormap edges add `tensor_id` and the consumer's region
  (`consumer_dtype`, `consumer_shape`, `consumer_start_offset`, `consumer_strides`); tensormap
  edges add `overlap covered|other` and the producer's region (`producer_shape`,
  `producer_start_offset`, `producer_strides`).

Task ids use the `PTO2TaskId.raw` layout, `(ring << 32) | local`. 64-bit ids are JSON strings;
the reader also takes integers. Quirks the reader accepts (and counts in `Quirks`): ids as
strings or integers; a task record repeated with the same id (an overflow record: the runtime
keeps 64 explicit deps inline and spills the rest into overflow records of 582 each), merged
into the first when it agrees with it; duplicate (pred, succ) entries (one per dep entry and
per argument); `pred` ids missing from `tasks[]` (alloc tasks). Anything else malformed raises
`DepsFormatError` with the JSON path (`tasks[3].block_num`) and, for a syntax error, the line
and column.
"""

from __future__ import annotations

import io
import json
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import IO, Any

import attrs

from pgraph import records

__all__ = ["ARG_TYPES", "DepsArg", "DepsEdge", "DepsFormatError", "DepsGraph", "DepsTask", "DepsTensor", "Quirks",
           "Region", "fnv1a_tensor_id", "parse", "parse_stream", "render"]

ARG_TYPES = ("INPUT", "OUTPUT", "INOUT", "OUTPUT_EXISTING", "NO_DEP")
SOURCES = ("explicit", "creator", "tensormap")
FLAGS = ("wait", "retain")
_U64 = (1 << 64) - 1


class DepsFormatError(ValueError):
    """A deps.json that is not valid JSON or not in the format: `where` is the JSON path (or
    `line L col C` for a syntax error)."""

    def __init__(self, where: str, message: str, line: int = 0, col: int = 0) -> None:
        super().__init__(f"{where}: {message}" if where else message)
        self.where = where
        self.line = line
        self.col = col


def fnv1a_tensor_id(addr: int, version: int) -> int:
    """simpler dep_gen's tensor id: 64-bit FNV-1a over the buffer address (8 bytes, little
    endian) then the version (int32, 4 bytes, little endian)."""
    h = 0xCBF29CE484222325
    for byte in (addr & _U64).to_bytes(8, "little") + (version & 0xFFFFFFFF).to_bytes(4, "little"):
        h = ((h ^ byte) * 0x100000001B3) & _U64
    return h


@records.value
@attrs.frozen(repr=False, eq=False)
class Region:
    """A strided region of a buffer: dtype (simpler `DataType` spelling), shape and strides (elements),
    start offset (elements from the buffer's base)."""

    dtype: str
    shape: tuple[int, ...]
    start_offset: int
    strides: tuple[int, ...]


@records.value
@attrs.frozen(repr=False, eq=False)
class DepsArg:
    """One tensor argument of a task: position `idx`, tag `type`, the tensor it names, its region."""

    idx: int
    type: str
    tensor_id: int
    region: Region


@records.value
@attrs.frozen(repr=False, eq=False)
class DepsTask:
    """One submitted task (a compute task or a dummy; alloc tasks are not listed).

    `task_id` is `PTO2TaskId.raw` = (ring << 32) | local; `kernel_ids` = (aic, aiv0, aiv1), -1
    inactive (a dummy has none); `block_num` is the SPMD block count (0 for a dummy)."""

    task_id: int
    scope: str
    early_dispatch: bool
    kernel_ids: tuple[int, int, int]
    block_num: int
    args: tuple[DepsArg, ...]

    @property
    def ring(self) -> int:
        """The ring the task id was taken from (simpler: min(scope depth, 3))."""
        return self.task_id >> 32

    @property
    def local(self) -> int:
        """The per-ring task counter value."""
        return self.task_id & 0xFFFFFFFF

    @property
    def is_dummy(self) -> bool:
        """True for a `submit_dummy_task` (no kernel)."""
        return self.kernel_ids == (-1, -1, -1)


@records.value
@attrs.frozen(repr=False, eq=False)
class DepsTensor:
    """One buffer version: id, base address, version, element dtype, element count."""

    tensor_id: int
    buffer_addr: int
    version: int
    dtype: str
    buffer_numel: int


@records.value
@attrs.frozen(repr=False, eq=False)
class DepsEdge:
    """One edge record: producer and consumer ids, the consumer's argument (-1: explicit), why
    (`source`), the fanin flags; for creator/tensormap the tensor and the consumer's region, for
    tensormap the overlap class and the producer's region."""

    pred: int
    succ: int
    arg: int
    source: str
    flags: tuple[str, ...]
    tensor_id: int | None = None
    consumer: Region | None = None
    overlap: str | None = None
    producer: Region | None = None


@records.value
@attrs.frozen(repr=False, eq=False)
class Quirks:
    """What the reader met and tolerated: ids written as integers, overflow records merged,
    repeated (pred, succ) pairs, preds that are alloc tasks (absent from tasks[])."""

    integer_ids: int = 0
    overflow_records: int = 0
    duplicate_pairs: int = 0
    alloc_preds: int = 0


@records.value
@attrs.frozen(repr=False, eq=False)
class DepsGraph:
    """A deps.json: tasks in submit order, tensors, edges in file order, and the reader's quirks."""

    tasks: tuple[DepsTask, ...]
    tensors: tuple[DepsTensor, ...]
    edges: tuple[DepsEdge, ...]
    quirks: Quirks = Quirks()

    def task_index(self) -> dict[int, int]:
        """task id -> position in submit order."""
        return {t.task_id: i for i, t in enumerate(self.tasks)}


# ---- reading ---------------------------------------------------------------------------------


class _Reader:
    def __init__(self) -> None:
        self.integer_ids = 0

    def obj(self, value: Any, where: str) -> Mapping[str, Any]:
        if not isinstance(value, dict):
            raise DepsFormatError(where, f"expected an object, found {_kind(value)}")
        return value

    def field(self, rec: Mapping[str, Any], key: str, where: str) -> Any:
        if key not in rec:
            raise DepsFormatError(where, f"missing field '{key}'")
        return rec[key]

    def int_(self, rec: Mapping[str, Any], key: str, where: str, lo: int | None = 0) -> int:
        v = self.field(rec, key, where)
        if isinstance(v, bool) or not isinstance(v, int):
            raise DepsFormatError(f"{where}.{key}", f"expected an integer, found {_kind(v)}")
        if lo is not None and v < lo:
            raise DepsFormatError(f"{where}.{key}", f"must be at least {lo}, found {v}")
        return v

    def id_(self, rec: Mapping[str, Any], key: str, where: str) -> int:
        """A 64-bit id: a decimal string (the format) or an integer (tolerated)."""
        v = self.field(rec, key, where)
        if isinstance(v, bool):
            raise DepsFormatError(f"{where}.{key}", "expected an id, found a boolean")
        if isinstance(v, int):
            self.integer_ids += 1
            out = v
        elif isinstance(v, str):
            text = v.strip()
            try:
                out = int(text, 16) if text.lower().startswith("0x") else int(text, 10)
            except ValueError:
                raise DepsFormatError(f"{where}.{key}", f"expected a decimal id, found '{v}'") from None
        else:
            raise DepsFormatError(f"{where}.{key}", f"expected an id (string or integer), found {_kind(v)}")
        if not 0 <= out <= _U64:
            raise DepsFormatError(f"{where}.{key}", f"id {out} is not a 64-bit unsigned value")
        return out

    def str_(self, rec: Mapping[str, Any], key: str, where: str, choices: Iterable[str] | None = None) -> str:
        v = self.field(rec, key, where)
        if not isinstance(v, str):
            raise DepsFormatError(f"{where}.{key}", f"expected a string, found {_kind(v)}")
        if choices is not None and v not in choices:
            raise DepsFormatError(f"{where}.{key}", f"'{v}' is not one of {', '.join(choices)}")
        return v

    def dtype(self, rec: Mapping[str, Any], key: str, where: str) -> str:
        v = self.field(rec, key, where)
        if isinstance(v, int) and not isinstance(v, bool):
            return str(v)  # a DataType value; kept as written
        if not isinstance(v, str) or not v:
            raise DepsFormatError(f"{where}.{key}", f"expected a dtype name, found {_kind(v)}")
        return v

    def dims(self, rec: Mapping[str, Any], key: str, where: str) -> tuple[int, ...]:
        v = self.field(rec, key, where)
        if not isinstance(v, list) or any(isinstance(x, bool) or not isinstance(x, int) or x < 0 for x in v):
            raise DepsFormatError(f"{where}.{key}", "expected a list of non-negative integers")
        return tuple(v)

    def region(self, rec: Mapping[str, Any], prefix: str, where: str, dtype: str) -> Region:
        shape = self.dims(rec, f"{prefix}shape", where)
        strides = self.dims(rec, f"{prefix}strides", where)
        if len(shape) != len(strides):
            raise DepsFormatError(where, f"'{prefix}shape' has {len(shape)} dimension(s), "
                                         f"'{prefix}strides' {len(strides)}")
        return Region(dtype, shape, self.int_(rec, f"{prefix}start_offset", where), strides)

    def task(self, value: Any, where: str) -> DepsTask:
        rec = self.obj(value, where)
        kids = self.field(rec, "kernel_ids", where)
        if (not isinstance(kids, list) or len(kids) != 3
                or any(isinstance(k, bool) or not isinstance(k, int) or k < -1 for k in kids)):
            raise DepsFormatError(f"{where}.kernel_ids", "expected [aic, aiv0, aiv1] integers (-1 = inactive)")
        early = self.field(rec, "early_dispatch", where)
        if not isinstance(early, bool):
            raise DepsFormatError(f"{where}.early_dispatch", f"expected true or false, found {_kind(early)}")
        raw_args = self.field(rec, "args", where)
        if not isinstance(raw_args, list):
            raise DepsFormatError(f"{where}.args", f"expected a list, found {_kind(raw_args)}")
        args = []
        for j, a in enumerate(raw_args):
            aw = f"{where}.args[{j}]"
            arec = self.obj(a, aw)
            args.append(DepsArg(self.int_(arec, "idx", aw), self.str_(arec, "type", aw, ARG_TYPES),
                                self.id_(arec, "tensor_id", aw), self.region(arec, "", aw, self.dtype(arec, "dtype", aw))))
        return DepsTask(self.id_(rec, "task_id", where), self.str_(rec, "scope", where, ("auto", "manual")), early,
                        (kids[0], kids[1], kids[2]), self.int_(rec, "block_num", where), tuple(args))

    def tensor(self, value: Any, where: str) -> DepsTensor:
        rec = self.obj(value, where)
        return DepsTensor(self.id_(rec, "tensor_id", where), self.id_(rec, "buffer_addr", where),
                          self.int_(rec, "version", where, lo=None), self.dtype(rec, "dtype", where),
                          self.int_(rec, "buffer_numel", where))

    def edge(self, value: Any, where: str) -> DepsEdge:
        rec = self.obj(value, where)
        source = self.str_(rec, "source", where, SOURCES)
        flags = self.field(rec, "flags", where)
        if not isinstance(flags, list) or any(f not in FLAGS for f in flags):
            raise DepsFormatError(f"{where}.flags", "expected a list of \"wait\" / \"retain\"")
        arg = self.int_(rec, "arg", where, lo=-1)
        if (arg == -1) != (source == "explicit"):
            raise DepsFormatError(f"{where}.arg", f"arg {arg} with source '{source}' (-1 exactly for explicit edges)")
        edge = DepsEdge(self.id_(rec, "pred", where), self.id_(rec, "succ", where), arg, source,
                        tuple(f for f in FLAGS if f in flags))
        if source == "explicit":
            return edge
        consumer = self.region(rec, "consumer_", where, self.dtype(rec, "consumer_dtype", where))
        edge = attrs.evolve(edge, tensor_id=self.id_(rec, "tensor_id", where), consumer=consumer)
        if source == "creator":
            return edge
        producer = self.region(rec, "producer_", where, consumer.dtype)
        return attrs.evolve(edge, overlap=self.str_(rec, "overlap", where, ("covered", "other")), producer=producer)


def _kind(v: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "an integer",
            float: "a number", type(None): "null"}.get(type(v), type(v).__name__)


#: Explicit deps one task record holds inline, and per overflow record (reference §6.1).
INLINE_DEPS, OVERFLOW_DEPS = 64, 582
#: Longest single record (a task, a tensor, an edge) the streaming reader buffers.
MAX_RECORD_CHARS = 16 * 2**20
_CHUNK = 2**20
_WS = " \t\n\r"
_DECODER = json.JSONDecoder()


class _Stream:
    """The text of a deps.json read in chunks: the top-level object is walked by hand and each
    record of a list decoded alone (`json.JSONDecoder.raw_decode`), so a record is checked as soon
    as it is read and neither the whole text nor its JSON tree is ever held."""

    def __init__(self, fh: IO[str]) -> None:
        self.fh = fh
        self.buf = ""
        self.pos = 0
        self.eof = False
        # a cursor for `where`: buffer position `mark` is at line `line`, column `col` of the file
        # (positions asked for only grow, so each character is counted once)
        self.mark = 0
        self.line = 1
        self.col = 1

    def more(self, at_least: int = _CHUNK) -> bool:
        """Read another chunk (at least `at_least` characters, unless the file ends); False at the end."""
        if self.eof:
            return False
        if self.pos > _CHUNK:  # drop what was consumed, moving the cursor to the new start
            self.where(self.pos)
            self.buf = self.buf[self.pos:]
            self.mark -= self.pos
            self.pos = 0
        got = self.fh.read(max(at_least, _CHUNK))
        if not got:
            self.eof = True
            return False
        self.buf += got
        return True

    def where(self, pos: int) -> tuple[int, int]:
        """(line, column) in the file of buffer position `pos` (at or after the last one asked)."""
        if pos < self.mark:  # an error reported behind the cursor: count from the cursor back
            back = self.buf[pos:self.mark]
            lines = back.count("\n")
            if not lines:
                return self.line, self.col - len(back)
            line = self.line - lines
            start = self.buf.rfind("\n", 0, pos) + 1
            return line, pos - start + 1
        part = self.buf[self.mark:pos]
        lines = part.count("\n")
        if lines:
            self.line += lines
            self.col = len(part) - part.rfind("\n")
        else:
            self.col += len(part)
        self.mark = pos
        return self.line, self.col

    def fail(self, message: str, pos: int | None = None) -> DepsFormatError:
        line, col = self.where(self.pos if pos is None else pos)
        return DepsFormatError(f"line {line} col {col}", f"not valid JSON: {message}", line, col)

    def peek(self) -> str:
        """The next character that is not white space ('' at the end of the file)."""
        while True:
            n = len(self.buf)
            while self.pos < n and self.buf[self.pos] in _WS:
                self.pos += 1
            if self.pos < n:
                return self.buf[self.pos]
            if not self.more():
                return ""

    def expect(self, char: str, what: str) -> None:
        if self.peek() != char:
            raise self.fail(f"Expecting {what}")
        self.pos += 1

    def value(self) -> Any:
        """The next JSON value, decoded alone; more text is read while it is cut off by the buffer."""
        if self.peek() == "\ufeff" and self.line == 1 and self.col == 1 and self.pos == 0:
            raise self.fail("Unexpected UTF-8 BOM (decode using utf-8-sig)")
        while True:
            try:
                value, end = _DECODER.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as err:
                cut = err.pos >= len(self.buf) - 16 or err.msg.startswith("Unterminated string")
                if cut and len(self.buf) - self.pos <= MAX_RECORD_CHARS and self.more(len(self.buf) - self.pos):
                    continue
                raise self.fail(err.msg, err.pos) from None
            except RecursionError:
                raise DepsFormatError("", "not valid JSON: nested too deeply") from None
            if end == len(self.buf) and not self.eof and self.more():
                continue  # a number may go on in the next chunk: decode it again with that
            self.pos = end
            return value

    def items(self) -> Iterator[tuple[int, int, int, Any]]:
        """(index, line, column, value) of each element of the list at the current position."""
        self.expect("[", "'['")
        if self.peek() == "]":
            self.pos += 1
            return
        i = 0
        while True:
            self.peek()
            line, col = self.where(self.pos)
            yield i, line, col, self.value()
            i += 1
            c = self.peek()
            self.pos += 1
            if c == "]":
                return
            if c != ",":
                raise self.fail("Expecting ',' delimiter", self.pos - 1)


def _located(err: DepsFormatError, line: int, col: int) -> DepsFormatError:
    """`err` with the line and column of the record it is about (when it has none)."""
    if not err.line:
        err.line, err.col = line, col
    return err


class _Graph:
    """What the streaming reader has accepted so far; each record is checked as it arrives, and
    an edge against tasks[] at once when tasks[] came first (the order pgraph and simpler write)."""

    def __init__(self) -> None:
        self.r = _Reader()
        self.tasks: list[DepsTask] = []
        self.seen: dict[int, int] = {}
        self.repeats: list[tuple[int, int, int, int]] = []   # (index, task id, line, col) of each repeat
        self.tensors: list[DepsTensor] = []
        self.edges: list[DepsEdge] = []
        self.deferred: list[tuple[int, int]] = []  # (line, col) of each edge read before tasks[]
        self.tasks_done = False
        self.pairs: dict[tuple[int, int], int] = {}
        self.allocs: set[int] = set()
        self.explicit: Counter[int] = Counter()

    def task(self, i: int, value: Any, line: int, col: int) -> None:
        t = self.r.task(value, f"tasks[{i}]")
        if t.task_id in self.seen:  # an overflow record of a task already listed, or a duplicate
            first = self.tasks[self.seen[t.task_id]]
            if attrs.evolve(t, args=first.args) != first or (t.args and t.args != first.args):
                raise DepsFormatError(f"tasks[{i}]", f"task {t.task_id} is listed again with other fields "
                                                     f"(an overflow record must repeat its task)")
            self.repeats.append((i, t.task_id, line, col))
            return
        self.seen[t.task_id] = len(self.tasks)
        self.tasks.append(t)

    def edge(self, i: int, value: Any, line: int, col: int) -> None:
        e = self.r.edge(value, f"edges[{i}]")
        if self.tasks_done:
            self.check_edge(i, e)
        else:
            self.deferred.append((line, col))
        self.edges.append(e)

    def tensor(self, i: int, value: Any, line: int, col: int) -> None:
        self.tensors.append(self.r.tensor(value, f"tensors[{i}]"))

    def check_edge(self, i: int, e: DepsEdge) -> None:
        if e.succ not in self.seen:
            raise DepsFormatError(f"edges[{i}].succ", f"task {e.succ} is not in tasks[]")
        if e.pred not in self.seen:
            if e.source == "explicit":
                raise DepsFormatError(f"edges[{i}].pred", f"explicit dep on task {e.pred}, which is not in tasks[] "
                                                          f"(only alloc tasks may be absent; they take no deps)")
            self.allocs.add(e.pred)
        if e.source == "explicit":
            self.explicit[e.succ] += 1
        self.pairs[(e.pred, e.succ)] = self.pairs.get((e.pred, e.succ), 0) + 1

    def finish(self) -> DepsGraph:
        if not self.tasks_done:  # edges[] came before tasks[]: check them now
            self.tasks_done = True
        for i, (e, (line, col)) in enumerate(zip(self.edges, self.deferred)):
            try:
                self.check_edge(i, e)
            except DepsFormatError as err:
                raise _located(err, line, col) from None
        self.duplicates()
        quirks = Quirks(self.r.integer_ids, len(self.repeats), sum(n - 1 for n in self.pairs.values()),
                        len(self.allocs))
        return DepsGraph(tuple(self.tasks), tuple(self.tensors), tuple(self.edges), quirks)

    def duplicates(self) -> None:
        """A repeated task record is an overflow record only while the task's explicit deps need
        one: 64 inline, 582 per overflow record. Any further repeat is a duplicate record."""
        count: Counter[int] = Counter()
        for i, tid, line, col in self.repeats:
            count[tid] += 1
            deps = self.explicit[tid]
            allowed = -(-max(0, deps - INLINE_DEPS) // OVERFLOW_DEPS)
            if count[tid] > allowed:
                first = self.seen[tid]
                fits = "inline" if allowed == 0 else f"in {allowed + 1} records"
                err = DepsFormatError(f"tasks[{i}]", f"duplicate record of task {tid} (first listed at tasks[{first}]): "
                                                     f"its {deps} explicit dep(s) fit {fits} ({INLINE_DEPS} inline, "
                                                     f"{OVERFLOW_DEPS} per overflow record)")
                raise _located(err, line, col)


def parse(text: str) -> DepsGraph:
    """Read a deps.json text into a DepsGraph (`parse_stream` of the text)."""
    return parse_stream(io.StringIO(text))


def parse_stream(fh: IO[str]) -> DepsGraph:
    """Read a deps.json from the text stream `fh` into a DepsGraph (see the module docstring for
    the quirks accepted), record by record: a malformed record is reported when it is read, with
    the line and column where it starts, without reading the rest of the file.

    Raises DepsFormatError: invalid JSON (with line/column), a missing or mistyped field, an
    edge whose succ is not a task, an overflow record that disagrees with its task or that the
    task's explicit deps do not need (a duplicate record), a top-level list given twice."""
    st = _Stream(fh)
    g = _Graph()
    if st.peek() != "{":
        value = st.value()
        raise DepsFormatError("", f"expected an object, found {_kind(value)}")
    st.pos += 1
    given: set[str] = set()
    readers: dict[str, Callable[[int, Any, int, int], None]] = {"tasks": g.task, "edges": g.edge, "tensors": g.tensor}
    while True:
        if st.peek() == "}":
            st.pos += 1
            break
        if given:
            st.expect(",", "',' delimiter")
        if st.peek() != '"':
            raise st.fail("Expecting property name enclosed in double quotes")
        key = st.value()
        st.expect(":", "':' delimiter")
        if key in given and key in readers:
            raise DepsFormatError(key, "listed twice")
        given.add(key)
        if key not in readers:
            st.value()  # another field: read and ignored
            continue
        if st.peek() != "[":
            v = st.value()
            raise DepsFormatError(key, f"expected a list, found {_kind(v)}")
        for i, line, col, value in st.items():
            try:
                readers[key](i, value, line, col)
            except DepsFormatError as err:
                raise _located(err, line, col) from None
        if key == "tasks":
            g.tasks_done = True
    if st.peek():
        raise st.fail("Extra data")
    for key in ("tasks", "edges"):
        if key not in given:
            raise DepsFormatError(key, "missing")
    return g.finish()


# ---- writing ---------------------------------------------------------------------------------


def _region_json(prefix: str, reg: Region) -> dict[str, Any]:
    return {f"{prefix}shape": list(reg.shape), f"{prefix}start_offset": reg.start_offset,
            f"{prefix}strides": list(reg.strides)}


def task_json(t: DepsTask) -> dict[str, Any]:
    """One tasks[] record (ids as strings)."""
    return {"task_id": str(t.task_id), "scope": t.scope, "early_dispatch": t.early_dispatch,
            "kernel_ids": list(t.kernel_ids), "block_num": t.block_num,
            "args": [{"idx": a.idx, "type": a.type, "tensor_id": str(a.tensor_id), "dtype": a.region.dtype,
                      **_region_json("", a.region)} for a in t.args]}


def edge_json(e: DepsEdge) -> dict[str, Any]:
    """One edges[] record (ids as strings)."""
    out: dict[str, Any] = {"pred": str(e.pred), "succ": str(e.succ), "arg": e.arg, "source": e.source,
                           "flags": list(e.flags)}
    if e.consumer is not None:
        out.update({"tensor_id": str(e.tensor_id), "consumer_dtype": e.consumer.dtype,
                    **_region_json("consumer_", e.consumer)})
    if e.producer is not None:
        out.update({"overlap": e.overlap, **_region_json("producer_", e.producer)})
    return out


def render(g: DepsGraph) -> str:
    """The deps.json text: one record per line, fields in the format's order (deterministic)."""
    def block(key: str, rows: list[dict[str, Any]]) -> str:
        body = ",\n".join(json.dumps(row, separators=(", ", ": ")) for row in rows)
        return f"\"{key}\": [\n{body}\n]" if rows else f"\"{key}\": []"

    tensors = [{"tensor_id": str(t.tensor_id), "buffer_addr": str(t.buffer_addr), "version": t.version,
                "dtype": t.dtype, "buffer_numel": t.buffer_numel} for t in g.tensors]
    return ("{" + block("tasks", [task_json(t) for t in g.tasks]) + ",\n" + block("tensors", tensors) + ",\n"
            + block("edges", [edge_json(e) for e in g.edges]) + "}\n")
