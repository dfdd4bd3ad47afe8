"""The block tree of the generated entry and where each TaskId lives.

The generated C++ nests exactly like the spec: scope blocks (`PTO2_SCOPE`), scope-level
`for` loops (a loop with a body scope gets one `PTO2_SCOPE()` per iteration, a loop inside a
manual scope gets none) and dispatches (a dispatch with task axes is a plain C++ `for` nest,
never a runtime scope). The tree is rebuilt from the IR: every dispatch knows its scope and
loops, and dispatches are in program order, so a container sits where its first dispatch is.

TaskId storage (simpler: a TaskId is a C++ local of the `PTO2_SCOPE { }` that produced it):
- a single-task tile set (`at`, `spmd`, or a dummy without index) whose consumers all sit in
  the producer's block or blocks nested in it keeps a plain local `PTO2TaskId <name>_tid`;
- every other tile set lives in `PTO2TaskId <name>_tids[N]`, one slot per logical tile (an
  SPMD wave's tiles all hold that wave's one TaskId, like the reference's `out_tids[50]`),
  initialised to `PTO2TaskId::invalid()` in the innermost block enclosing the producer and
  all consumers, just before the producer's first dispatch;
- a TaskId loop carry is `PTO2TaskId <carry>_tids[N]` with one slot per *task* (a carry
  dep names each task once, as pgraph counts it), declared just before the loop, copied from
  its initial tile set and refreshed from its `then` tile set at the end of every iteration.
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Set as AbstractSet

import attrs

from pgraph import records
from pgraph.expr import Expr, Num
from pgraph.ir import program as ir
from pgraph.kinds import CarryKind, DepKind, InternalError, NodeKind, TaskKind

from .cexpr import Interval, add, mul, simplify, sub

Key = tuple[NodeKind, int | str]


class SlotKind(enum.StrEnum):
    """How a task's TaskIds are stored in the generated code."""

    LOCAL = "local"   # one `PTO2TaskId`
    ARRAY = "array"   # one slot per tile
    CARRY = "carry"   # a loop-carried TaskId slot
Path = tuple[Key, ...]


@records.shared_repr
@attrs.define(repr=False)
class Node:
    """A block of the generated code: a scope (id), a loop (id), a dispatch (name) or an
    allocation site (`alloc_ident`)."""

    kind: NodeKind
    ident: int | str
    children: list[Node] = attrs.field(factory=list)

    @property
    def key(self) -> Key:
        """The (kind, ident) pair paths are made of."""
        return (self.kind, self.ident)

    @property
    def num(self) -> int:
        """The scope or loop id."""
        assert isinstance(self.ident, int)
        return self.ident

    @property
    def name(self) -> str:
        """The dispatch name."""
        assert isinstance(self.ident, str)
        return self.ident


def _convert(node: ir.Node, path: Path, paths: dict[Key, Path]) -> Node:
    """The layout node of an IR tree node; `paths` gets every node's parent path."""
    ident = alloc_ident(node.ident) if node.kind is NodeKind.ALLOC else node.ident  # type: ignore[arg-type]
    out = Node(node.kind, ident)  # type: ignore[arg-type]
    paths[out.key] = path
    inner = (*path, out.key)
    out.children = [_convert(c, inner, paths) for c in node.children]
    return out


def alloc_ident(key: ir.AllocKey) -> str:
    """The layout identifier of an allocation site (a string, so paths stay hashable and printable)."""
    sid, group, loops = key
    return f"{sid}/{group}/{','.join(map(str, loops))}"


def _layout(p: ir.Program) -> tuple[Node, dict[Key, Path]]:
    cached = p.__dict__.get("_a2a3_layout")
    if cached is None:
        paths: dict[Key, Path] = {}
        root = _convert(p.tree, (), paths)
        cached = (root, paths)
        object.__setattr__(p, "_a2a3_layout", cached)
    return cached  # type: ignore[no-any-return]


def dispatch_path(p: ir.Program, d: ir.Dispatch) -> Path:
    """Container keys from the entry scope down to the block holding `d` (excluded)."""
    return _layout(p)[1][(NodeKind.DISPATCH, d.name)]


def alloc_path(p: ir.Program, key: ir.AllocKey) -> Path:
    """The block holding the allocation site of group `key` (its buffers' C++ names live there)."""
    return _layout(p)[1][(NodeKind.ALLOC, alloc_ident(key))]


def build_tree(p: ir.Program) -> Node:
    """The block tree of the generated code: the Program's program-order tree (`ir.Node`), so
    scopes and loops without tasks and the allocation sites keep their places."""
    root = _layout(p)[0]
    if root.key != (NodeKind.SCOPE, 0):
        raise InternalError("the program tree does not start at the entry scope")
    return root


def common_prefix(paths: list[Path]) -> Path:
    """The longest path every one of `paths` starts with."""
    out: list[Key] = []
    for keys in zip(*paths, strict=False):
        if any(k != keys[0] for k in keys):
            break
        out.append(keys[0])
    return tuple(out)


@records.value
@attrs.frozen(repr=False, eq=False)
class Storage:
    """Where the TaskIds of one tile set (or one TaskId carry) live in the generated code.

    kind 'local' (one `PTO2TaskId`), 'array' (one slot per tile) or 'carry'. `home` is the
    block path it is declared in and `before` the child key of that block it precedes.
    `valid` is True when every read of it is known to be a valid id (no `is_valid()` guard).
    """

    name: str
    kind: SlotKind
    cname: str
    size: int
    home: Path
    before: Key
    valid: bool


is_single = ir.single_task  # one TaskId for the whole tile set: `at`, `spmd`, or a dummy without an index


def tile_count(ts: ir.TileSet) -> int:
    """Number of logical tiles (slots of its TaskId array)."""
    return math.prod(a.size for a in ts.axes) if ts.axes else 1


def slots(ts: ir.TileSet) -> int:
    """TaskId slots a tile set needs: 1 when single, else one per tile."""
    return 1 if is_single(ts) else tile_count(ts)


task_slots = ir.task_slots  # distinct tasks of a tile set: the slots of a TaskId carry


def tile_index(ts: ir.TileSet, coords: list[Expr]) -> Expr:
    """Row-major slot of a tile in `ts`'s TaskId array: sum of (coord - lo) * stride."""
    out: Expr = Num(0, ts.span)
    stride = 1
    for a, c in reversed(list(zip(ts.axes, coords, strict=True))):
        out = add(mul(sub(c, Num(a.lo, ts.span)), Num(stride, ts.span)), out)
        stride *= a.size
    return simplify(out)


def axis_range(a: ir.IAxis) -> Interval:
    """Values of an index axis as an interval."""
    return Interval(a.lo, a.hi - 1)


def _loop_paths(p: ir.Program) -> dict[int, Path]:
    """Path of the block holding each loop (its parent block)."""
    return {int(key[1]): path for key, path in _layout(p)[1].items() if key[0] is NodeKind.LOOP}


def _body_path(p: ir.Program, lp: ir.Loop, parent: Path) -> Path:
    body: Path = (*parent, (NodeKind.LOOP, lp.id))
    return (*body, (NodeKind.SCOPE, lp.body_scope)) if lp.body_scope is not None else body


def plan_storage(p: ir.Program, names: set[str]) -> tuple[dict[str, Storage], dict[str, Storage], dict[int, Path]]:
    """Storage of every consumed tile set and every TaskId carry.

    Returns (tile set storages, carry storages, loop parent paths). `names` is the set of
    C++ identifiers already taken; chosen names are added to it.
    """
    paths = {d.name: dispatch_path(p, d) for d in p.dispatches}
    loop_parent = _loop_paths(p)
    consumers: dict[str, list[Path]] = {}
    for d in p.dispatches:
        if d.kind is TaskKind.SPMD and d.block_count == 0:
            continue  # an empty grid submits nothing and reads no TaskId
        for dep in d.deps:
            if dep.kind is DepKind.TILES:
                consumers.setdefault(dep.target, []).append(paths[d.name])
    carries: dict[str, Storage] = {}
    for lp in p.loops:
        parent = loop_parent.get(lp.id)
        if parent is None:
            continue
        for c in lp.carries:
            if c.kind is not CarryKind.TASK:
                continue
            consumers.setdefault(c.init, []).append(parent)
            consumers.setdefault(c.next, []).append(_body_path(p, lp, parent))
            size = max(task_slots(p, p.tilesets[c.init]), task_slots(p, p.tilesets[c.next]))
            carries[c.name] = Storage(c.name, SlotKind.CARRY, unique(f"{c.name}_tids", names, derived=True), size, parent,
                                      (NodeKind.LOOP, lp.id), False)
    out: dict[str, Storage] = {}
    for name, ts in p.tilesets.items():
        uses = consumers.get(name)
        if not uses or not ts.dispatches:
            continue
        first = p.dispatch(ts.dispatches[0])
        producer_paths = [paths[dn] for dn in ts.dispatches]
        local = is_single(ts) and all(u[:len(producer_paths[0])] == producer_paths[0] for u in uses)
        if local:
            home = producer_paths[0]
            valid = (first.kind is not TaskKind.DUMMY or not first.deps) and not (first.kind is TaskKind.SPMD and first.block_count == 0)
            out[name] = Storage(name, SlotKind.LOCAL, unique(f"{name}_tid", names, derived=True), 1, home, (NodeKind.DISPATCH, first.name), valid)
            continue
        home = common_prefix([*producer_paths, *uses])
        fp = paths[first.name]
        before = fp[len(home)] if len(fp) > len(home) else (NodeKind.DISPATCH, first.name)
        out[name] = Storage(name, SlotKind.ARRAY, unique(f"{name}_tids", names, derived=True), slots(ts), home, before, False)
    return out, carries, loop_parent


#: C++ keywords and names the generated file uses, never given to spec identifiers.
RESERVED = frozenset((
    "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor", "bool", "break", "case",
    "catch", "char", "char16_t", "char32_t", "class", "compl", "const", "constexpr", "const_cast",
    "continue", "decltype", "default", "delete", "do", "double", "dynamic_cast", "else", "enum", "explicit",
    "export", "extern", "false", "float", "for", "friend", "goto", "if", "inline", "int", "long", "mutable",
    "namespace", "new", "noexcept", "not", "not_eq", "nullptr", "operator", "or", "or_eq", "private",
    "protected", "public", "register", "reinterpret_cast", "return", "short", "signed", "sizeof", "static",
    "static_assert", "static_cast", "struct", "switch", "template", "this", "thread_local", "throw", "true",
    "try", "typedef", "typeid", "typename", "union", "unsigned", "using", "virtual", "void", "volatile",
    "wchar_t", "while", "int8_t", "int16_t", "int32_t", "int64_t", "uint8_t", "uint16_t", "uint32_t",
    "uint64_t", "size_t", "orch_args", "main", "std", "printf", "NULL",
    # API and helper names the generated file uses
    "ChipTensor", "ChipTaskArgs", "CoreTaskArgs", "TaskOutputTensors", "TensorCreateInfo", "PTO2TaskId",
    "DataType", "MixedKernels", "PTO2ScopeMode", "PTO2OrchestrationConfig", "alloc_tensors", "from_u64",
    "to_u64", "rt_submit_task", "rt_submit_aic_task", "rt_submit_aiv_task", "rt_submit_dummy_task",
    "INT64_MAX", "INT64_MIN", "pgraph_floordiv", "pgraph_floormod",
))
#: Numbered names of the generated file (params_t<n>, task_<n>_outs, alloc_<k>, ...).
GENERATED = re.compile(r"(params_t\d+|task_\d+_outs|alloc_\d+|mixed_\d+|params_phase_fence_barrier_\d+"
                       r"|phase_fence_barrier_\d+_outs)(_\w*)?")
#: Macros a spec identifier must not spell: those of the headers the generated file includes
#: (<stddef.h>, <stdint.h>, <stdio.h>; the runtime's pto_orchestration_api.h and what it includes:
#: <assert.h>, <stdarg.h>, <string.h>), the runtime header's own, and GCC's predefined ones
#: without underscores (`linux`, `unix` in the GNU dialects). `EOF` as a tensor name was
#: replaced by `(-1)` and broke the file. C++20 keywords too, for a newer compiler.
MACROS = frozenset((
    "EOF", "BUFSIZ", "FILENAME_MAX", "FOPEN_MAX", "L_tmpnam", "TMP_MAX", "SEEK_SET", "SEEK_CUR", "SEEK_END",
    "stdin", "stdout", "stderr", "errno", "assert", "offsetof", "va_start", "va_end", "va_arg", "va_copy",
    "EXIT_SUCCESS", "EXIT_FAILURE", "RAND_MAX", "MB_CUR_MAX", "CHAR_BIT", "CHAR_MIN", "CHAR_MAX", "SCHAR_MIN",
    "SCHAR_MAX", "UCHAR_MAX", "SHRT_MIN", "SHRT_MAX", "USHRT_MAX", "INT_MIN", "INT_MAX", "UINT_MAX", "LONG_MIN",
    "LONG_MAX", "ULONG_MAX", "LLONG_MIN", "LLONG_MAX", "ULLONG_MAX",
    *(f"{p}INT{n}_{x}" for p in ("", "U") for n in (8, 16, 32, 64) for x in ("MIN", "MAX", "C")),
    *(f"{p}INT_{k}{n}_{x}" for p in ("", "U") for k in ("LEAST", "FAST") for n in (8, 16, 32, 64)
      for x in ("MIN", "MAX")),
    "INTPTR_MIN", "INTPTR_MAX", "UINTPTR_MAX", "INTMAX_MIN", "INTMAX_MAX", "UINTMAX_MAX", "INTMAX_C", "UINTMAX_C",
    "PTRDIFF_MIN", "PTRDIFF_MAX", "SIZE_MAX", "SIG_ATOMIC_MIN", "SIG_ATOMIC_MAX", "WCHAR_MIN", "WCHAR_MAX",
    "WINT_MIN", "WINT_MAX", "linux", "unix", "i386",
    "MAX_TENSOR_ARGS", "MAX_SCALAR_ARGS", "rt_report_fatal", "LOG_ERROR", "LOG_WARN", "LOG_INFO", "LOG_DEBUG",
    "LOG_TIMING", "PTO2_SCOPE", "PTO2_SCOPE_GUARD", "PTO2_SCOPE_CAT", "PTO2_SCOPE_CAT2", "PTO2_LOG_VIA",
    "char8_t", "concept", "consteval", "constinit", "co_await", "co_return", "co_yield", "requires",
    "import", "module", "final", "override",
))
#: Names whose start is reserved: to the C++ implementation ([lex.name]: two underscores, or an
#: underscore and a capital, as `__LINE__`, `_GLIBCXX_ASSERT`), to the runtime's macros (`PTO2_`),
#: to <inttypes.h>'s format macros (`PRId64`). A trailing `_` cannot fix such a name: a spec
#: identifier that starts so is spelled with a `u` in front (`spec_base`).
PREFIXED = re.compile(r"(__|_[A-Z]|PTO2_|(PRI|SCN)[diouxX](8|16|32|64|MAX|PTR|LEAST|FAST)).*")
#: The endings of the names the generator derives from a chosen name (`<t>_ci`, `<t>_ci_shapes`,
#: `<view>_shapes`, `<view>_offsets`, `<view>_lo<i>`/`_hi<i>`, `<set>_tid(s)`, `<carry>_tids`,
#: `<ext>_dim<k>`, `<var>_loop`, `task_<n>_outs`): a spec identifier that ends so takes a
#: trailing `_` (`spec_base`), so a derived name can never equal a spec name (a tensor
#: `u_ci_shapes` once shadowed the shapes array of the TensorCreateInfo of `u`).
DERIVED = re.compile(r".*_(ci|shapes|offsets|tids?|outs|loop|dim\d+|lo\d+|hi\d+|deps|deps_count|fids\w*)")
#: Kernel parameter names that the generator's own `params_t<n>_<word>` names use.
PARAM_WORDS = frozenset(("deps", "deps_count", "fids"))


def is_reserved(name: str) -> bool:
    """True for C++ keywords, API names, macros, names reserved to the implementation and the
    generated file's numbered names."""
    return (name in RESERVED or name in MACROS or GENERATED.fullmatch(name) is not None
            or PREFIXED.fullmatch(name) is not None)


def spec_base(name: str) -> str:
    """The spelling a spec identifier starts from: itself; `u` and itself when its start is
    reserved (`PREFIXED`: `_Tmp` is `u_Tmp`); itself and a trailing `_` when it is otherwise
    reserved (`EOF_`, `int_`, `alloc_0_`) or ends like a derived name (`u_ci_shapes_`)."""
    if PREFIXED.fullmatch(name):
        return f"u{name}"
    return f"{name}_" if is_reserved(name) or DERIVED.fullmatch(name) else name


def spec_mangled(name: str) -> bool:
    """Whether `spec_base` changes the spec identifier `name`."""
    return spec_base(name) != name


def param_part(name: str) -> str:
    """A kernel parameter name inside `params_t<n>_<name>`: with a trailing `_` when the
    generator uses that word itself (`params_t<n>_deps`) or the name ends like a derived name."""
    return f"{name}_" if name in PARAM_WORDS or name.startswith("fids") or DERIVED.fullmatch(name) else name


def unique(want: str, names: set[str], generated: bool = False, derived: bool = False) -> str:
    """`want`, or `want_2`, `want_3`... whichever is free; the result is added to `names`.

    A spec identifier `want` gets `spec_base` first (`u_X`, `EOF_`, `u_ci_shapes_`); a name
    `derived` from a chosen one (`<t>_ci`, `<set>_tids`) a trailing `_` when reserved; a name the
    generator builds itself (`generated`) only has to be free.
    """
    if generated:
        base = want
    elif derived:
        base = f"{want}_" if is_reserved(want) else want
    else:
        base = spec_base(want)
    out, n = base, 2
    while out in names:
        out = f"{base}_{n}"
        n += 1
    names.add(out)
    return out


def local_name(want: str, taken: AbstractSet[str], busy: set[str], spec: bool = False) -> str:
    """A loop-local identifier, added to `busy`: `want`, else `want_2`, `want_3`..., the first
    that is neither a function-wide name (`taken`), nor in `busy` (the C++ names in use where it
    is declared), nor reserved (`is_reserved`).

    When the numbered forms are all reserved (`alloc_0` gives `alloc_0_2`, `alloc_0_3`..., every
    one a generated name's form), the rule of `unique` for a reserved name applies instead:
    `want_`, else `want__2`, `want__3`... A `spec` identifier (a dep loop's tile variable) that
    `spec_base` changes starts from that spelling (`EOF_`, `u_X`), then takes the free form.
    """
    if spec and spec_mangled(want):
        base = out = spec_base(want)
        n = 2
        while out in taken or out in busy:
            out = f"{base}_{n}"
            n += 1
        busy.add(out)
        return out
    out, n = want, 2
    while out in taken or out in busy or is_reserved(out):
        out = f"{want}_{n}"
        n += 1
        if GENERATED.fullmatch(out):  # every later numbered form matches too: it would never end
            base = out = f"{want}_"
            n = 2
            while out in taken or out in busy:
                out = f"{base}_{n}"
                n += 1
            break
    busy.add(out)
    return out
