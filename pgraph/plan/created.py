"""Runtime-created tensors (PG124): a `created` buffer is made by its first task's submit.

A tensor declared `created` has no alloc task: the first task passed it (in submission order)
makes it with add_output(TensorCreateInfo) (simpler TRB/runtime: OUTPUT, docs/upstream.md §2.3),
so that task must write the whole buffer as an `out` argument, and nothing may touch it before.
The creating dispatch's submit always passes the create-info, so another task of the same
dispatch touching the same buffer instance (a second task index, an iteration of a loop the
buffer does not vary with) would create a second buffer: also PG124. A view of a created tensor
is refused too: the view would be made where the tensor is declared, before the buffer exists.
"""

from __future__ import annotations

from pgraph.diagnostics import Note
from pgraph.ir.instances import created_by
from pgraph.ir.program import Dispatch, Program, creators
from pgraph.kinds import Direction, Storage
from pgraph.plan.base import Pass, Plan
from pgraph.source import Span


class CreatedPass(Pass):
    """PG124: a `created` tensor touched before its creator, created by a partial or non-`out`
    write, by two tasks of one dispatch, or viewed."""

    name = "created"

    def run(self, plan: Plan) -> None:
        p, g = plan.program, plan.graph
        created = {t.name: t for t in p.tensors.values() if t.created}
        if not created:
            return
        for v in p.tensors.values():
            if v.storage is Storage.VIEW and v.base in created:
                plan.bag.add("PG124", f"view '{v.name}' of created tensor '{v.base}': the buffer does not exist "
                             "until its creator's submit, after the view would be made", v.span,
                             [Note(f"'{v.base}' is declared `created` here", created[v.base].span)],
                             hint=f"pass '{v.base}' itself, or drop `created` from its declaration")
        made = created_by(p, g.instances, g.args)
        static = creators(p)  # what the generated code passes the create-info at
        for buf, node in made.items():
            first = static.get(buf[0])
            if first is not None and first != g.instances[node].dispatch:
                plan.bag.add("PG124", f"created tensor '{buf[0]}': '{first}', the first task passed it, submits "
                             f"nothing here, so '{g.instances[node].label}' would use it uncreated",
                             p.dispatch(first).span, [Note(f"'{buf[0]}' is declared `created` here",
                                                           created[buf[0]].span)],
                             hint=f"drop `created` from '{buf[0]}', or pass it first to a task that is submitted")
                return
        by_dispatch: dict[str, list[int]] = {}
        for inst in g.instances:
            by_dispatch.setdefault(inst.dispatch, []).append(inst.id)
        seen: set[tuple[str, str]] = set()
        for buf, node in made.items():
            t = created[buf[0]]
            inst = g.instances[node]
            d = p.dispatch(inst.dispatch)
            note = Note(f"'{t.name}' is declared `created` here", t.span)
            mine = [a for a in g.args[node] if a.buffer == buf]
            whole = tuple((0, n) for n in t.shape)
            bad = [a for a in mine if a.param.direction is not Direction.OUT or a.tensor != t.name or a.box != whole]
            if (bad or len(mine) > 1) and ("first", d.name) not in seen:
                seen.add(("first", d.name))
                a = (bad or mine)[0]
                how = {Direction.IN: "reads", Direction.INOUT: "reads and writes",
                       Direction.ATOMIC_ADD: "adds into"}.get(a.param.direction, "writes part of")
                if a.param.direction is Direction.OUT and a.box == whole and len(mine) > 1:
                    how = "passes twice"
                plan.bag.add("PG124", f"'{inst.label}' {how} created tensor '{t.name}' before any task creates it: "
                             "the first task passed a created tensor makes it, as the whole `out` argument",
                             _arg_span(d, t.name, p) or d.span, [note],
                             hint=f"let the first task of '{t.name}' write all of it through an `out` parameter, "
                                  f"or drop `created` (an alloc task then makes '{t.name}' before its first use)")
                continue
            others = [i for i in by_dispatch[d.name]
                      if i != node and any(a.buffer == buf for a in g.args.get(i, []))]
            if others and ("second", d.name) not in seen:
                seen.add(("second", d.name))
                other = g.instances[others[0]]
                plan.bag.add("PG124", f"'{other.label}' would create created tensor '{t.name}' a second time: "
                             f"every task of '{d.name}' passes its create-info, and '{inst.label}' made it first",
                             _arg_span(d, t.name, p) or d.span, [note],
                             hint=f"declare '{t.name}' where each task of '{d.name}' gets its own buffer "
                                  f"(inside the loop), or drop `created`")


def _arg_span(d: Dispatch, tensor: str, p: Program) -> Span | None:
    """Where `d` passes `tensor` (or a view of it)."""
    for a in d.args:
        if a.region is not None and a.region.tensor in p.tensors and p.tensors[a.region.tensor].root == tensor:
            return a.span
    return None
