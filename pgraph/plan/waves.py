"""Checks of tile sets and their waves: each tile in exactly one wave (PG021), waves inside the
tile space (PG026), and deps that one task can wait on (PG027)."""

from __future__ import annotations

import itertools
import math

from pgraph.diagnostics import DiagnosticBag, Note
from pgraph.expr import free_vars
from pgraph.findings import NoWave
from pgraph.ir.program import IAxis, Program, TileSet
from pgraph.kinds import TaskKind
from pgraph.plan.base import ProgramCheck

#: Tiles scanned to name one that no wave (or two waves) take.
SCAN_LIMIT = 1_000_000


def _tile(ts: TileSet, coord: tuple[int, ...]) -> str:
    return f"{ts.name}[{', '.join(f'{a.var}={v}' for a, v in zip(ts.axes, coord))}]"


def _inside(box: tuple[IAxis, ...], coord: tuple[int, ...]) -> bool:
    return all(a.lo <= c < a.hi for a, c in zip(box, coord))


class WavesCheck(ProgramCheck):
    """PG026 waves outside the tile space; PG021 waves that overlap, or leave a tile uncovered."""

    name = "waves"

    def run(self, program: Program, bag: DiagnosticBag) -> None:
        for ts in program.tilesets.values():
            if ts.kind is TaskKind.TILES and ts.waves:
                self.tileset(ts, bag)

    def tileset(self, ts: TileSet, bag: DiagnosticBag) -> None:
        full = {a.var: a for a in ts.axes}
        bad = False
        for w in ts.waves:
            for a in w.box:
                f = full[a.var]
                if a.size and not (f.lo <= a.lo and a.hi <= f.hi):
                    bag.add("PG026", f"wave '{w.name}' selects {a.var} in {a.lo}..{a.hi}, outside {f.lo}..{f.hi}", a.span)
                    bad = True
        if bad:
            return
        for i, wa in enumerate(ts.waves):
            for wb in ts.waves[i + 1:]:
                if all(max(x.lo, y.lo) < min(x.hi, y.hi) for x, y in zip(wa.box, wb.box)):
                    both = tuple(max(x.lo, y.lo) for x, y in zip(wa.box, wb.box))
                    bag.add("PG021", f"waves '{wa.name}' and '{wb.name}' of '{ts.name}' both take some tiles "
                            f"(e.g. {_tile(ts, both)})", wb.span, [Note(f"wave '{wa.name}'", wa.span)],
                            hint="make the wave ranges disjoint")
                    return
        total = math.prod(a.size for a in ts.axes)
        covered = sum(math.prod(a.size for a in w.box) for w in ts.waves)
        if covered == total:
            return
        missing = ""
        if total <= SCAN_LIMIT:
            for coord in itertools.product(*(range(a.lo, a.hi) for a in ts.axes)):
                if not any(_inside(w.box, coord) for w in ts.waves):
                    missing = f"; no wave takes {_tile(ts, coord)}"
                    break
        bag.add("PG021", f"the waves of '{ts.name}' cover {covered} of its {total} tiles{missing}", ts.span,
                hint="every tile must belong to exactly one wave")


class WaveDepsCheck(ProgramCheck):
    """PG027: a dep expression that uses an SPMD block index (one task waits for all its deps;
    a scalar that does is PG040, pgraph.plan.signatures)."""

    name = "wave-deps"

    def run(self, program: Program, bag: DiagnosticBag) -> None:
        for d in program.dispatches:
            block_vars = {a.var for a in d.block_axes}
            if not block_vars:
                continue
            for dep in d.deps:
                for sel in dep.sels or ():
                    for e in (sel.a, sel.b):
                        used = free_vars(e) & block_vars if e is not None else set()
                        if used and e is not None:
                            bag.add("PG027", f"a dep of '{d.name}' uses SPMD block index {', '.join(sorted(used))}; "
                                    "one task waits for all its deps", e.span,
                                    hint="deps may use the task indices and loop variables only")


def no_wave(f: NoWave, bag: DiagnosticBag) -> None:
    """PG021 met by the form checks (pgraph.findings): a `tiles` declaration with no wave covers nothing."""
    bag.add("PG021", f"tiles '{f.tileset}' declares no wave", f.span, f.notes,
            hint="add `wave NAME ... : parallel|spmd ...` lines that cover every tile once")
