"""Comparators (pgraph.backends.numpy.compare) against hand-counted cases.

Thresholds are typed from their sources: reference §5 (single-layer check: ratio_allclose
atol = rtol = 3e-3, max_error_ratio 0.02) and docs/upstream.md §10.1
(tier harness, #241: atol = rtol = 5e-3; 1 layer 1.000, 10 layers 0.999, 40 layers 0.98;
1-10-layer counts at 3e-3 up to 80 of 81,920). Every expected count below is set up by hand.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from pgraph.backends.numpy.compare import (
    MIN_COSINE,
    SINGLE_LAYER,
    TIER_3E3,
    all_checks,
    checks_for,
    compare,
    depth_tier,
)

BF16 = np.dtype(ml_dtypes.bfloat16)
ROWS, COLS = 16, 5120          # the full-size output: 81,920 elements


def _with_failures(k: int, delta: float, rows: int = ROWS) -> tuple[np.ndarray, np.ndarray]:
    """expected = 1.0 everywhere; actual = 1.0 + delta at the first k elements."""
    e = np.ones((rows, COLS), dtype=np.float32)
    a = e.copy()
    a.reshape(-1)[:k] += np.float32(delta)
    return a, e


def test_thresholds_are_the_sources() -> None:
    assert (SINGLE_LAYER.atol, SINGLE_LAYER.rtol, SINGLE_LAYER.max_fail) == (3e-3, 3e-3, 0.02)
    for layers, max_fail in ((1, 0.0), (10, 0.001), (40, 0.02)):
        t = depth_tier(layers)
        assert (t.atol, t.rtol, t.max_fail) == (5e-3, 5e-3, max_fail)
    assert (TIER_3E3.atol, TIER_3E3.rtol, TIER_3E3.max_fail) == (3e-3, 3e-3, 0.001)
    assert depth_tier(2).max_fail == 0.001 and depth_tier(11).max_fail == 0.02
    assert depth_tier(10).describe() == "depth tier (10 layers): >= 99.9 % within atol=rtol=5e-3"
    assert depth_tier(1).describe() == "depth tier (1 layer): >= 100 % within atol=rtol=5e-3"
    assert SINGLE_LAYER.describe() == "single-layer check: >= 98 % within atol=rtol=3e-3"


def test_which_comparators_decide() -> None:
    assert checks_for("current", 1) == (SINGLE_LAYER,)
    assert checks_for("current", 10) == (depth_tier(10),)
    assert checks_for("current", 40) == (depth_tier(40),)
    assert checks_for("tier", 1) == (depth_tier(1), TIER_3E3)
    assert checks_for("tier", 40, "distinct") == (depth_tier(40), TIER_3E3)
    # the harness's 3e-3 counts were measured with distinct weights: replicated, the depth tier only
    assert checks_for("tier", 40, "replicated") == (depth_tier(40),)
    assert checks_for("current", 40, "replicated") == checks_for("current", 40, "distinct")
    with pytest.raises(ValueError, match="unknown weight mode"):
        checks_for("tier", 1, "auto")
    assert set(all_checks(10)) == {SINGLE_LAYER, depth_tier(10), TIER_3E3}
    with pytest.raises(ValueError, match="unknown fixture"):
        checks_for("uniform", 1)


@pytest.mark.parametrize("layers,allowed", [(1, 0), (10, 81), (40, 1638)])
def test_depth_tier_counts(layers: int, allowed: int) -> None:
    # 5e-3 + 5e-3 * 1.0 = 0.01 at e = 1: 0.011 fails, 0.009 passes.
    # allowed failures: 0 % of 81,920 = 0; 0.1 % = 81.92 -> 81; 2 % = 1638.4 -> 1638
    tier = depth_tier(layers)
    ok = compare(*_with_failures(allowed, 0.011), ROWS, [tier])
    assert ok.failures == allowed and ok.ok
    bad = compare(*_with_failures(allowed + 1, 0.011), ROWS, [tier])
    assert bad.failures == allowed + 1 and not bad.ok
    inside = compare(*_with_failures(5000, 0.009), ROWS, [tier])
    assert inside.failures == 0 and inside.ok


def test_single_layer_check_counts() -> None:
    # 3e-3 + 3e-3 * 1.0 = 0.006: 0.0061 fails; 2 % of 81,920 = 1638.4 -> 1638 allowed
    assert compare(*_with_failures(1638, 0.0061), ROWS, [SINGLE_LAYER]).ok
    assert not compare(*_with_failures(1639, 0.0061), ROWS, [SINGLE_LAYER]).ok
    assert compare(*_with_failures(1639, 0.0059), ROWS, [SINGLE_LAYER]).failures == 0


def test_one_bf16_step_fails_3e3_but_not_5e3_below_two() -> None:
    """Reference §5 and the history: one bf16 step at |e| in [1, 2) is 2^-7 = 0.0078 > 3e-3 + 3e-3|e|.

    At 5e-3 the bound 5e-3 (1 + |e|) >= 0.01 covers it; at |e| = 2 the step is 2^-6 = 0.0156 >
    0.015, so one step there fails even 5e-3.
    """
    e = np.array([[1.0, 1.5, 2.0]], dtype=BF16)
    up = np.array([[1.0 + 2 ** -7, 1.5 + 2 ** -7, 2.0 + 2 ** -6]], dtype=BF16)   # the next bf16 values
    assert (up.astype(np.float64) - e.astype(np.float64)).tolist() == [[2 ** -7, 2 ** -7, 2 ** -6]]
    at3 = compare(up, e, 1, [TIER_3E3]).primary
    at5 = compare(up, e, 1, [depth_tier(1)]).primary
    assert at3.failures == 3       # 0.0078 > 0.006, 0.0078 > 0.0075, 0.0156 > 0.009
    assert at5.failures == 1       # 0.0078 <= 0.01, 0.0078 <= 0.0125, 0.0156 > 0.015


def test_any_nan_or_inf_fails_even_within_the_allowance() -> None:
    a, e = _with_failures(0, 0.0)
    a[3, 7] = np.nan
    c = compare(a, e, ROWS, [SINGLE_LAYER])
    assert c.failures == 1 and c.nonfinite == 1 and not c.ok     # 1 of 81,920 is within 2 %, NaN is not
    a[3, 7] = np.inf
    assert not compare(a, e, ROWS, [SINGLE_LAYER]).ok


def test_cosine_and_relative_l2() -> None:
    # 1.5 % of the elements flipped to -1: within the 2 % allowance, cosine = 1 - 2 * 0.015 = 0.97
    k = int(0.015 * ROWS * COLS)
    a, e = _with_failures(k, -2.0)
    c = compare(a, e, ROWS, [SINGLE_LAYER])
    assert c.failures == k and c.primary.within
    assert c.cosine == pytest.approx(1 - 2 * k / (ROWS * COLS), abs=1e-12) and c.cosine < MIN_COSINE
    assert not c.ok
    # rel L2 = ||a - e|| / ||e|| = sqrt(k * 4) / sqrt(81,920)
    assert c.rel_l2 == pytest.approx(np.sqrt(4 * k / (ROWS * COLS)), rel=1e-12)
    scaled = compare(np.ones((ROWS, COLS)) * 1.001, np.ones((ROWS, COLS)), ROWS, [SINGLE_LAYER])
    assert scaled.rel_l2 == pytest.approx(1e-3, rel=1e-9) and scaled.ok


def test_pad_rows_are_checked_but_not_counted() -> None:
    a, e = _with_failures(0, 0.0)
    e[5:] = 0.0
    a[5:] = 0.0
    a[9, 100] = 0.004             # pad row 9: |0.004 - 0| > 3e-3
    c = compare(a, e, 5, [SINGLE_LAYER])
    assert c.primary.total == 5 * COLS and c.failures == 0 and c.pad_failures == 1 and not c.ok
    a[9, 100] = 0.002             # within atol
    assert compare(a, e, 5, [SINGLE_LAYER]).ok


def test_informational_comparators_do_not_decide() -> None:
    a, e = _with_failures(100, 0.008)    # fails 3e-3 (0.006), passes 5e-3 (0.01)
    c = compare(a, e, ROWS, [depth_tier(10)], [SINGLE_LAYER, TIER_3E3])
    assert c.ok and c.deciding == 1
    assert c.result("3e-3 tier").failures == 100 and not c.result("3e-3 tier").within
    assert c.result("single-layer check").within          # 100 < 1638
    assert [line.split(":")[0] for line in c.render_info()] == ["(information) single-layer check",
                                                               "(information) 3e-3 tier"]
    both = compare(a, e, ROWS, [depth_tier(10), TIER_3E3])
    assert not both.ok                                      # the 3e-3 tier decides here
