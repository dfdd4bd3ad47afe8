"""Random valid .pgl programs, and what each one means, for the differential test.

A program is built as a small tree of Python objects (`Entry` of blocks, tasks, loops), drawn
through a `Chooser` (hypothesis draws in the test, `random.Random` in the long run), rendered
to .pgl text, and interpreted here by `run_model`: the compute tasks in submission order, each
with its kernel, block count and the concrete elements every block reads, writes or adds to,
on buffers named the way the language reference defines them (docs/language.md §5, §8, §10,
§11, §14.3). This file is the second implementation: it shares no code with `pgraph`, and the
race oracle (`tests/differential/oracle.py`) uses nothing but its output and the recorded
runtime's edges.

The covered language: auto, manual and nested scopes; loops (scoped, `unscoped`, inside a manual
scope, nested, empty) with TaskId and tensor carries; `at`, `spmd`, `parallel`, `dummy` and
`tiles` with several waves (`parallel`, `spmd`, `spmd(v)`, empty waves); deps with every
selection form; `early` and `sync_start`; `taskids`; views (row-major reshapes); indirect
regions; atomic adds; explicit access clauses and item loops; scalar arguments; allocations
before and after loops. Sizes are small (ROWS x COLS f32 tensors), so a program expands in
milliseconds and its C++ compiles in a fraction of a second.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Iterator, Sequence
from typing import Protocol, TypeVar

import attrs

T = TypeVar("T")

ROWS = 4
COLS = 8
SHAPE = (ROWS, COLS)

# ---- choices ---------------------------------------------------------------------------------


class Chooser(Protocol):
    """Where the generator's decisions come from (hypothesis data or a seeded Random)."""

    def int(self, lo: int, hi: int) -> int:
        """An integer lo <= v <= hi."""

    def bool(self, p: float) -> bool:
        """True with probability about p."""


class RandomChooser:
    """Decisions from a seeded `random.Random` (the long run: fast, no shrinking)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def int(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)

    def bool(self, p: float) -> bool:
        return self.rng.random() < p


class DataChooser:
    """Decisions drawn from hypothesis `st.data()` (the CI run: failures shrink)."""

    def __init__(self, data: object) -> None:
        from hypothesis import strategies as st

        self.data = data
        self.st = st

    def int(self, lo: int, hi: int) -> int:
        return self.data.draw(self.st.integers(lo, hi))  # type: ignore[attr-defined,no-any-return]

    def bool(self, p: float) -> bool:
        # integers shrink towards 0: "False" is the simple side unless p is large
        if p >= 0.5:
            return self.data.draw(self.st.integers(0, 99)) < round(p * 100)  # type: ignore[attr-defined,no-any-return]
        return self.data.draw(self.st.integers(0, 99)) >= 100 - round(p * 100)  # type: ignore[attr-defined,no-any-return]


def pick(ch: Chooser, seq: Sequence[T]) -> T:
    """One element of a non-empty sequence."""
    return seq[ch.int(0, len(seq) - 1)]


# ---- expressions -----------------------------------------------------------------------------


@attrs.frozen
class Var:
    name: str


@attrs.frozen
class Lit:
    value: int


@attrs.frozen
class Add:
    a: Expr
    b: Expr


@attrs.frozen
class Mul:
    a: Expr
    k: int


@attrs.frozen
class Mod:
    a: Expr
    m: int


Expr = Var | Lit | Add | Mul | Mod


def render_expr(e: Expr) -> str:
    """The .pgl text of an expression (fully parenthesised where it matters)."""
    if isinstance(e, Var):
        return e.name
    if isinstance(e, Lit):
        return str(e.value)
    if isinstance(e, Add):
        return f"({render_expr(e.a)} + {render_expr(e.b)})"
    if isinstance(e, Mul):
        return f"{render_expr(e.a)} * {e.k}"
    return f"({render_expr(e.a)}) % {e.m}"


def eval_expr(e: Expr, env: dict[str, int]) -> int:
    """The value of an expression (all operands are non-negative, so % is the same in every language)."""
    if isinstance(e, Var):
        return env[e.name]
    if isinstance(e, Lit):
        return e.value
    if isinstance(e, Add):
        return eval_expr(e.a, env) + eval_expr(e.b, env)
    if isinstance(e, Mul):
        return eval_expr(e.a, env) * e.k
    return eval_expr(e.a, env) % e.m


def expr_vars(e: Expr) -> set[str]:
    """The variable names an expression uses."""
    if isinstance(e, Var):
        return {e.name}
    if isinstance(e, Lit):
        return set()
    if isinstance(e, Add):
        return expr_vars(e.a) | expr_vars(e.b)
    return expr_vars(e.a)


# ---- regions ---------------------------------------------------------------------------------


@attrs.frozen
class Full:
    """`:`"""


@attrs.frozen
class Index:
    """`e`: one index (drops the dimension)."""

    e: Expr


@attrs.frozen
class Span:
    """`e +: n`"""

    e: Expr
    n: int


@attrs.frozen
class Range:
    """`a:b` with constants."""

    a: int
    b: int


Slice = Full | Index | Span | Range


@attrs.frozen
class Region:
    """`name[slices] indirect(idx)`; slices None is the bare name (the whole tensor)."""

    name: str
    slices: tuple[Slice, ...] | None = None
    indirect: str | None = None


def render_region(r: Region) -> str:
    text = r.name
    if r.slices is not None:
        parts = []
        for s in r.slices:
            if isinstance(s, Full):
                parts.append(":")
            elif isinstance(s, Index):
                parts.append(render_expr(s.e))
            elif isinstance(s, Span):
                parts.append(f"{render_expr(s.e)} +: {s.n}")
            else:
                parts.append(f"{s.a}:{s.b}")
        text += "[" + ", ".join(parts) + "]"
    if r.indirect is not None:
        text += f" indirect({r.indirect})"
    return text


def region_vars(r: Region) -> set[str]:
    out: set[str] = set()
    for s in r.slices or ():
        if isinstance(s, (Index, Span)):
            out |= expr_vars(s.e)
    return out


def region_box(r: Region, shape: tuple[int, ...], env: dict[str, int]) -> tuple[tuple[int, int], ...]:
    """The half-open box of a region on a tensor of `shape` (docs/language.md §11.1)."""
    if r.slices is None:
        return tuple((0, d) for d in shape)
    box = []
    for s, d in zip(r.slices, shape, strict=True):
        if isinstance(s, Full):
            box.append((0, d))
        elif isinstance(s, Index):
            v = eval_expr(s.e, env)
            box.append((v, v + 1))
        elif isinstance(s, Span):
            v = eval_expr(s.e, env)
            box.append((v, v + s.n))
        else:
            box.append((s.a, s.b))
    return tuple(box)


def box_elements(box: tuple[tuple[int, int], ...], shape: tuple[int, ...]) -> frozenset[int]:
    """The row-major flat indices of every element in `box`."""
    strides = [math.prod(shape[i + 1:]) for i in range(len(shape))]
    return frozenset(sum(i * s for i, s in zip(idx, strides, strict=True))
                     for idx in itertools.product(*(range(lo, hi) for lo, hi in box)))


# ---- program tree ----------------------------------------------------------------------------

KERNELS = {
    # name: (core, [(param, direction)], n scalars)
    "k_copy": ("aiv", [("src", "in"), ("dst", "out")], 0),
    "k_upd": ("aiv", [("a", "inout")], 0),
    "k_acc": ("aic", [("src", "in"), ("acc", "atomic_add")], 0),
    "k_mix": ("mix", [("src", "in"), ("dst", "out")], 0),
    "k_fill": ("aiv", [("dst", "out")], 1),
    "k_gather": ("aiv", [("src", "in"), ("idx", "in"), ("dst", "out")], 0),
    "k_scatter": ("aiv", [("src", "in"), ("idx", "in"), ("dst", "inout")], 0),
}

KERNEL_DECLS = """\
kernel k_copy aiv (src : in f32, dst : out f32)
kernel k_upd aiv (a : inout f32)
kernel k_acc aic (src : in f32, acc : atomic_add f32)
kernel k_mix mix (src : in f32, dst : out f32)
kernel k_fill aiv (dst : out f32, n : scalar i64)
kernel k_gather aiv (src : in f32, idx : in i32, dst : out f32)
kernel k_scatter aiv (src : in f32, idx : in i32, dst : inout f32)
"""


@attrs.define
class Clause:
    """An explicit access clause `reads|writes|atomic_add REGION` (in an item loop when `item`)."""

    word: str
    region: Region
    item: tuple[str, int] | None = None  # (var, count): `for var in 0..count { clause }`


@attrs.define
class Call:
    kernel: str
    args: list[Region | Expr]
    clauses: list[Clause] = attrs.Factory(list)


@attrs.define
class Sel:
    """One axis of a dep selection: `e`, `a..b`, `a +: n` or `*`."""

    kind: str  # "idx" | "range" | "span" | "star"
    e: Expr | None = None
    a: int = 0
    b: int = 0


@attrs.define
class Dep:
    name: str
    sel: list[Sel] | None = None


@attrs.define
class Wave:
    name: str
    restrict: list[tuple[str, int, int]]
    kind: str  # "parallel" | "spmd" | "spmd(...)"
    block_axes: list[str]  # for spmd(v, ...)
    deps: list[Dep]
    flags: list[str]


@attrs.define
class Task:
    kind: str  # at | spmd | parallel | dummy | tiles
    name: str
    axes: list[tuple[str, int, int]]
    call: Call | None
    deps: list[Dep]
    flags: list[str]
    waves: list[Wave] = attrs.Factory(list)


@attrs.define
class TensorDecl:
    name: str
    shape: tuple[int, ...]


@attrs.define
class ViewDecl:
    name: str
    base: str
    shape: tuple[int, ...]


@attrs.define
class TaskIds:
    names: list[str]


@attrs.define
class Carry:
    name: str
    init: str
    next: str
    tensor: bool


@attrs.define
class Block:
    """A scope (`auto`/`manual`), a loop body or the entry; `items` in order."""

    kind: str  # entry | auto | manual | loop | phase
    items: list[Item] = attrs.Factory(list)
    # loops only
    var: str = ""
    lo: int = 0
    hi: int = 0
    unscoped: bool = False
    carries: list[Carry] = attrs.Factory(list)
    name: str = ""  # phase name


Item = Block | Task | TensorDecl | ViewDecl | TaskIds


@attrs.define
class Program:
    entry: Block
    externals: list[TensorDecl]
    #: diagnostics the planner must report (a construct the generator made on purpose)
    expect: set[str] = attrs.Factory(set)


# ---- rendering -------------------------------------------------------------------------------


def render(p: Program) -> str:
    """The .pgl text of a program."""
    out = [f"# differential-test program\nconst ROWS = {ROWS}\nconst COLS = {COLS}\n"]
    for t in p.externals:
        dtype = "i32" if t.name == "idx" else "f32"
        out.append(f"tensor {t.name} : {dtype}[{', '.join(map(str, t.shape))}] external\n")
    out.append("scalar nsc : i64 external\n")
    out.append(KERNEL_DECLS)
    out.append("entry main {\n")
    _render_items(p.entry.items, 1, out)
    out.append("}\n")
    return "".join(out)


def _deps_text(deps: list[Dep]) -> str:
    if not deps:
        return ""
    parts = []
    for d in deps:
        if d.sel is None:
            parts.append(d.name)
            continue
        sels = []
        for s in d.sel:
            if s.kind == "idx":
                assert s.e is not None
                sels.append(render_expr(s.e))
            elif s.kind == "range":
                sels.append(f"{s.a}..{s.b}")
            elif s.kind == "span":
                sels.append(f"{s.a} +: {s.b - s.a}")
            else:
                sels.append("*")
        parts.append(f"{d.name}[{', '.join(sels)}]")
    return " deps(" + ", ".join(parts) + ")"


def _axes_text(axes: list[tuple[str, int, int]]) -> str:
    return "[" + ", ".join(f"{v} in {lo}..{hi}" for v, lo, hi in axes) + "]"


def _call_lines(call: Call, ind: str) -> list[str]:
    lines = []
    for c in call.clauses:
        if c.item is None:
            lines.append(f"{ind}{c.word} {render_region(c.region)}")
        else:
            v, n = c.item
            lines.append(f"{ind}for {v} in 0..{n} {{ {c.word} {render_region(c.region)} }}")
    args = [render_region(a) if isinstance(a, Region) else render_expr(a) for a in call.args]
    lines.append(f"{ind}call {call.kernel}({', '.join(args)})")
    return lines


def _render_items(items: list[Item], level: int, out: list[str]) -> None:
    ind = "  " * level
    for it in items:
        if isinstance(it, TensorDecl):
            out.append(f"{ind}tensor {it.name} : f32[{', '.join(map(str, it.shape))}]\n")
        elif isinstance(it, ViewDecl):
            out.append(f"{ind}view {it.name} = {it.base} as [{', '.join(map(str, it.shape))}]\n")
        elif isinstance(it, TaskIds):
            out.append(f"{ind}taskids {', '.join(it.names)}\n")
        elif isinstance(it, Task):
            head = f"{ind}{it.kind} {it.name}"
            if it.axes:
                head += _axes_text(it.axes)
            for f in it.flags:
                head += f" {f}"
            head += _deps_text(it.deps)
            if it.call is None:
                out.append(head + "\n")
                continue
            out.append(head + " {\n")
            for line in _call_lines(it.call, ind + "  "):
                out.append(line + "\n")
            for w in it.waves:
                restrict = (" " + ", ".join(f"{v} in {lo}..{hi}" for v, lo, hi in w.restrict)) if w.restrict else ""
                kind = w.kind if w.kind != "spmd(...)" else f"spmd({', '.join(w.block_axes)})"
                flags = "".join(f" {f}" for f in w.flags)
                out.append(f"{ind}  wave {w.name}{restrict} : {kind}{flags}{_deps_text(w.deps)}\n")
            out.append(f"{ind}}}\n")
        else:
            b = it
            if b.kind in ("auto", "manual"):
                out.append(f"{ind}{b.kind} scope {{\n")
            elif b.kind == "phase":
                out.append(f"{ind}phase {b.name} {{\n")
            else:
                carries = ""
                if b.carries:
                    carries = " carry " + ", ".join(f"{c.name} = {c.init} then {c.next}" for c in b.carries)
                uns = " unscoped" if b.unscoped else ""
                out.append(f"{ind}for {b.var} in {b.lo}..{b.hi}{uns}{carries} {{\n")
            _render_items(b.items, level + 1, out)
            out.append(f"{ind}}}\n")


# ---- the meaning: compute tasks and their element accesses ------------------------------------


@attrs.frozen
class Access:
    """One block's access: buffer (a hashable key), elements (flat indices), mode, indirect."""

    buffer: tuple[object, ...]
    elements: frozenset[int]
    mode: str  # read | write | atomic
    indirect: bool
    inout: bool = False  # implied by an `inout` parameter (no clause on the tensor)


@attrs.frozen
class ModelTask:
    """A submitted compute task: declaration name, kernel, blocks' accesses (one list per block)."""

    name: str
    kernel: str
    blocks: tuple[tuple[Access, ...], ...]
    label: str
    zero_arg: bool  # an argument region of zero elements (PG114: an empty view)
    sync_start: bool = False  # blocks launch together and synchronise inside the kernel


@attrs.define
class _Binding:
    """What a tensor name means at one point: buffer key, the shape the name indexes."""

    buffer: tuple[object, ...]
    shape: tuple[int, ...]


MODE = {"in": ("read",), "out": ("write",), "inout": ("read", "write"), "atomic_add": ("atomic",)}
CLAUSE_MODE = {"reads": "read", "writes": "write", "atomic_add": "atomic"}


def run_model(p: Program) -> list[ModelTask]:
    """The compute tasks of `p` in submission order, with every block's concrete accesses.

    Buffers (docs/language.md §14.3): an external tensor is one buffer; a tensor declared in a
    block is one buffer per iteration of every enclosing loop that allocates, where a loop
    allocates unless it stands inside a manual scope (a manual scope's tensors are hoisted out
    of it and allocated once before it, pypto's batched ALLOC); a view is its base's buffer
    with its own shape; a tensor carry is INIT in the first iteration, NEXT of the previous
    iteration later, and NEXT of the last iteration (INIT when empty) after the loop (§8).
    """
    tasks: list[ModelTask] = []
    env0: dict[str, _Binding] = {t.name: _Binding(("ext", t.name), t.shape) for t in p.externals}
    _walk(p.entry.items, env0, {}, (), False, tasks)
    return tasks


def _walk(items: list[Item], names: dict[str, _Binding], vals: dict[str, int], alloc_iters: tuple[int, ...],
          in_manual: bool, tasks: list[ModelTask]) -> dict[str, _Binding]:
    names = dict(names)
    for it in items:
        if isinstance(it, TensorDecl):
            names[it.name] = _Binding(("tensor", it.name, alloc_iters), it.shape)
        elif isinstance(it, ViewDecl):
            names[it.name] = _Binding(names[it.base].buffer, it.shape)
        elif isinstance(it, TaskIds):
            pass
        elif isinstance(it, Task):
            if it.call is not None:
                tasks.extend(_task_instances(it, names, vals))
        elif it.kind in ("auto", "phase"):
            names.update({k: v for k, v in _walk(it.items, names, vals, alloc_iters, in_manual, tasks).items()
                          if it.kind == "phase"})
        elif it.kind == "manual":
            _walk(it.items, names, vals, alloc_iters, True, tasks)
        else:  # loop
            carry = {c.name: names[c.init] for c in it.carries if c.tensor}
            for i in range(it.lo, it.hi):
                inner_iters = alloc_iters if in_manual else (*alloc_iters, i)
                body_names = {**names, **carry}
                out = _walk(it.items, body_names, {**vals, it.var: i}, inner_iters, in_manual, tasks)
                carry = {c.name: out[c.next] for c in it.carries if c.tensor}
            names.update(carry)
    return names


def _blocks_of(axes: list[tuple[str, int, int]]) -> list[dict[str, int]]:
    return [dict(zip([a for a, _, _ in axes], vs, strict=True))
            for vs in itertools.product(*(range(lo, hi) for _, lo, hi in axes))]


def _task_instances(t: Task, names: dict[str, _Binding], vals: dict[str, int]) -> Iterator[ModelTask]:
    """(task env, block envs) per submitted task of one declaration, in submission order."""
    assert t.call is not None
    groups: list[tuple[dict[str, int], list[dict[str, int]], str]] = []
    if t.kind == "at":
        groups.append(({}, [{}], t.name))
    elif t.kind == "spmd":
        blocks = _blocks_of(t.axes)
        if blocks:
            groups.append(({}, blocks, t.name))
    elif t.kind == "parallel":
        for idx in _blocks_of(t.axes):
            groups.append((idx, [{}], t.name))
    else:  # tiles
        for w in t.waves:
            restrict = {v: (lo, hi) for v, lo, hi in w.restrict}
            axes = [(v, *restrict.get(v, (lo, hi))) for v, lo, hi in t.axes]
            if w.kind == "parallel":
                for idx in _blocks_of(axes):
                    groups.append((idx, [{}], f"{t.name}.{w.name}"))
            elif w.kind == "spmd":
                blocks = _blocks_of(axes)
                if blocks:
                    groups.append(({}, blocks, f"{t.name}.{w.name}"))
            else:
                task_axes = [a for a in axes if a[0] not in w.block_axes]
                block_axes = [a for a in axes if a[0] in w.block_axes]
                blocks = _blocks_of(block_axes)
                for idx in _blocks_of(task_axes):
                    if blocks:
                        groups.append((idx, blocks, f"{t.name}.{w.name}"))
    for idx, blocks, label in groups:
        accesses = []
        zero = False
        for b in blocks:
            env = {**vals, **idx, **b}
            accesses.append(tuple(_block_accesses(t.call, names, env)))
            zero = zero or any(hi <= lo for arg in t.call.args if isinstance(arg, Region)
                               for lo, hi in region_box(arg, names[arg.name].shape, env))
        sync = "sync_start" in t.flags  # sync_start is an `spmd` flag only (PG036)
        yield ModelTask(t.name, t.call.kernel, tuple(accesses), f"{label}{sorted(idx.items())}@{sorted(vals.items())}",
                        zero, sync)


def _block_accesses(call: Call, names: dict[str, _Binding], env: dict[str, int]) -> Iterator[Access]:
    _, params, _ = KERNELS[call.kernel]
    clause_buffers = {names[c.region.name].buffer for c in call.clauses}
    for (pname, direction), arg in zip(params, call.args, strict=False):
        assert isinstance(arg, Region), (call.kernel, pname)
        b = names[arg.name]
        if b.buffer in clause_buffers:
            continue  # an explicit clause on this tensor replaces its default accesses (§11.2)
        elems = box_elements(region_box(arg, b.shape, env), b.shape)
        for mode in MODE[direction]:
            yield Access(b.buffer, elems, mode, arg.indirect is not None, direction == "inout")
    for c in call.clauses:
        b = names[c.region.name]
        item_vals = [None] if c.item is None else list(range(c.item[1]))
        for iv in item_vals:
            e = env if c.item is None or iv is None else {**env, c.item[0]: iv}
            elems = box_elements(region_box(c.region, b.shape, e), b.shape)
            yield Access(b.buffer, elems, CLAUSE_MODE[c.word], c.region.indirect is not None)


# ---- generation ------------------------------------------------------------------------------


@attrs.define
class _TaskInfo:
    """A declared task the generator may name in a dep."""

    name: str
    kind: str
    axes: list[tuple[str, int, int]]
    path: tuple[int, ...]  # ids of the enclosing blocks (entry first)
    loops: tuple[int, ...]  # ids of the enclosing loops
    block_ids: list[int] = attrs.Factory(list)


@attrs.define
class _Ctx:
    """Generation state of one block."""

    block: Block
    bid: int
    path: tuple[int, ...]  # block ids, entry first, this block last
    loops: tuple[int, ...]
    loop_vars: list[tuple[str, int, int]]
    in_manual: bool
    depth: int  # runtime scope depth
    tensors: list[tuple[str, tuple[int, ...]]]  # usable tensor names (and their shapes)
    carry_tasks: list[str]  # TaskId carries usable here


#: Names the a2a3 generator must spell apart (pgraph.backends.a2a3.layout.spec_base): C/C++
#: macros and keywords, names reserved to the implementation or the runtime, names of the
#: generated file, and names ending like the ones it derives (`x0_ci_shapes` is the shapes array
#: of a TensorCreateInfo `x0_ci`, `t1_ci` a TensorCreateInfo, `v2_shapes` a reshape's shapes).
#: None starts with "c": the generator tells tensor carries by that letter.
HAZARD_NAMES = ("EOF", "errno", "int", "NULL", "assert", "stdin", "INT32_MAX", "linux", "_Tmp", "__LINE__",
                "PTO2_SCOPE", "orch_args", "main", "alloc_0", "params_t1", "t1_ci", "x0_ci_shapes", "v2_shapes",
                "ext_x0", "EXIT_SUCCESS", "new", "MAX_TENSOR_ARGS", "SIZE_MAX", "u_loop", "t3_tids", "n4_dim0")
#: The `fresh` prefixes whose names may be hazards (tensors, views, carries' NEXT tensors, loop and
#: index variables), and how often.
HAZARD_PREFIXES = frozenset(("t", "v", "n", "L", "i"))
HAZARD_EVERY = 3


class Generator:
    """Draws one `Program` through a Chooser."""

    MAX_ITEMS = 24

    def __init__(self, ch: Chooser) -> None:
        self.ch = ch
        self.n = 0
        self.tasks: list[_TaskInfo] = []
        self.blocks: dict[int, Block] = {}
        self.parent: dict[int, int] = {}
        self.items_left = self.MAX_ITEMS
        self.expect: set[str] = set()
        self.hazards_used: set[str] = set()

    def fresh(self, prefix: str) -> str:
        """A new name: `<prefix><n>`; every HAZARD_EVERY-th tensor, view, loop or index variable
        name is instead one of HAZARD_NAMES not yet used (no choice is drawn for it, so a
        seed gives the same program as before, with some names spelled so)."""
        self.n += 1
        if prefix in HAZARD_PREFIXES and self.n % HAZARD_EVERY == 0:
            start = (self.n * 7 + len(self.tasks) * 5 + self.items_left) % len(HAZARD_NAMES)  # all get drawn
            for name in (*HAZARD_NAMES[start:], *HAZARD_NAMES[:start]):
                if name not in self.hazards_used:
                    self.hazards_used.add(name)
                    return name
        return f"{prefix}{self.n}"

    # -- the program --

    def program(self) -> Program:
        externals = [TensorDecl("x0", SHAPE), TensorDecl("x1", SHAPE), TensorDecl("idx", (ROWS,))]
        entry = Block("entry")
        self.blocks[0] = entry
        ctx = _Ctx(entry, 0, (0,), (), [], False, 1, [("x0", SHAPE), ("x1", SHAPE)], [])
        self.fill(ctx, top=True)
        return Program(entry, externals, self.expect)

    def new_block(self, kind: str, parent: _Ctx, **kw: object) -> tuple[Block, int]:
        b = Block(kind, **kw)  # type: ignore[arg-type]
        bid = len(self.blocks)
        self.blocks[bid] = b
        self.parent[bid] = parent.bid
        return b, bid

    def fill(self, ctx: _Ctx, top: bool = False) -> None:
        count = self.ch.int(2 if top else 1, 7 if top else 4)
        for _ in range(count):
            if self.items_left <= 0:
                break
            self.items_left -= 1
            self.item(ctx)

    def item(self, ctx: _Ctx) -> None:
        roll = self.ch.int(0, 99)
        nesting = len(ctx.path)
        if roll < 14:
            self.tensor(ctx)
        elif roll < 19:
            self.view(ctx)
        elif roll < 30 and not ctx.in_manual and nesting < 4:
            self.scope(ctx)
        elif roll < 42 and len(ctx.loops) < 2 and nesting < 4:
            self.loop(ctx)
        elif roll < 46 and nesting < 4:
            b, bid = self.new_block("phase", ctx, name=self.fresh("ph"))
            ctx.block.items.append(b)
            sub = attrs.evolve(ctx, block=b, bid=bid, path=(*ctx.path, bid), tensors=list(ctx.tensors))
            self.fill(sub)
            ctx.tensors.extend(t for t in sub.tensors if t not in ctx.tensors)  # a phase is not a scope
        else:
            self.task(ctx)

    def tensor(self, ctx: _Ctx) -> None:
        name = self.fresh("t")
        shape = SHAPE if self.ch.bool(0.8) else (ROWS * COLS,)
        ctx.block.items.append(TensorDecl(name, shape))
        ctx.tensors.append((name, shape))

    def view(self, ctx: _Ctx) -> None:
        bases = [t for t in ctx.tensors if t[0][0] != "c"]  # a view of a tensor carry is PG002 (docs: carry views instead)
        if not bases:
            return
        base, shape = pick(self.ch, bases)
        n = math.prod(shape)
        vshape = pick(self.ch, [(n,), (2, n // 2), (n // COLS, COLS), (COLS, n // COLS)])
        name = self.fresh("v")
        ctx.block.items.append(ViewDecl(name, base, vshape))
        ctx.tensors.append((name, vshape))

    def scope(self, ctx: _Ctx) -> None:
        mode = "manual" if self.ch.bool(0.45) else "auto"
        b, bid = self.new_block(mode, ctx)
        ctx.block.items.append(b)
        sub = _Ctx(b, bid, (*ctx.path, bid), ctx.loops, ctx.loop_vars, mode == "manual", ctx.depth + 1,
                   list(ctx.tensors), list(ctx.carry_tasks))
        self.fill(sub)

    def loop(self, ctx: _Ctx) -> None:
        lo = self.ch.int(0, 1)
        hi = lo + pick(self.ch, [0, 1, 2, 2, 3, 3, 4])
        var = self.fresh("L")
        unscoped = not ctx.in_manual and self.ch.bool(0.25)
        b, bid = self.new_block("loop", ctx, var=var, lo=lo, hi=hi, unscoped=unscoped)
        ctx.block.items.append(b)
        opens_scope = not ctx.in_manual and not unscoped
        sub = _Ctx(b, bid, (*ctx.path, bid), (*ctx.loops, bid), [*ctx.loop_vars, (var, lo, hi)], ctx.in_manual,
                   ctx.depth + (1 if opens_scope else 0), list(ctx.tensors), list(ctx.carry_tasks))
        # tensor carry: INIT from the enclosing block, NEXT declared first thing in the body
        tcarry = None
        inits = [t for t in ctx.tensors if t[0][0] != "c"]  # INIT is a declared tensor, not a carry (PG002)
        if inits and self.ch.bool(0.35):
            init, shape = pick(self.ch, inits)
            nxt = self.fresh("n")
            name = self.fresh("c")
            b.items.append(TensorDecl(nxt, shape))
            sub.tensors.append((nxt, shape))
            sub.tensors.append((name, shape))
            tcarry = Carry(name, init, nxt, True)
            b.carries.append(tcarry)
        # TaskId carry: INIT a task declared before the loop, NEXT a task of the body (chosen after)
        inits = [t for t in self.visible_tasks(ctx) if t.kind != "dummy" or t.axes]
        tc_name = None
        if inits and self.ch.bool(0.35):
            tc_name = self.fresh("p")
            sub.carry_tasks.append(tc_name)
        before = len(self.tasks)
        self.fill(sub)
        if not sub.block.items or all(not isinstance(i, Task) for i in self.walk_items(b)):
            self.task(sub)
        if tc_name is not None:
            body_tasks = [t for t in self.tasks[before:]]
            if body_tasks:
                init = pick(self.ch, inits)
                nxt = pick(self.ch, body_tasks)
                b.carries.append(Carry(tc_name, init.name, nxt.name, False))
                self.need_taskids(nxt, bid)
            else:
                self.drop_carry_deps(b, tc_name)
        if tcarry is not None:
            ctx.tensors.append((tcarry.name, dict(sub.tensors)[tcarry.name]))

    def walk_items(self, b: Block) -> Iterator[Item]:
        for it in b.items:
            yield it
            if isinstance(it, Block):
                yield from self.walk_items(it)

    def drop_carry_deps(self, b: Block, name: str) -> None:
        for it in self.walk_items(b):
            if isinstance(it, Task):
                it.deps = [d for d in it.deps if d.name != name]
                for w in it.waves:
                    w.deps = [d for d in w.deps if d.name != name]

    # -- tasks --

    def visible_tasks(self, ctx: _Ctx) -> list[_TaskInfo]:
        return list(self.tasks)

    def scope_of(self, bid: int) -> int:
        """The innermost block that is a runtime scope (entry, auto, manual, scoped loop) containing bid."""
        while True:
            b = self.blocks[bid]
            if b.kind in ("entry", "auto", "manual") or (b.kind == "loop" and not b.unscoped
                                                          and not self.inside_manual(bid)):
                return bid
            bid = self.parent[bid]

    def inside_manual(self, bid: int) -> bool:
        while bid in self.parent:
            bid = self.parent[bid]
            if self.blocks[bid].kind == "manual":
                return True
        return False

    def chain(self, bid: int) -> list[int]:
        out = [bid]
        while out[-1] in self.parent:
            out.append(self.parent[out[-1]])
        return out

    def need_taskids(self, producer: _TaskInfo, consumer_bid: int) -> None:
        """Add `taskids` for producer to a scope enclosing both, when the producer's scope is not open there."""
        pscope = self.scope_of(producer.path[-1])
        consumer_chain = self.chain(consumer_bid)
        if pscope in consumer_chain:
            return
        common = next(b for b in self.chain(producer.path[-1]) if b in consumer_chain)
        target = self.scope_of(common)
        blk = self.blocks[target]
        for it in blk.items:
            if isinstance(it, TaskIds):
                if producer.name not in it.names:
                    it.names.append(producer.name)
                return
        blk.items.insert(0, TaskIds([producer.name]))

    def task(self, ctx: _Ctx) -> None:
        roll = self.ch.int(0, 99)
        kind = "at" if roll < 25 else "spmd" if roll < 45 else "parallel" if roll < 65 else \
            "dummy" if roll < 77 else "tiles"
        name = self.fresh(kind[0] + "_")
        axes: list[tuple[str, int, int]] = []
        if kind != "at" and not (kind == "dummy" and self.ch.bool(0.4)):
            naxes = 2 if kind in ("tiles", "spmd", "parallel") and self.ch.bool(0.25) else 1
            for _ in range(naxes):
                lo = self.ch.int(0, 1)
                axes.append((self.fresh("i"), lo, lo + pick(self.ch, [0, 1, 2, 2, 3, 4])))
        flags = []
        if kind != "dummy" and self.ch.bool(0.3):
            flags.append("early")
        if kind == "spmd" and self.ch.bool(0.15) and math.prod(hi - lo for _, lo, hi in axes) <= 8:
            flags.append("sync_start")
        # a tiles declaration's own deps go to every wave, spmd ones too: no tile index there (PG027)
        deps = self.deps(ctx, axes if kind in ("parallel", "dummy") else [])
        call = None if kind == "dummy" else self.call(ctx, axes, kind)
        t = Task(kind, name, axes, call, deps, flags)
        if kind == "tiles":
            t.waves = self.waves(ctx, axes)
        block_axes = {v for v, _, _ in axes} if kind == "spmd" else set()
        for w in t.waves:
            block_axes |= {v for v, _, _ in axes} if w.kind == "spmd" else set(w.block_axes)
        scalar_vars = set().union(*(expr_vars(a) for a in call.args if not isinstance(a, Region))) if call else set()
        if scalar_vars & block_axes:
            self.expect.add("PG040")  # a scalar argument that varies across the blocks of one task
        ctx.block.items.append(t)
        self.tasks.append(_TaskInfo(name, kind, axes, ctx.path, ctx.loops))

    def waves(self, ctx: _Ctx, axes: list[tuple[str, int, int]]) -> list[Wave]:
        v, lo, hi = axes[0]
        cut = self.ch.int(lo, hi)
        parts = [(lo, cut), (cut, hi)] if self.ch.bool(0.8) else [(lo, hi)]
        waves = []
        for a, b in parts:
            kind = pick(self.ch, ["parallel", "spmd", "spmd(...)"] if len(axes) > 1 else ["parallel", "spmd"])
            block_axes = [axes[1][0]] if kind == "spmd(...)" else []
            task_axes = [ax for ax in axes if ax[0] not in block_axes] if kind != "spmd" else []
            flags = ["early"] if self.ch.bool(0.2) else []
            waves.append(Wave(self.fresh("w"), [(v, a, b)], kind, block_axes,
                              self.deps(ctx, [(tv, *((a, b) if tv == v else (tl, th))) for tv, tl, th in task_axes]),
                              flags))
        return waves

    def deps(self, ctx: _Ctx, own_axes: list[tuple[str, int, int]]) -> list[Dep]:
        out: list[Dep] = []
        cands = self.visible_tasks(ctx)
        n = pick(self.ch, [0, 0, 1, 1, 1, 2, 3])
        if ctx.carry_tasks and self.ch.bool(0.5):
            out.append(Dep(pick(self.ch, ctx.carry_tasks)))
        if self.ch.bool(0.3) and cands:  # chain on the latest task: ordered programs are common
            out.append(self.dep_on(ctx, cands[-1], own_axes))
            n -= 1
        for _ in range(max(n, 0)):
            if not cands:
                break
            out.append(self.dep_on(ctx, pick(self.ch, cands), own_axes))
        return out

    def dep_on(self, ctx: _Ctx, t: _TaskInfo, own_axes: list[tuple[str, int, int]]) -> Dep:
        self.need_taskids(t, ctx.bid)
        if not t.axes or t.kind == "at" or self.ch.bool(0.35):
            return Dep(t.name)
        sels = []
        for _v, lo, hi in t.axes:
            n = hi - lo
            roll = self.ch.int(0, 3)
            if n == 0 or roll == 0:
                sels.append(Sel("star"))
            elif roll == 1:
                a = self.ch.int(lo, hi - 1)
                b = self.ch.int(a + 1, hi)
                sels.append(Sel(pick(self.ch, ["range", "span"]), a=a, b=b))
            else:
                vars_ = [(ov, ol, oh) for ov, ol, oh in [*own_axes, *ctx.loop_vars] if oh > ol]
                base: Expr = Lit(self.ch.int(0, n - 1))
                if vars_ and self.ch.bool(0.7):
                    ov, _, _ = pick(self.ch, vars_)
                    base = Add(Var(ov), Lit(self.ch.int(0, 2)))
                sels.append(Sel("idx", e=Add(Lit(lo), Mod(base, n)) if lo else Mod(base, n)))
        return Dep(t.name, sels)

    def call(self, ctx: _Ctx, axes: list[tuple[str, int, int]], kind: str) -> Call:
        kernel = pick(self.ch, ["k_copy", "k_copy", "k_upd", "k_acc", "k_mix", "k_fill", "k_gather", "k_scatter"])
        _, params, nscalars = KERNELS[kernel]
        idx_vars = [(v, lo, hi) for v, lo, hi in [*axes, *ctx.loop_vars] if hi > lo]
        args: list[Region | Expr] = []
        for pname, _direction in params:
            if pname == "idx":
                args.append(Region("idx"))
                continue
            tname, shape = pick(self.ch, ctx.tensors)
            indirect = "idx" if kernel in ("k_gather", "k_scatter") and pname in ("src", "dst") \
                and self.ch.bool(0.6) else None
            args.append(Region(tname, self.slices(shape, idx_vars), indirect))
        for _ in range(nscalars):
            e: Expr = Var("nsc") if self.ch.bool(0.3) else Lit(self.ch.int(0, 9))
            loop_vars = [v for v, lo, hi in ctx.loop_vars if hi > lo]
            axis_vars = [v for v, lo, hi in axes if hi > lo]
            if loop_vars and self.ch.bool(0.5):
                e = Add(e, Var(pick(self.ch, loop_vars)))
            if axis_vars and self.ch.bool(0.6 if kind in ("parallel", "tiles") else 0.1):
                e = Add(e, Var(pick(self.ch, axis_vars)))
            args.append(e)
        call = Call(kernel, args)
        if self.ch.bool(0.12):
            self.clause(call)
        return call

    def clause(self, call: Call) -> None:
        """An explicit clause narrowing one whole-tensor argument (possibly in an item loop).

        Only on calls whose tensor arguments are distinct plain tensors: a view or a carry may
        name the same buffer as another argument, and the clause replaces the accesses of a
        whole tensor (§11.2). The region is chosen in `_resolve_clauses`, where shapes are known.
        """
        _, params, _ = KERNELS[call.kernel]
        names = [a.name for a in call.args if isinstance(a, Region) and a.name != "idx"]
        if len(set(names)) != len(names) or any(n[0] in "vc" for n in names):
            return
        cands = [(p, a) for (p, _d), a in zip(params, call.args, strict=False)
                 if isinstance(a, Region) and a.slices is None and a.name != "idx" and a.indirect is None]
        if not cands:
            return
        (pname, arg) = pick(self.ch, cands)
        direction = dict(params)[pname]
        word = {"in": "reads", "out": "writes", "inout": pick(self.ch, ["reads", "writes"]),
                "atomic_add": "atomic_add"}[direction]
        item = (self.fresh("it"), self.ch.int(1, 2)) if self.ch.bool(0.4) else None
        call.clauses.append(Clause(word, Region(arg.name), item))

    def slices(self, shape: tuple[int, ...], idx_vars: list[tuple[str, int, int]]) -> tuple[Slice, ...] | None:
        if self.ch.bool(0.25):
            return None
        out: list[Slice] = []
        for d in shape:
            roll = self.ch.int(0, 99)
            if roll < 30:
                out.append(Full())
            elif roll < 40:
                a = self.ch.int(0, d - 1)
                b = self.ch.int(a + 1, d) if roll > 30 else a  # now and then a zero-size region (PG114)
                out.append(Range(a, b))
            else:
                n = pick(self.ch, [1, 1, 2, d // 2 or 1])
                room = d - n + 1
                e: Expr = Lit(self.ch.int(0, room - 1))
                if idx_vars and self.ch.bool(0.8):
                    v = pick(self.ch, idx_vars)[0]
                    k = pick(self.ch, [1, 1, 2, n])
                    e = Mod(Add(Mul(Var(v), k) if k != 1 else Var(v), Lit(self.ch.int(0, 3))), room)
                if n == 1 and self.ch.bool(0.4):
                    out.append(Index(e))
                else:
                    out.append(Span(e, n))
        return tuple(out)


def generate(ch: Chooser) -> Program:
    """One random valid program (see the module docstring for what it covers)."""
    g = Generator(ch)
    p = g.program()
    _resolve_clauses(p, ch)
    return p


def _resolve_clauses(p: Program, ch: Chooser) -> None:
    """Give each explicit clause a concrete region on its tensor (its shape is known only now)."""
    shapes: dict[str, tuple[int, ...]] = {t.name: t.shape for t in p.externals}

    def visit(items: list[Item]) -> None:
        for it in items:
            if isinstance(it, (TensorDecl, ViewDecl)):
                shapes[it.name] = it.shape
            elif isinstance(it, Block):
                for c in it.carries:
                    if c.tensor:
                        shapes[c.name] = shapes[c.init]
                visit(it.items)
            elif isinstance(it, Task) and it.call is not None:
                for c in it.call.clauses:
                    shape = shapes[c.region.name]
                    vars_ = [c.item[0]] if c.item else []
                    sl: list[Slice] = []
                    for d in shape:
                        if vars_ and ch.bool(0.5):
                            sl.append(Index(Mod(Var(vars_[0]), d)))
                        elif ch.bool(0.2):
                            a = ch.int(0, d)
                            sl.append(Range(a, a))  # an empty clause region: touches nothing
                        else:
                            sl.append(Full() if ch.bool(0.5) else Span(Lit(0), max(1, d // 2)))
                    c.region = Region(c.region.name, tuple(sl))

    visit(p.entry.items)


def model_summary(tasks: list[ModelTask]) -> list[tuple[str, int]]:
    """(kernel, blocks) per compute task, the part of the model compared with the recorded run."""
    return [(t.kernel, len(t.blocks)) for t in tasks]


__all__ = ["Chooser", "DataChooser", "ModelTask", "Program", "RandomChooser", "generate", "model_summary",
           "render", "run_model"]

