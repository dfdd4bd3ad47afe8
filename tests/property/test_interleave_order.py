"""Property: the instance order of a random `interleave` block equals an independent oracle.

Hypothesis draws blocks of up to six `dummy` declarations (no axis, one or two task axes; a
dummy has no kernel, so no race rule fires and only the order is tested) whose ranges come
from a small pool, so that some share ranges and group and
some do not. The oracle below restates docs/language.md §10.3 with its own code (no pgraph
import): group key = the list of (lo, hi) per axis, or the declaration itself when it has no
axis; groups in the order of their first member; within a group, row-major index, then
declaration order.
"""

from __future__ import annotations

import itertools
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from pgraph.pipeline import Options, plan_program

RANGES = [(0, 2), (0, 3), (1, 3)]
Decl = tuple[str, tuple[tuple[int, int], ...]]     # name, ranges


@st.composite
def blocks(draw: st.DrawFn) -> list[Decl]:
    n = draw(st.integers(1, 6))
    out: list[Decl] = []
    for i in range(n):
        rank = draw(st.integers(0, 2))
        out.append((f"d{i}", tuple(draw(st.sampled_from(RANGES)) for _ in range(rank))))
    return out


def _spec(decls: list[Decl]) -> str:
    lines = []
    for name, ranges in decls:
        axes = ", ".join(f"v{j} in {lo}..{hi}" for j, (lo, hi) in enumerate(ranges))
        lines.append(f"      dummy {name}" + (f"[{axes}]" if ranges else ""))
    return "entry main {\n  manual scope {\n    interleave {\n" + "\n".join(lines) + "\n    }\n  }\n}\n"


def _oracle(decls: list[Decl]) -> list[str]:
    groups: list[tuple[object, list[Decl]]] = []
    for d in decls:
        key: object = d[1] if d[1] else ("alone", d[0])
        for gkey, members in groups:
            if gkey == key:
                members.append(d)
                break
        else:
            groups.append((key, [d]))
    out = []
    for _key, members in groups:
        ranges = members[0][1]
        for index in itertools.product(*(range(lo, hi) for lo, hi in ranges)):
            for name, _r in members:
                label = ",".join(f"v{j}={v}" for j, v in enumerate(index))
                out.append(f"{name}[{label}]" if ranges else name)
    return out


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(blocks())
def test_interleave_order_matches_the_oracle(tmp_path_factory, decls: list[Decl]) -> None:  # type: ignore[no-untyped-def]
    path = Path(tmp_path_factory.mktemp("il")) / "s.pgl"
    path.write_text(_spec(decls), encoding="utf-8")
    plan, bag = plan_program(path, Options())
    errors = [d for d in bag.items if d.level.value == "error"]
    assert plan is not None and not errors, [d.message for d in bag.items]
    got = [i.label for i in plan.graph.instances if i.kind != "alloc"]
    assert got == _oracle(decls)
