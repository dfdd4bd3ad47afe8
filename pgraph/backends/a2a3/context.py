"""The frozen emission context: every C++ name, func id, TaskId storage and argument view of one entry.

Built once per build by `naming.build_context` and never changed; the emission functions read it.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from pgraph import records
from pgraph.backends.simpler import FuncIds
from pgraph.ir import program as ir
from pgraph.kinds import CarryKind, InternalError, Storage

from .cexpr import CxxPrinter, Interval
from .layout import Node, Path, alloc_path, axis_range, dispatch_path, unique
from .layout import Storage as Slots
from .regions import ArgView, env_space


@records.value
@attrs.frozen(repr=False, eq=False)
class Names:
    """The names chosen while walking the entry in emission order (`naming.plan_names`).

    `var`: spec index variable -> C++ name; `task`: dispatch -> n of `params_t<n>`; `barrier`:
    dummy -> k of `params_phase_fence_barrier_<k>`; `alloc`: allocation site -> k of its first
    `alloc_<k>`; `ci`: allocated tensor -> its `TensorCreateInfo`; `view`: (dispatch, parameter)
    -> the `ChipTensor` view passed; `dep_loops`: (dispatch, dep index) -> the loop variables of
    an array dep; `temps`: interleave member -> (lead variable -> temporary holding its value).
    """

    var: Mapping[str, str]
    task: Mapping[str, int]
    barrier: Mapping[str, int]
    alloc: Mapping[ir.AllocKey, int]
    ci: Mapping[str, str]
    view: Mapping[tuple[str, str], str]
    dep_loops: Mapping[tuple[str, int], tuple[str, ...]]
    temps: Mapping[str, Mapping[str, str]]


NO_NAMES = Names({}, {}, {}, {}, {}, {}, {}, {})


@records.value
@attrs.frozen(repr=False, eq=False)
class Context:
    """What the emission of one entry reads: the program, its C++ names, func ids and TaskId storages.

    `tensor_c`/`scalar_c`/`dim_c` are the function-wide C++ names of tensors (and tensor
    carries), scalars and runtime dimensions ((tensor, axis) -> the `int64_t` read at the
    entry); `taken` every function-wide name chosen before emission; `storage` and
    `carry_store` the TaskId storages of tile sets and TaskId carries (`layout.plan_storage`),
    `declared_at` them by (block path, child key) they precede; `tree` the block tree;
    `alloc_keys` the allocation sites of the tree; `views` the task-level argument views of
    every submitted task; `names` the names chosen in emission order.
    """

    p: ir.Program
    header: tuple[str, ...]
    ids: FuncIds
    tensor_c: Mapping[str, str]
    scalar_c: Mapping[str, str]
    dim_c: Mapping[tuple[str, int], str]
    taken: frozenset[str]
    storage: Mapping[str, Slots]
    carry_store: Mapping[str, Slots]
    declared_at: Mapping[tuple[Path, tuple[str, object]], tuple[Slots, ...]]
    loop_parent: Mapping[int, Path]
    tree: Node
    alloc_keys: Mapping[str, ir.AllocKey]
    views: Mapping[str, tuple[ArgView, ...]]
    names: Names = NO_NAMES


def function_names(p: ir.Program, taken: set[str]) -> tuple[dict[str, str], dict[str, str], dict[tuple[str, int], str]]:
    """C++ names of tensors, scalars and runtime dimensions: `ext_<name>` for an external tensor,
    the spec name otherwise, `<tensor>_dim<axis>` for a dimension; each added to `taken`."""
    tensor_c: dict[str, str] = {}
    scalar_c: dict[str, str] = {}
    dim_c: dict[tuple[str, int], str] = {}
    for t in p.tensors.values():
        if t.storage is Storage.EXTERNAL:
            tensor_c[t.name] = unique(f"ext_{t.name}", taken)
    for s in p.scalars.values():
        scalar_c[s.name] = unique(s.name, taken)
    for t in p.tensors.values():
        if t.storage is not Storage.EXTERNAL:
            tensor_c[t.name] = unique(t.name, taken)
    for c in p.carries.values():
        if c.kind is CarryKind.TENSOR:
            tensor_c[c.name] = unique(c.name, taken)
    for t in p.tensors.values():
        for axis in range(len(t.shape)):
            if t.storage is Storage.EXTERNAL and t.is_runtime(axis):
                dim_c[(t.name, axis)] = unique(f"{t.name}_dim{axis}", taken, derived=True)
    return tensor_c, scalar_c, dim_c


def env_ranges(p: ir.Program, d: ir.Dispatch) -> dict[str, Interval]:
    """The values of the loop and task indices a dispatch's expressions may use."""
    return {a.var: axis_range(a) for a in env_space(p, d)}


def printer(ctx: Context, ranges: Mapping[str, Interval], identity: list[str] | tuple[str, ...] = ()) -> CxxPrinter:
    """An expression printer for index variables with `ranges` (plus scalars); a variable in
    `identity` prints as itself (a loop-local name), every other one as its C++ name."""
    names = dict(ctx.scalar_c)
    for v in ranges:
        names[v] = v if v in identity else ctx.names.var[v]
    return CxxPrinter(names, ranges, ctx.dim_c)


def tensor_ref(ctx: Context, name: str, d: ir.Dispatch | None = None, path: Path | None = None) -> str:
    """C++ name of a tensor or tensor carry, checking it is declared in an enclosing block.

    Raises InternalError for a use outside the allocating scope (PG037 rejects it first).
    """
    decl = decl_path(ctx, name)
    if path is None and d is not None:
        path = dispatch_path(ctx.p, d)
    if decl is None or (path is not None and path[:len(decl)] != decl):
        where = f"{d.span.location()}: '{d.name}'" if d is not None else "a loop carry"
        raise InternalError(f"{where} uses tensor '{name}' outside the scope that allocates it "
                            "(PG037 should have rejected it)")
    return ctx.tensor_c[name]


def decl_path(ctx: Context, name: str) -> Path | None:
    """The block path declaring a tensor's C++ name (None: a block that is never emitted)."""
    p = ctx.p
    carry = p.carries.get(name)
    if carry is not None and carry.kind is CarryKind.TENSOR:
        lp = next(lp for lp in p.loops if carry in lp.carries)
        return ctx.loop_parent.get(lp.id)
    t = p.tensors[name]
    if t.storage is Storage.VIEW and t.base is not None:
        t = p.tensors[t.base]  # a view is declared right after its base's allocation
    if t.storage is Storage.EXTERNAL or t.scope is None:
        return ()
    return alloc_path(p, ir.alloc_key(p, t))
