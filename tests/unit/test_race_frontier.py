"""The race analysis through `plan/race_frontier.py` (every buffer forced there: PAIR_LIMIT = -1)
equals the reference (PGRAPH_REFERENCE=1: every conflicting pair listed, then asked of the
happens-before): the same `plan --format json` report and diagnostics on every spec of the
corpus and on generated programs (tests/differential/programs.py), and the same races as an
O(n^2) oracle (every pair of touches tested, ancestor bitsets) on generated racy programs with
nested loops and many conflicting pairs, where the witnesses are bounded.
"""

from __future__ import annotations

import itertools
import random
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from pgraph.ir.instances import overlap
from pgraph.kinds import AccessKind
from pgraph.pipeline import Options, plan_program
from pgraph.plan import races
from pgraph.plan.races import find_races, touches_by_buffer
from tests.differential.programs import RandomChooser, generate, render
from tests.unit.test_diagnostics import spec_options
from tests.unit.test_fast_paths_plan import SPECS, outcome


def two_ways(spec: Path, opts: Options, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    with monkeypatch.context() as m:
        m.setenv("PGRAPH_REFERENCE", "1")
        reference = outcome(spec, opts)
    with monkeypatch.context() as m:
        m.delenv("PGRAPH_REFERENCE", raising=False)
        m.setattr(races, "PAIR_LIMIT", -1)
        forced = outcome(spec, opts)
    return reference, forced


@pytest.mark.parametrize("spec", SPECS, ids=lambda p: p.name)
def test_corpus_plans_the_same_through_the_frontier(spec: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    opts, _ = spec_options(spec)
    reference, forced = two_ways(spec, opts, monkeypatch)
    assert forced == reference


def test_generated_programs_plan_the_same_through_the_frontier(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = tmp_path / "g.pgl"
    differ = []
    for seed in range(120):
        spec.write_text(render(generate(RandomChooser(seed))), encoding="utf-8")
        reference, forced = two_ways(spec, Options(), monkeypatch)
        if forced != reference:
            differ.append(seed)
    assert not differ, f"seeds whose plan differs through the frontier: {differ[:10]}"


# ---- generated racy programs against an O(n^2) oracle ---------------------------------------

def racy_program(rng: random.Random, rows: int = 16, cols: int = 16) -> str:
    """Nested loops of tasks on tiles of two tensors: writers, readers and atomic adds of
    random tiles, some ordered by deps on the previous task, most not."""
    lines = [f"tensor a : f32[{rows}, {cols}] external", f"tensor b : f32[{rows}, {cols}] external",
             f"view av = a as [{cols}, {rows}]",
             "kernel w aiv (dst : out f32)", "kernel r aiv (src : in f32)", "kernel rw aiv (dst : inout f32)",
             "kernel ad aiv (dst : atomic_add f32)", "entry main {", f"  {rng.choice(['manual', 'auto'])} scope {{"]
    names: list[str] = []

    def region() -> str:
        t = rng.choice(["a", "a", "b", "av"])
        n, m = (cols, rows) if t == "av" else (rows, cols)
        h, w = rng.choice([1, 2, 4, n]), rng.choice([1, 4, m])
        i0, j0 = rng.randrange(0, n - h + 1), rng.randrange(0, m - w + 1)
        return f"{t}[{i0}:{i0 + h}, {j0}:{j0 + w}]"

    def task(ind: str, k: int, loops: list[str]) -> str:
        name = f"t{k}"
        kernel = rng.choice(["w", "r", "rw", "ad", "w", "rw"])
        dep = f" deps({rng.choice(names)})" if names and rng.random() < 0.4 else ""
        reg = region()
        if loops and rng.random() < 0.6:  # a tile that moves with the loop
            v = rng.choice(loops)
            t = reg.split("[")[0]
            reg = f"{t}[{v} % 4 * 4 +: 4, :]" if t != "av" else f"av[{v} % 4 * 4 +: 4, 0:16]"
        names.append(name)
        return f"{ind}at {name}{dep} {{ call {kernel}({reg}) }}"

    k = 0
    for outer in range(rng.randint(2, 3)):
        lines.append(f"    for i{outer} in 0..{rng.randint(2, 4)} unscoped {{")
        for inner in range(rng.randint(1, 2)):
            lines.append(f"      for j{outer}{inner} in 0..{rng.randint(2, 4)} unscoped {{")
            for _ in range(rng.randint(2, 4)):
                lines.append(task("        ", k, [f"i{outer}", f"j{outer}{inner}"]))
                k += 1
            lines.append("      }")
        for _ in range(rng.randint(1, 3)):
            lines.append(task("      ", k, [f"i{outer}"]))
            k += 1
        lines.append("    }")
    lines += ["  }", "}"]
    return "\n".join(lines) + "\n"


def oracle_races(plan: Any) -> dict[tuple[Any, str, str], set[tuple[int, int]]]:
    """(buffer, earlier dispatch, later dispatch) -> every racing pair: every two touches of a
    buffer tested (`instances.overlap`), ordering by ancestor bitsets of the whole graph."""
    g = plan.graph
    anc = [0] * len(g.instances)
    for v in range(len(g.instances)):
        for u in g.pred[v]:
            anc[v] |= anc[u] | (1 << u)
    out: dict[tuple[Any, str, str], set[tuple[int, int]]] = defaultdict(set)
    for key, touches in touches_by_buffer(plan).items():
        for (na, ka, ba, ta), (nb, kb, bb, tb) in itertools.combinations(touches, 2):
            if na == nb or (ka is kb and ka in (AccessKind.READ, AccessKind.ATOMIC)):
                continue
            a, b = min(na, nb), max(na, nb)
            if anc[b] >> a & 1 or not overlap(ba, ta, bb, tb, plan.program):
                continue
            out[(key, g.instances[a].dispatch, g.instances[b].dispatch)].add((a, b))
    return out


@pytest.mark.parametrize("limit", [-1, 1 << 62])
def test_racy_programs_race_as_the_oracle_says(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, limit: int) -> None:
    """30 generated programs (--full), through the frontier (limit -1) and listed (a huge limit),
    with RACE_WITNESSES lowered to 3 so that many dispatch pairs are bounded."""
    spec = tmp_path / "racy.pgl"
    monkeypatch.delenv("PGRAPH_REFERENCE", raising=False)
    monkeypatch.setattr(races, "PAIR_LIMIT", limit)
    monkeypatch.setattr(races, "RACE_WITNESSES", 3)
    bounded = racing = 0
    for seed in range(30):
        spec.write_text(racy_program(random.Random(seed)), encoding="utf-8")
        plan, bag = plan_program(spec, Options(full=True))
        assert plan is not None, bag.sorted()[:3]
        want = oracle_races(plan)
        got: dict[tuple[Any, str, str], list[tuple[int, int]]] = defaultdict(list)
        for r in find_races(plan):
            got[(r.buffer, plan.graph.instances[r.first].dispatch, plan.graph.instances[r.second].dispatch)].append(
                (r.first, r.second))
        assert set(got) == {k for k, v in want.items() if v}, seed
        for key, pairs in got.items():
            assert pairs == sorted(set(pairs)) and set(pairs) <= want[key], (seed, key)
            if len(want[key]) <= 3:
                assert set(pairs) == want[key], (seed, key)
            else:
                bounded += 1
                assert len(pairs) == 4, (seed, key)
        racing += bool(want)
    assert racing >= 25 and bounded >= 20, (racing, bounded)


@pytest.mark.parametrize("listed", [True, False])
@pytest.mark.parametrize(("n", "text"), [(14, "(91 instance pairs)"), (15, "more than 100 instance pairs"),
                                         (400, "more than 100 instance pairs")])
def test_witnesses_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, n: int, text: str, listed: bool) -> None:
    """n unordered tasks of one grid updating one tensor race pairwise: n(n-1)/2 pairs (91 for
    14, 105 for 15). Up to RACE_WITNESSES the diagnostic counts them all; beyond, it says there
    are more than that, and the Races fact holds RACE_WITNESSES + 1 of them. Same whether the
    buffer's pairs are listed or searched by the frontier."""
    spec = tmp_path / "grid.pgl"
    spec.write_text(f"""tensor x : f32[8, 8] external
kernel bump aiv (a : inout f32[8, 8])
entry main {{
  manual scope {{
    parallel w[i in 0..{n}] {{ call bump(x) }}
  }}
}}
""", encoding="utf-8")
    monkeypatch.delenv("PGRAPH_REFERENCE", raising=False)
    monkeypatch.setattr(races, "PAIR_LIMIT", 1 << 62 if listed else -1)
    plan, bag = plan_program(spec, Options())
    assert plan is not None
    pg100 = [d for d in bag.items if d.code == "PG100"]
    assert len(pg100) == 1 and text in pg100[0].message, [d.message for d in pg100]
    assert len(plan.get(races.Races).races) == min(n * (n - 1) // 2, races.RACE_WITNESSES + 1)
