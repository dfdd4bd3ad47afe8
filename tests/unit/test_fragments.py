"""`fragment NAME { ... }` / `use NAME` and the choice of the entry among the files.

The main check is independent of the lowering: a small textual expander below replaces every
`use NAME` line with the fragment's text (and drops the fragment declarations). The program
planned from that text must equal, span for span aside, the one lowered from the fragments:
for the two real specs and for small ones. Expected diagnostic locations are looked up in the
spec text, never copied from pgraph's output.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import attrs
import pytest

from pgraph.backends.report import report_facts
from pgraph.diagnostics import Diagnostic, DiagnosticBag, Severity
from pgraph.expr import free_vars
from pgraph.frontend import ast
from pgraph.frontend.parser import parse_source
from pgraph.pipeline import Options, compile_program, plan_program
from pgraph.source import SourceFile, Span
from tests.conftest import HEAD_SPEC, SPECS, VARIANT_762

# ---- an independent, textual expansion -------------------------------------------------------

FRAGMENT = re.compile(r"^fragment\s+(\w+)\s*\{", re.M)
ENTRY = re.compile(r"^entry\s+\w+\s*\{", re.M)
USE = re.compile(r"^[ \t]*use\s+(\w+)[ \t]*(?:#[^\n]*)?\n", re.M)


def _close(text: str, brace: int) -> int:
    """Index just past the `}` matching the `{` at `brace` (comments and strings skipped)."""
    depth, i = 0, brace
    while i < len(text):
        ch = text[i]
        if ch == "#":
            i = text.index("\n", i)
            continue
        if ch == '"':
            i = text.index('"', i + 1)
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise AssertionError("unbalanced braces")


def take_blocks(text: str, head: re.Pattern[str]) -> tuple[str, dict[str, str]]:
    """`text` without the top-level blocks `head` matches, and each block's body by name."""
    bodies: dict[str, str] = {}
    while m := head.search(text):
        end = _close(text, m.end() - 1)
        name = m.group(1) if m.groups() else str(len(bodies))
        bodies[name] = text[m.end():end - 1]
        text = text[:m.start()] + text[end:]
    return text, bodies


def inline(text: str, fragments: dict[str, str]) -> str:
    """Replace every `use NAME` line with the fragment's body, recursively."""
    while m := USE.search(text):
        text = text[:m.start()] + fragments[m.group(1)].strip("\n") + "\n" + text[m.end():]
    return text


def canon(x: Any) -> Any:
    """The Program IR as plain data with every Span dropped."""
    if isinstance(x, Span):
        return None
    if attrs.has(type(x)):
        return {f.name: canon(getattr(x, f.name)) for f in attrs.fields(type(x))
                if f.name not in ("span", "name_span", "entry_span")} | {"_": type(x).__name__}
    if isinstance(x, dict):
        return [(k, canon(v)) for k, v in x.items()]  # insertion order is part of the IR
    if isinstance(x, (list, tuple)):
        return [canon(v) for v in x]
    return x


def lower(path: Path) -> Any:
    bag = DiagnosticBag()
    program = compile_program(path, Options(), bag)
    assert program is not None, [d.message for d in bag.items]
    return program


def test_head_spec_equals_its_textual_expansion(tmp_path: Path) -> None:
    text, fragments = take_blocks(HEAD_SPEC.read_text(encoding="utf-8"), FRAGMENT)
    assert len(fragments) >= 9 and not FRAGMENT.search(text)
    for name in ("qwen3_14b.pgl", "decode_common.pgl"):
        shutil.copy(SPECS / name, tmp_path / name)
    flat = tmp_path / "decode_layer_flat.pgl"
    flat.write_text(inline(text, fragments), encoding="utf-8")
    assert "use " not in re.sub(r"#[^\n]*", "", flat.read_text(encoding="utf-8"))
    assert canon(lower(flat)) == canon(lower(HEAD_SPEC))


def test_762_spec_equals_its_textual_expansion(tmp_path: Path) -> None:
    head, head_fragments = take_blocks(HEAD_SPEC.read_text(encoding="utf-8"), FRAGMENT)
    _, head_entry = take_blocks(head, ENTRY)
    assert len(head_entry) == 1  # the HEAD entry, which the variant does not run
    text, own = take_blocks(VARIANT_762.read_text(encoding="utf-8"), FRAGMENT)
    assert not set(own) & set(head_fragments)
    text = text.replace('include "../decode_layer.pgl"', 'include "qwen3_14b.pgl"\ninclude "decode_common.pgl"')
    for name in ("qwen3_14b.pgl", "decode_common.pgl"):
        shutil.copy(SPECS / name, tmp_path / name)
    flat = tmp_path / "decode_layer_762_flat.pgl"
    flat.write_text(inline(text, {**head_fragments, **own}), encoding="utf-8")
    assert canon(lower(flat)) == canon(lower(VARIANT_762))


def test_762_takes_the_shared_tasks_from_the_head_spec() -> None:
    """Which dispatch is declared where, by hand from §2.2/§2.4: T1 differs in rows 2, 10, 11
    and 17; rows 1-9 share HEAD's fragments, which are in the same program order."""
    program = lower(VARIANT_762)
    by_file: dict[str, set[str]] = {}
    for d in program.dispatches:
        by_file.setdefault(Path(d.span.filename).name, set()).add(d.name)
    assert by_file["decode_layer_762.pgl"] == {
        "attn_out_seed", "rope_qkv", "fa_fused", "gate_proj", "up_proj",       # rows 2, 10, 11, 17
    }
    assert by_file["decode_layer.pgl"] == {
        "pa_tiling", "prev_out", "copy_hidden", "x_gamma0",                   # entry_setup
        "copy_out",                                                            # output_copy
        "seed_dummy", "rms_recip", "q_seed", "q_proj",                         # rows 1, 3-5
        "kv_seed", "mlp_out_seed", "k_proj", "v_proj",                         # rows 6-9
        "out_proj_dummy", "out_proj.deferred", "out_proj.direct",              # rows 12-14
        "residual_rms_cast", "post_rms_reduce", "silu", "down_proj", "dcr_xgamma",  # rows 15, 16, 18-20
    }
    head = {d.name: d.span for d in lower(HEAD_SPEC).dispatches}
    for d in program.dispatches:
        if Path(d.span.filename).name == "decode_layer.pgl":
            assert (d.span.line, d.span.col) == (head[d.name].line, head[d.name].col), d.name


# ---- small specs -----------------------------------------------------------------------------

PRELUDE = """\
const B = 16
const N = 4
tensor x : f32[N * B, 64] external
tensor y : f32[B, 64] external
kernel bump aiv (a : inout f32[B, 64])
kernel copy aiv (src : in f32[B, 64], dst : out f32[B, 64])
"""


def write(tmp_path: Path, text: str, name: str = "spec.pgl") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def line_of(path: Path, needle: str, occurrence: int = 0) -> int:
    hits = [i for i, t in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if needle in t]
    return hits[occurrence]


def errors(bag: DiagnosticBag) -> list[Diagnostic]:
    return [d for d in bag.sorted() if d.level is Severity.ERROR]


def used_here(diag: Diagnostic) -> list[tuple[str, int]]:
    """(fragment, line) of every 'used here' note, in order."""
    out = []
    for n in diag.notes:
        m = re.fullmatch(r"fragment '(\w+)' is used here", n.message)
        if m and n.span is not None:
            out.append((m.group(1), n.span.line))
    return out


def test_use_and_fragment_are_keywords_only_where_a_statement_starts() -> None:
    text = ("fragment use { tensor fragment : f32[1]  use use }\n"
            "entry e { let use = 1  at fragment deps(use) { call use(fragment) } }\n")
    module = parse_source(SourceFile("<t>", text), DiagnosticBag())
    assert module is not None
    frag, entry = module.items
    assert isinstance(frag, ast.Fragment) and frag.name == "use"
    assert [type(s).__name__ for s in frag.block.stmts] == ["TensorDecl", "Use"]
    assert isinstance(entry, ast.Entry)
    let, task = entry.block.stmts
    assert isinstance(let, ast.Let) and let.name == "use"
    assert isinstance(task, ast.Task) and task.name == "fragment" and task.deps and task.deps[0].name == "use"


def test_small_spec_equals_its_textual_expansion(tmp_path: Path) -> None:
    """Nested uses, a use inside a loop and a phase, lets and tensors declared by fragments."""
    text = PRELUDE + """
fragment buffers {
  tensor t : f32[B, 64]
  let row = L * B                                # a let of the use site's loop variable
}
fragment step {
  phase work {
    at load deps(prev) { call copy(x[row +: B, :], t) }
    use finish
  }
}
fragment finish {
  at done deps(load) { call bump(t) }            # phase `work`: the enclosing phase at the use
}
entry main {
  at first { call bump(y) }
  for L in 0..N carry prev = first then done {
    use buffers
    manual scope {
      use step
    }
  }
}
"""
    path = write(tmp_path, text)
    rest, fragments = take_blocks(text, FRAGMENT)
    flat = write(tmp_path, inline(rest, fragments), "flat.pgl")
    program = lower(path)
    assert canon(program) == canon(lower(flat))
    load = next(d for d in program.dispatches if d.name == "load")
    assert load.phase == "work" and load.loops == (0,)
    assert next(d for d in program.dispatches if d.name == "done").phase == "work"
    plan, bag = plan_program(path)
    assert plan is not None and not errors(bag)
    assert report_facts(plan)["per_layer"]["tasks"] == 2 and report_facts(plan)["summary"]["tasks"] == 1 + 4 * 2


def test_a_fragment_may_be_declared_after_its_use_and_may_be_empty(tmp_path: Path) -> None:
    path = write(tmp_path, PRELUDE + "entry main {\n  use nothing\n  use one\n}\n"
                 "fragment one { at a { call bump(y) } }\nfragment nothing { }\n")
    assert [d.name for d in lower(path).dispatches] == ["a"]


def test_names_resolve_at_each_use_site(tmp_path: Path) -> None:
    """A fragment of lets used in two loops: each use binds K to its own loop, and the lets
    stay visible after the `use`, as if written there."""
    path = write(tmp_path, PRELUDE + """
fragment rows {
  let first_row = K * B
}
entry main {
  for K in 0..2 unscoped {
    use rows
    at head { call copy(x[first_row +: B, :], y) }
  }
  for K in 2..N unscoped {
    use rows
    at tail deps(head) { call copy(x[first_row +: B, :], y) }
  }
}
""")
    program = lower(path)
    head, tail = program.dispatches
    assert (head.loops, tail.loops) == ((0,), (1,))
    assert (program.loops[0].axis.lo, program.loops[1].axis.lo) == (0, 2)
    for d in (head, tail):
        (read,) = [a for a in d.accesses if a.region.tensor == "x"]
        dim = read.region.dims[0]
        assert dim.kind == "extent" and free_vars(dim.a) == {"K"}


# ---- diagnostics -----------------------------------------------------------------------------


def test_errors_inside_a_fragment_point_at_it_and_at_each_use(tmp_path: Path) -> None:
    """Lowering (a bad name), later lowering checks (an unknown dep) and expansion (a region out
    of bounds) all locate the error in the fragment and add the chain of uses."""
    path = write(tmp_path, PRELUDE + """
fragment outer {
  use inner
}
fragment inner {
  at a { call bump(y[0 +: Q, :]) }
  at b deps(nobody) { call bump(y) }
  at c { call copy(x[K * B + 1 +: B, :], y) }
}
entry main {
  for K in 0..N unscoped {
    use outer
  }
}
""")
    _, bag = plan_program(path)
    got = {d.code: d for d in errors(bag)}
    assert set(got) == {"PG002"}  # lowering stops before expansion
    q, nobody = sorted((d for d in errors(bag)), key=lambda d: d.span.line if d.span else 0)
    assert q.span is not None and q.span.line == line_of(path, "y[0 +: Q")
    assert nobody.span is not None and nobody.span.line == line_of(path, "deps(nobody)")
    chain = [("inner", line_of(path, "use inner")), ("outer", line_of(path, "use outer"))]
    assert used_here(q) == chain and used_here(nobody) == chain
    # fix both: the region at K = N-1 now reaches one row past x (expansion, PG007)
    path.write_text(path.read_text().replace("0 +: Q", "0 +: B").replace("deps(nobody) ", ""))
    _, bag = plan_program(path)
    (oob,) = errors(bag)
    assert oob.code == "PG007" and oob.span is not None and oob.span.line == line_of(path, "K * B + 1")
    assert used_here(oob) == chain


def test_planner_notes_inside_a_fragment_name_every_use(tmp_path: Path) -> None:
    path = write(tmp_path, PRELUDE + """
fragment seed {
  at a { call bump(y) }
}
entry main {
  manual scope {
    use seed
    at b deps(a) { call bump(y) }
  }
}
""")
    plan, bag = plan_program(path)
    assert plan is not None and not errors(bag)
    blocked = next(d for d in bag.items if d.code == "PG105" and "'a'" in d.message)
    assert blocked.span is not None and blocked.span.line == line_of(path, "at a {")
    assert used_here(blocked) == [("seed", line_of(path, "use seed"))]
    assert all(not used_here(d) for d in bag.items if d.span is not None and d.span.line > line_of(path, "entry main"))


def test_recursive_use_is_an_error_with_the_chain(tmp_path: Path) -> None:
    path = write(tmp_path, PRELUDE + """
fragment a { use b }
fragment b { use c }
fragment c { use a }
entry main { use a }
""")
    _, bag = plan_program(path)
    (diag,) = errors(bag)
    assert diag.code == "PG033"
    assert diag.message == "fragment 'a' uses itself: a -> b -> c -> a"
    assert diag.span is not None and diag.span.line == line_of(path, "fragment c")
    assert diag.notes[0].message == "fragment 'a' is declared here"
    assert used_here(diag) == [("c", line_of(path, "fragment b")), ("b", line_of(path, "fragment a")),
                               ("a", line_of(path, "entry main"))]


def test_a_fragment_that_uses_itself_directly(tmp_path: Path) -> None:
    _, bag = plan_program(write(tmp_path, PRELUDE + "fragment f {\n  use f\n}\nentry main { use f }\n"))
    (diag,) = errors(bag)
    assert (diag.code, diag.message) == ("PG033", "fragment 'f' uses itself: f -> f")


def test_unknown_fragment_has_a_did_you_mean_hint(tmp_path: Path) -> None:
    path = write(tmp_path, PRELUDE + "fragment projection { }\nentry main {\n  use projecton\n}\n")
    _, bag = plan_program(path)
    (diag,) = errors(bag)
    assert (diag.code, diag.message, diag.hint) == (
        "PG002", "fragment 'projecton' is not declared", "did you mean 'projection'?")
    assert diag.span is not None and (diag.span.line, diag.span.col) == (line_of(path, "use projecton"), 7)


def test_duplicate_fragment_names(tmp_path: Path) -> None:
    path = write(tmp_path, PRELUDE + "fragment f { }\nfragment f { }\nentry main { use f }\n")
    _, bag = plan_program(path)
    (diag,) = errors(bag)
    assert (diag.code, diag.message) == ("PG003", "fragment 'f' is declared twice")
    assert diag.span is not None and diag.span.line == line_of(path, "fragment f", 1)
    assert diag.notes[0].span is not None and diag.notes[0].span.line == line_of(path, "fragment f")


def test_a_fragment_used_twice_declares_its_tasks_twice(tmp_path: Path) -> None:
    path = write(tmp_path, PRELUDE + """
fragment inner {
  tensor t : f32[B, 64]
  at a { call bump(t) }
}
fragment outer { use inner }
entry main {
  use outer
  use outer
}
""")
    _, bag = plan_program(path)
    tensor, task = errors(bag)
    assert tensor.message == "tensor 't' is declared twice: fragment 'outer' is used more than once"
    assert task.message == "task 'a' is declared twice: fragment 'outer' is used more than once"
    for diag in (tensor, task):
        assert diag.code == "PG003"
        assert diag.notes[0].message == "the first use declares it"
        assert diag.notes[0].span is not None and diag.notes[0].span.line == line_of(path, "use outer")
        assert used_here(diag) == [("inner", line_of(path, "use inner")), ("outer", line_of(path, "use outer", 1))]


# ---- entry selection -------------------------------------------------------------------------


def two_files(tmp_path: Path, root_tail: str) -> Path:
    write(tmp_path, PRELUDE + "fragment work {\n  at a { call bump(y) }\n}\nentry lib_main { use work }\n", "lib.pgl")
    return write(tmp_path, 'include "lib.pgl"\n' + root_tail, "root.pgl")


def test_the_root_entry_wins_over_an_included_one(tmp_path: Path) -> None:
    program = lower(two_files(tmp_path, "entry mine {\n  use work\n  at b { call bump(y) }\n}\n"))
    assert program.entry == "mine" and [d.name for d in program.dispatches] == ["a", "b"]


def test_the_only_included_entry_is_used_when_the_root_has_none(tmp_path: Path) -> None:
    program = lower(two_files(tmp_path, "const EXTRA = 1\n"))
    assert program.entry == "lib_main" and [d.name for d in program.dispatches] == ["a"]


def test_several_included_entries_and_none_in_the_root(tmp_path: Path) -> None:
    write(tmp_path, "entry other { }\n", "other.pgl")
    root = two_files(tmp_path, 'include "other.pgl"\n')
    _, bag = plan_program(root)
    (diag,) = errors(bag)
    assert diag.code == "PG034"
    files = f"{(tmp_path / 'lib.pgl').resolve()}, {(tmp_path / 'other.pgl').resolve()}"
    assert diag.message == f"the root file declares no entry, and 2 included files do ({files})"
    assert diag.span is not None and diag.span.filename.endswith("root.pgl")
    assert diag.span.line == line_of(root, 'include "other.pgl"')
    assert [n.message for n in diag.notes] == ["entry 'lib_main' is declared here", "entry 'other' is declared here"]


def test_two_entries_in_one_file_and_no_entry(tmp_path: Path) -> None:
    _, bag = plan_program(write(tmp_path, PRELUDE + "entry a { }\nentry b { }\n"))
    assert [(d.code, d.message) for d in errors(bag)] == [("PG003", "entry 'b' is declared twice")]
    _, bag = plan_program(write(tmp_path, PRELUDE, "none.pgl"))
    assert [d.code for d in errors(bag)] == ["PG002"]


@pytest.mark.parametrize("spec", [HEAD_SPEC, VARIANT_762], ids=["HEAD", "762"])
def test_real_specs_keep_their_entry(spec: Path) -> None:
    program = lower(spec)
    assert program.entry == "decode_fwd_layers"
    assert Path(program.entry_span.filename).name == spec.name


def test_language_doc_shows_the_layer_example_file() -> None:
    """docs/language.md §3.1 shows tests/examples/lang_layer.pgl verbatim (its §3.2 example includes it)."""
    root = Path(__file__).resolve().parents[2]
    doc = (root / "docs" / "language.md").read_text(encoding="utf-8")
    shown = (root / "tests" / "examples" / "lang_layer.pgl").read_text(encoding="utf-8")
    assert f"```pgl\n{shown}```" in doc
