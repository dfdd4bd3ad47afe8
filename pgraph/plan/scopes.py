"""Checks of scopes: nesting (PG022), stated rings (PG023), `interleave` content (PG035), where a
TaskId or a buffer is still visible (PG014, PG037).

simpler / pypto (docs/upstream.md §6.2, §3, §5.4): an AUTO scope inside a
MANUAL one is rejected (error 5) and pypto rejects MANUAL inside MANUAL; ring = min(depth, 3);
a TaskId is a C++ local of the PTO2_SCOPE that produced it; a scope's buffers are freed
when it ends.
"""

from __future__ import annotations

import attrs

from pgraph.diagnostics import DiagnosticBag, Edit, Fix, Note
from pgraph.ir.program import Program
from pgraph.kinds import CarryKind, DepKind, ScopeKind, ScopeMode, Storage
from pgraph.plan.base import ProgramCheck
from pgraph.plan.fixes import declare_taskids, fix
from pgraph.source import Span


def head(span: Span, keyword: str) -> Span:
    """The first `len(keyword)` columns of `span`: carets under a statement's keyword, not its block."""
    return attrs.evolve(span, end_line=span.line, end_col=span.col + len(keyword))


class ScopeNestingCheck(ProgramCheck):
    """PG022 scopes inside manual scopes, PG023 stated rings, PG035 scopes/loops/blocks inside `interleave`."""

    name = "scope-nesting"

    def run(self, program: Program, bag: DiagnosticBag) -> None:
        p = program
        for s in p.scopes:
            if s.kind is ScopeKind.BLOCK and s.parent is not None and p.scopes[s.parent].mode is ScopeMode.MANUAL:
                outer = p.scopes[s.parent]
                what = "a manual scope" if s.mode is ScopeMode.MANUAL else "an auto scope"
                bag.add("PG022", f"{what} may not be nested inside a manual scope", s.span,
                        [Note("the enclosing manual scope", outer.span)],
                        hint="the runtime rejects AUTO inside MANUAL (error 5) and pypto rejects MANUAL inside "
                             "MANUAL; move the scope out or drop it")
            if s.expected_ring is not None and s.expected_ring != s.ring:
                bag.add("PG023", f"this scope is at depth {s.depth}, so its ring is {s.ring}, not {s.expected_ring}",
                        s.span, hint="ring = min(depth, 3) (simpler: current_ring_id); move the scope or fix the "
                                     f"stated ring (`ring {s.ring}`)",
                        fix=Fix((Edit(s.ring_span, str(s.ring)),)) if s.ring_span is not None else None)
        blocks = {b.id: b for b in p.interleaves}
        for b in p.interleaves:
            if b.parent is not None:
                bag.add("PG035", "an `interleave` block may not contain another one", head(b.span, "interleave"),
                        [Note("the enclosing interleave block", head(blocks[b.parent].span, "interleave"))],
                        hint="list every declaration to interleave in one block")
        for s in p.scopes:
            if s.kind is ScopeKind.BLOCK and s.interleave is not None:
                self.inside(bag, "a scope", s.span, f"{s.mode} scope", blocks[s.interleave].span)
        for lp in p.loops:
            if lp.interleave is not None:
                self.inside(bag, "a loop", lp.span, "for", blocks[lp.interleave].span)

    @staticmethod
    def inside(bag: DiagnosticBag, what: str, span: Span, keyword: str, block: Span) -> None:
        bag.add("PG035", f"{what} may not appear inside an `interleave` block", head(span, keyword),
                [Note("the interleave block", head(block, "interleave"))],
                hint="interleave declarations of one scope and loop; put the scope or loop around the block")


class VisibilityCheck(ProgramCheck):
    """PG014: a dep on a task whose scope has closed, a `taskids` outside the task's scopes;
    PG037: a tensor used after the scope that allocates it has closed."""

    name = "visibility"

    def run(self, program: Program, bag: DiagnosticBag) -> None:
        p = program
        held = {s.id: {n for n, _ in s.taskids} for s in p.scopes}
        for s in p.scopes:
            for name, span in s.taskids:
                ts = p.tilesets.get(name)
                if ts is not None and s.id not in p.ancestors(ts.scope):
                    bag.add("PG014", f"taskids '{name}' must stand in a scope that encloses the task", span,
                            [Note(f"'{name}' is declared here", ts.span)])
        for d in p.dispatches:
            chain = p.ancestors(d.scope)
            for dep in d.deps:
                if dep.kind is not DepKind.TILES:
                    continue
                ts = p.tilesets[dep.target]
                if ts.scope in chain or any(dep.target in held[s] for s in chain):
                    continue
                common = next(s for s in p.ancestors(ts.scope) if s in chain)
                bag.add(
                    "PG014", f"'{d.name}' depends on '{dep.target}', whose scope has already closed", dep.span,
                    [Note(f"'{dep.target}' is declared in this scope", p.scopes[ts.scope].span),
                     Note("a scope that encloses both", p.scopes[common].span)],
                    hint=f"a TaskId is a local of its PTO2_SCOPE: declare `taskids {dep.target}` in the scope that "
                         "encloses both (pypto: a TASK_ID array hoisted into the consumer's scope)",
                    fix=fix(declare_taskids(p.scopes[common], dep.target)))
            self.buffers(p, f"'{d.name}'", d.scope, [a.region.tensor for a in d.args if a.region is not None]
                         + [a.region.tensor for a in d.accesses], d.span, bag)
        for lp in p.loops:
            for c in lp.carries:
                if c.kind is CarryKind.TENSOR:
                    inner = lp.body_scope if lp.body_scope is not None else lp.parent_scope
                    self.buffers(p, f"carry '{c.name}'", lp.parent_scope, [c.init], c.span, bag)
                    self.buffers(p, f"carry '{c.name}'", inner, [c.next], c.span, bag)

    @staticmethod
    def buffers(p: Program, who: str, scope: int, names: list[str], span: Span, bag: DiagnosticBag) -> None:
        chain = p.ancestors(scope)
        for name in dict.fromkeys(names):
            t = p.tensors.get(name)
            if t is None or t.storage is Storage.EXTERNAL:
                continue
            home = t.scope  # the scope whose heap holds it (a manual scope's buffers live in its parent)
            if home is None or home in chain:
                continue
            bag.add("PG037", f"{who} uses tensor '{name}' outside the scope that allocates it", span,
                    [Note(f"'{name}' is declared in this scope, and freed when it ends", p.scopes[home].span)],
                    hint=f"declare '{name}' in a scope that encloses every use (a scope's buffers are freed at "
                         "its end, FIFO per ring)")
