"""The IR verifier: structural invariants of a lowered Program and of an expanded InstanceGraph.

A violation is a bug in lowering or expansion, never a user error: `VerifyError` (an
InternalError) names the first broken invariant. `pgraph.pipeline` runs it after lowering
and after expansion when `Options.verify` is set (the test suite sets PGRAPH_VERIFY=1).
"""

from __future__ import annotations

import math

from pgraph.expr import Expr, free_vars
from pgraph.ir import program as ir
from pgraph.ir.instances import InstanceGraph
from pgraph.kinds import CarryKind, DepKind, InternalError, Provenance, ScopeKind, Storage, TaskKind


class VerifyError(InternalError):
    """An IR invariant does not hold."""


def _need(cond: bool, what: str) -> None:
    if not cond:
        raise VerifyError(what)


def verify_program(p: ir.Program) -> None:
    """Check every structural invariant of `p` (VerifyError on the first that fails)."""
    _scopes(p)
    _loops(p)
    _tensors(p)
    for i, d in enumerate(p.dispatches):
        _dispatch(p, i, d)
    for name, ts in p.tilesets.items():
        _need(ts.name == name, f"tile set '{name}' is filed under another name")
        for dn in ts.dispatches:
            _need(p.dispatch(dn).tileset == name, f"tile set '{name}' lists dispatch '{dn}' of another tile set")


def _scopes(p: ir.Program) -> None:
    _need(bool(p.scopes) and p.scopes[0].kind is ScopeKind.ENTRY and p.scopes[0].parent is None,
          "scope 0 is not the entry scope")
    _need(p.scopes[0].depth in (0, 1), f"the entry scope has depth {p.scopes[0].depth}, not 1 (or 0: unscoped)")
    for i, s in enumerate(p.scopes):
        _need(s.id == i, f"scope {i} has id {s.id}")
        if s.parent is not None:
            _need(0 <= s.parent < i, f"scope {i} has parent {s.parent}, not an earlier scope")
            _need(s.depth == p.scopes[s.parent].depth + 1, f"scope {i} has depth {s.depth}")
        if s.kind is ScopeKind.LOOP:
            _need(s.loop is not None and p.loops[s.loop].body_scope == i, f"loop scope {i} is no loop's body")


def _loops(p: ir.Program) -> None:
    for i, lp in enumerate(p.loops):
        _need(lp.id == i, f"loop {i} has id {lp.id}")
        _need(0 <= lp.parent_scope < len(p.scopes), f"loop {i} has parent scope {lp.parent_scope}")
        if lp.body_scope is not None:
            _need(p.scopes[lp.body_scope].parent == lp.parent_scope, f"loop {i}'s body scope is not in its parent")
        for c in lp.carries:
            _need(p.carries.get(c.name) == c, f"carry '{c.name}' of loop {i} is not in the carry table")


def _tensors(p: ir.Program) -> None:
    args = sorted(t.arg_index if t.arg_index is not None else -1 for t in p.tensors.values()
                  if t.storage is Storage.EXTERNAL)
    _need(args == list(range(len(args))), f"external argument indices are {args}")
    for t in p.tensors.values():
        match t.storage:
            case Storage.VIEW:
                _need(t.base in p.tensors and p.tensors[t.base].storage is not Storage.VIEW,
                      f"view '{t.name}' has base '{t.base}', not a root tensor")
            case Storage.ALLOC:
                _need(t.scope is not None and t.base is None, f"allocation '{t.name}' has no heap scope")
            case Storage.EXTERNAL:
                _need(t.scope is None and t.base is None, f"external '{t.name}' has a heap scope")
    for c in p.carries.values():
        table = p.tensors if c.kind is CarryKind.TENSOR else p.tilesets
        _need(c.init in table, f"carry '{c.name}' starts from '{c.init}', which is not a {c.kind}")


def _dispatch(p: ir.Program, i: int, d: ir.Dispatch) -> None:
    _need(d.order == i, f"dispatch '{d.name}' has order {d.order} at position {i}")
    _need(0 <= d.scope < len(p.scopes), f"dispatch '{d.name}' has scope {d.scope}")
    _need(d.tileset in p.tilesets and d.name in p.tilesets[d.tileset].dispatches,
          f"dispatch '{d.name}' is not in its tile set '{d.tileset}'")
    chain = set(p.ancestors(d.scope))
    for lid in d.loops:
        lp = p.loops[lid]
        _need(lp.body_scope is None or lp.body_scope in chain, f"dispatch '{d.name}' is in loop {lid} but not its scope")
    _need(d.kind is not TaskKind.TILES and d.kind is not TaskKind.ALLOC, f"dispatch '{d.name}' has kind {d.kind}")
    if d.kind is TaskKind.DUMMY:
        _need(d.kernel is None and not d.args and not d.accesses, f"dummy '{d.name}' has a kernel or accesses")
    else:
        _need(d.kernel in p.kernels, f"dispatch '{d.name}' calls unknown kernel {d.kernel!r}")
        params = p.kernels[d.kernel].params if d.kernel else ()
        _need(all(a.param is q for a, q in zip(d.args, params)), f"dispatch '{d.name}' binds foreign parameters")
        if d.kernel_table is not None:
            table = p.kernel_tables.get(d.kernel_table)
            _need(table is not None and d.kernel_index is not None and table.members[0] == d.kernel
                  and all(m in p.kernels for m in table.members), f"dispatch '{d.name}' indexes a bad kernels table")
        for name, _span in d.untouched:
            _need(name in p.tensors or name in p.carries, f"dispatch '{d.name}' marks unknown '{name}' untouched")
    names = {p.loops[lid].axis.var for lid in d.loops} | {a.var for a in (*d.task_axes, *d.block_axes)}
    for acc in d.accesses:
        _region(p, d, acc.region, names | {it.var for it in acc.items})
    for a in d.args:
        _need((a.region is None) != (a.scalar is None), f"argument '{a.param.name}' of '{d.name}' is not one thing")
        if a.region is not None:
            _region(p, d, a.region, names)
        if a.scalar is not None:
            _vars(a.scalar, names | set(p.scalars), f"scalar '{a.param.name}' of '{d.name}'")
    for dep in d.deps:
        if dep.kind is DepKind.CARRY:
            _need(dep.target in p.carries and p.carries[dep.target].kind is CarryKind.TASK,
                  f"dep '{dep.target}' of '{d.name}' is no task carry")
            continue
        _need(dep.target in p.tilesets, f"dep '{dep.target}' of '{d.name}' is no tile set")
        for sel in dep.sels or ():
            for e in (sel.a, sel.b):
                if e is not None:
                    _vars(e, names, f"a dep of '{d.name}'")


def _region(p: ir.Program, d: ir.Dispatch, r: ir.RegionRef, names: set[str]) -> None:
    known = r.tensor in p.tensors or (r.tensor in p.carries and p.carries[r.tensor].kind is CarryKind.TENSOR)
    _need(known, f"'{d.name}' touches unknown tensor '{r.tensor}'")
    for idx in r.indirect or ():
        _need(idx in p.tensors, f"'{d.name}' indexes through unknown tensor '{idx}'")
    for dim in r.dims or ():
        for e in (dim.a, dim.b):
            if e is not None:
                _vars(e, names, f"a region of '{d.name}'")


def _vars(e: Expr, names: set[str], where: str) -> None:
    free = free_vars(e) - names
    _need(not free, f"{where} uses unbound name(s) {sorted(free)}")


def verify_graph(g: InstanceGraph) -> None:
    """Check every structural invariant of an expanded graph (VerifyError on the first that fails)."""
    p = g.program
    for i, inst in enumerate(g.instances):
        _need(inst.id == i, f"instance {i} has id {inst.id}")
        _need(inst.weight >= 1, f"instance {inst.label} has weight {inst.weight}")
        _need(len(inst.loops) == len(inst.iters), f"instance {inst.label} has {len(inst.iters)} iterations")
        if inst.kind is TaskKind.ALLOC:
            _need(i in g.alloc_info, f"alloc instance {inst.label} has no allocation group")
            continue
        d = p.dispatch(inst.dispatch)
        _need(inst.kind is d.kind and inst.loops == d.loops, f"instance {inst.label} differs from its dispatch")
        _need(g.by_key.get((d.name, inst.iters, inst.index)) == i, f"instance {inst.label} is not indexed")
        if inst.kind is not TaskKind.DUMMY:
            blocks = math.prod(a.size for a in d.block_axes) if d.block_axes else 1
            _need(len(g.blocks.get(i, [])) == blocks, f"instance {inst.label} has {len(g.blocks.get(i, []))} block "
                  f"access sets for {blocks} blocks")
            _need(i in g.args, f"instance {inst.label} has no argument boxes")
    n = len(g.instances)
    for u, v, data in g.graph.edges(data=True):
        _need(0 <= u < n and 0 <= v < n and u != v, f"edge {u} -> {v} leaves the instances")
        prov = data.prov
        _need(bool(prov) and all(isinstance(x, Provenance) for x in prov), f"edge {u} -> {v} has provenance {prov}")
    _need(set(g.graph.nodes) == set(range(n)), "the graph's nodes are not the instances")
