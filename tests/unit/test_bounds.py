"""The one slice -> interval rule (`pgraph.ir.bounds.slice_bounds`) and the places that use it.

Expected intervals are worked out by hand from docs/language.md §11.1 (regions: `:` is [0, n),
`e` is [e, e+1), `a:b` is [a, b), `a +: n` is [a, a+n)) and §12 (dep selections: `*` the whole
tile axis, `a..b` tiles a <= i < b), with the Qwen3-14B decode's constants (HIDDEN 5120, 40
layers, the K slices of the projections, BATCH_PAD 16).
"""

from __future__ import annotations

import ast
import itertools

import pytest

from pgraph.expand.compiled import region_function, selection_function
from pgraph.expr import BinOp, EvalError, Expr, Name, Num, evaluate
from pgraph.ir import program as ir
from pgraph.ir.bounds import slice_bounds
from pgraph.ir.queries import Evaluator, RegionError, region_shape
from pgraph.kinds import DimKind
from pgraph.source import SourceFile, Span
from tests.conftest import ROOT

SPAN = Span(SourceFile("<bounds>", "x\n"), 1, 1, 1, 2)
HIDDEN = 5120
NUM_LAYERS = 40


def n(v: int) -> Num:
    return Num(v, SPAN)


def v(name: str) -> Name:
    return Name(name, SPAN)


def op(o: str, a: Expr, b: Expr) -> BinOp:
    return BinOp(o, a, b, SPAN)


def values(kind: DimKind, a: Expr | None, b: Expr | None, whole: tuple[int, int], env: dict[str, int]
           ) -> tuple[int, int, int]:
    sb = slice_bounds(kind, a, b, whole, SPAN)
    return evaluate(sb.lo, env), evaluate(sb.hi, env), evaluate(sb.size, env)


# (kind, a, b, whole, env, hand-computed (lo, hi, size))
CASES = [
    # `:` on the hidden dimension of hidden[BATCH_PAD, HIDDEN]
    (DimKind.ALL, None, None, (0, HIDDEN), {}, (0, 5120, 5120)),
    # `*` on a tile axis `c in 2..7` (an axis need not start at 0)
    (DimKind.ALL, None, None, (2, 7), {}, (2, 7, 5)),
    # `L` on input_rms_weight[NUM_LAYERS, HIDDEN], last layer
    (DimKind.INDEX, v("L"), None, (0, NUM_LAYERS), {"L": 39}, (39, 40, 1)),
    # wq rows `L*HIDDEN + k*1024 +: 1024`, layer 39, K slice 4: the last rows of the tensor
    (DimKind.EXTENT, op("+", op("*", v("L"), n(HIDDEN)), op("*", v("k"), n(1024))), n(1024),
     (0, NUM_LAYERS * HIDDEN), {"L": 39, "k": 4}, (203776, 204800, 1024)),
    # `i*512 : (i+1)*512`, i = 3
    (DimKind.RANGE, op("*", v("i"), n(512)), op("*", op("+", v("i"), n(1)), n(512)), (0, HIDDEN), {"i": 3},
     (1536, 2048, 512)),
    # reversed range `(c+1)*1024 : c*1024` (PG006's example): a negative size, not refused here
    (DimKind.RANGE, op("*", op("+", v("c"), n(1)), n(1024)), op("*", v("c"), n(1024)), (0, HIDDEN), {"c": 2},
     (3072, 2048, -1024)),
    # empty extent `a +: 0`
    (DimKind.EXTENT, v("a"), n(0), (0, HIDDEN), {"a": 5120}, (5120, 5120, 0)),
    # a negative start (no wrap-around: PG007 at the caller), `i - 1 +: 2` at i = 0
    (DimKind.EXTENT, op("-", v("i"), n(1)), n(2), (0, HIDDEN), {"i": 0}, (-1, 1, 2)),
    # floor division in the start: (i - 5) / 2 at i = 0 is -3 (floor), not -2 (truncation)
    (DimKind.INDEX, op("/", op("-", v("i"), n(5)), n(2)), None, (0, 16), {"i": 0}, (-3, -2, 1)),
    # a selection `t +: n` whose size is a variable (dep on a moving window of tiles)
    (DimKind.EXTENT, v("t"), v("w"), (0, 16), {"t": 14, "w": 3}, (14, 17, 3)),
    # dep range `a..b`, empty when b == a
    (DimKind.RANGE, v("a"), v("a"), (0, 16), {"a": 9}, (9, 9, 0)),
]


@pytest.mark.parametrize("kind, a, b, whole, env, want", CASES)
def test_slice_bounds_hand_computed(kind: DimKind, a: Expr | None, b: Expr | None, whole: tuple[int, int],
                                    env: dict[str, int], want: tuple[int, int, int]) -> None:
    assert values(kind, a, b, whole, env) == want


def test_upper_bound_shares_the_lower_bound_node() -> None:
    """`hi` of `e` and `a +: n` holds `lo`'s node, so the compiled regions evaluate `a` once."""
    a = op("*", v("i"), n(512))
    for kind, b in ((DimKind.INDEX, None), (DimKind.EXTENT, n(512))):
        sb = slice_bounds(kind, a, b, (0, HIDDEN), SPAN)
        assert sb.lo is a and isinstance(sb.hi, BinOp) and sb.hi.left is a


def test_missing_expression_is_an_assertion() -> None:
    with pytest.raises(AssertionError):
        slice_bounds(DimKind.EXTENT, v("a"), None, (0, 4), SPAN)


def test_evaluation_errors_propagate() -> None:
    """A division by zero in a slice is the expression's EvalError (the caller reports it)."""
    sb = slice_bounds(DimKind.INDEX, op("/", n(1), v("z")), None, (0, 4), SPAN)
    with pytest.raises(EvalError):
        evaluate(sb.hi, {"z": 0})


def region(*dims: ir.Dim) -> ir.RegionRef:
    return ir.RegionRef("wq", tuple(dims), None, SPAN)


def test_region_box_checks_what_the_bounds_do_not() -> None:
    """The Evaluator's box is slice_bounds' interval, with PG006 (negative) and PG007 (bounds) refused."""
    ev = Evaluator()
    shape = (NUM_LAYERS * HIDDEN, HIDDEN)
    rows = ir.Dim(DimKind.EXTENT, op("+", op("*", v("L"), n(HIDDEN)), op("*", v("k"), n(1024))), n(1024))
    cols = ir.Dim(DimKind.ALL, None, None)
    r = region(rows, cols)
    assert ev.region_box(r, shape, {"L": 39, "k": 4}) == ((203776, 204800), (0, 5120))
    with pytest.raises(RegionError) as err:
        ev.region_box(r, shape, {"L": 39, "k": 5})   # one slice past the last layer
    assert (err.value.kind, err.value.lo, err.value.hi, err.value.size) == ("bounds", 204800, 205824, 204800)
    rev = region(ir.Dim(DimKind.RANGE, op("*", op("+", v("c"), n(1)), n(1024)), op("*", v("c"), n(1024))), cols)
    with pytest.raises(RegionError) as err:
        ev.region_box(rev, shape, {"c": 2})
    assert (err.value.kind, err.value.lo, err.value.hi) == ("negative", 3072, 2048)
    # a constant slice outside the tensor is checked too (its bounds are numbers)
    with pytest.raises(RegionError):
        ev.region_box(region(ir.Dim(DimKind.RANGE, n(0), n(HIDDEN + 1)), cols), (HIDDEN, HIDDEN), {})
    assert region_shape(r, shape) == [1024, 5120]
    assert region_shape(region(ir.Dim(DimKind.INDEX, v("L"), None), cols), (NUM_LAYERS, HIDDEN)) == [5120]


def test_compiled_regions_and_selections_equal_the_evaluator() -> None:
    """The expander's compiled functions give the Evaluator's boxes and ranges at every index value."""
    ev = Evaluator()
    shape = (NUM_LAYERS * HIDDEN, HIDDEN)
    r = region(ir.Dim(DimKind.EXTENT, op("+", op("*", v("L"), n(HIDDEN)), op("*", v("k"), n(1024))), n(1024)),
               ir.Dim(DimKind.RANGE, op("*", v("k"), n(1024)), op("*", op("+", v("k"), n(1)), n(1024))))
    fn = region_function(r, shape)
    assert fn is not None
    for L, k in itertools.product(range(NUM_LAYERS), range(5)):
        assert fn({"L": L, "k": k}) == ev.region_box(r, shape, {"L": L, "k": k})
    axes = (ir.IAxis("t", 2, 7, SPAN), ir.IAxis("u", 0, 16, SPAN))
    sels = (ir.DepSel(DimKind.ALL, None, None, SPAN), ir.DepSel(DimKind.EXTENT, v("i"), n(3), SPAN))
    sfn = selection_function(sels, axes)
    assert sfn is not None
    for i in range(16):
        want = [range(2, 7), range(i, i + 3)]
        assert sfn({"i": i}) == ev.selection(sels, axes, {"i": i}) == want
    backwards = (ir.DepSel(DimKind.RANGE, v("i"), n(0), SPAN),)
    assert ev.selection(backwards, axes[:1], {"i": 4}) == [range(4, 4)]  # empty, not reversed


#: Modules that name the EXTENT / RANGE kinds to build or print the syntax, not to bound it
#: (plan/fixes.py rewrites the text of a selection, `a +: n` -> `a-k +: n+k+m`, for a machine fix).
SYNTAX_ONLY = {"frontend/parser.py", "frontend/unparse.py", "dump.py", "commands/editor.py", "plan/fixes.py"}


def test_no_second_interval_rule() -> None:
    """Only ir/bounds.py turns `a +: n` / `a:b` into an interval: no other module of pgraph names
    DimKind.EXTENT or DimKind.RANGE except those that parse or print the text."""
    found = set()
    for path in sorted((ROOT / "pgraph").rglob("*.py")):
        rel = path.relative_to(ROOT / "pgraph").as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Attribute) and node.attr in ("EXTENT", "RANGE")
                    and isinstance(node.value, ast.Name) and node.value.id == "DimKind"):
                found.add(rel)
    assert found - SYNTAX_ONLY == {"ir/bounds.py"}
