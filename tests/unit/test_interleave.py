"""`interleave { ... }`: which declarations form a group and the submission order they get.

Expected orders are written out by hand from the rule in docs/language.md §10.3: members with
equal task index ranges are submitted index by index (row-major), groups in the order of their
first member, and a declaration without a task index is a group of one where it is declared.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pgraph.cli import main
from pgraph.pipeline import Options, plan_program

PRELUDE = """\
const R = 8
tensor x : f32[R, 64] external
tensor y : f32[R, 64] external
kernel k1 aiv (a : in f32[R, 16], b : out f32[R, 16])
kernel k4 aiv (a : in f32[R, 64], b : out f32[R, 64])
"""


def _order(tmp_path: Path, body: str) -> list[str]:
    spec = tmp_path / "s.pgl"
    spec.write_text(PRELUDE + "entry main {\n  manual scope {\n" + body + "\n  }\n}\n", encoding="utf-8")
    plan, bag = plan_program(spec, Options())
    assert plan is not None and not bag.has_errors, [d.message for d in bag.items]
    return [i.label for i in plan.graph.instances if i.kind != "alloc"]


def test_single_tasks_stay_where_they_are_declared(tmp_path: Path) -> None:
    order = _order(tmp_path, """
    interleave {
      at a { call k4(x, y) }
      parallel p[i in 0..2] deps(a) { call k1(x[:, i*16 +: 16], y[:, i*16 +: 16]) }
      parallel q[j in 0..2] deps(p[j]) { call k1(y[:, j*16 +: 16], x[:, j*16 +: 16]) }
      at b deps(q) { call k4(x, y) }
      at c deps(b) { call k4(y, x) }
    }""")
    assert order == ["a", "p[i=0]", "q[j=0]", "p[i=1]", "q[j=1]", "b", "c"]


def test_equal_sizes_of_different_shape_do_not_group(tmp_path: Path) -> None:
    order = _order(tmp_path, """
    interleave {
      parallel p[i in 0..4] { call k1(x[:, i*16 +: 16], y[:, i*16 +: 16]) }
      dummy d[a in 0..2, b in 0..2] deps(p)
      dummy e[i in 1..5] deps(p)
      dummy f[u in 0..2, v in 0..2] deps(d[u, v])
    }""")
    # p (0..4) alone: e is 1..5; d and f share (0..2, 0..2), grouped at d's place
    assert order == ["p[i=0]", "p[i=1]", "p[i=2]", "p[i=3]",
                     "d[a=0,b=0]", "f[u=0,v=0]", "d[a=0,b=1]", "f[u=0,v=1]",
                     "d[a=1,b=0]", "f[u=1,v=0]", "d[a=1,b=1]", "f[u=1,v=1]",
                     "e[i=1]", "e[i=2]", "e[i=3]", "e[i=4]"]


def test_dep_on_a_later_index_of_the_group_is_pg032_with_an_interleave_hint(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "s.pgl"
    spec.write_text(PRELUDE + """entry main {
  manual scope {
    interleave {
      parallel p[i in 0..3] { call k1(x[:, i*16 +: 16], y[:, i*16 +: 16]) }
      parallel q[j in 0..3] deps(p[2]) { call k1(y[:, 48 +: 16], x[:, j*16 +: 16]) }
    }
  }
}
""", encoding="utf-8")
    assert main(["check", str(spec)]) == 1
    err = capsys.readouterr().err
    assert "PG032" in err and "'q[j=0]' depends on 'p[i=2]'" in err
    assert "one `interleave` block" in err


def test_dep_on_a_later_group_names_the_group_order(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "s.pgl"
    spec.write_text(PRELUDE + """entry main {
  manual scope {
    interleave {
      parallel p[i in 0..4] deps(r) { call k1(x[:, i*16 +: 16], y[:, i*16 +: 16]) }
      parallel r[j in 0..2] { call k1(y[:, j*16 +: 16], x[:, j*16 +: 16]) }
    }
  }
}
""", encoding="utf-8")
    assert main(["check", str(spec)]) == 1
    err = capsys.readouterr().err
    assert "PG032" in err and "different groups" in err and "order of their first member" in err
