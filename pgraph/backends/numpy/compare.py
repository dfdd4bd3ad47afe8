"""Comparators of an executor output with the dense reference, as upstream uses them.

The element test is pypto-lib's `ratio_allclose` (golden/validation.py, reference §5): an
element fails when |a - e| > atol + rtol*|e|, and a comparator allows at most a fraction
`max_fail` of the live elements to fail. Three comparators, each with its source:

- `SINGLE_LAYER`: atol = rtol = 3e-3, at most 2 % failing. pypto-lib decode_fwd.py's default
  single-layer test on today's fixture: `ratio_allclose(atol=3e-3, rtol=3e-3,
  max_error_ratio=0.02)` (reference §5; rationale given there: one bf16 ULP at 1.0 is
  2^-8 > 3e-3).
- `depth_tier(N)`: atol = rtol = 5e-3 with pass ratio 1.000 at 1 layer, 0.999 up to 10 layers
  and 0.98 deeper. The tier harness (models/qwen3/14b/qwen3_14b_decode_full.py at
  f65513d5 / cd736c30; #241 raised atol/rtol to 5e-3), docs/upstream.md
  §10.1: 1 layer 1.000, 10 layers 0.999, 40 layers 0.98. Depths between
  those points take the next deeper point's threshold (2-10 layers 0.999).
- `TIER_3E3`: atol = rtol = 3e-3, at most 0.1 % failing. The same harness's 1-10-layer
  counts at 3e-3 (0, 4, 5, 17, 39, 80 of 81,920, i.e. >= 99.902 %; same section), measured
  with its distinct weights per layer; issue 15 asks for it at 1, 10 and 40 layers on that
  harness's fixture (`inputs.FIXTURES["tier"]`) with distinct weights.

Every comparator also requires: no NaN/Inf anywhere (ratio_allclose), cosine similarity of
the live rows > 0.999 (#241/#247: "mismatches grow smoothly with depth, cosine > 0.999"),
and every pad-row element (rows >= the live batch) within the tolerance. The relative L2
error ||a - e|| / ||e|| of the live rows is reported. `checks_for` says which comparators
decide a run; the others are computed for information.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import numpy as np

from pgraph import records

MIN_COSINE = 0.999


@records.value
@attrs.frozen(repr=False, eq=False)
class Check:
    """One comparator: tolerance, allowed failing fraction, and where it comes from."""

    name: str
    atol: float
    rtol: float
    max_fail: float
    source: str

    def tolerance(self) -> str:
        """e.g. 'atol=rtol=5e-3'."""
        if self.atol == self.rtol:
            return f"atol=rtol={_sci(self.atol)}"
        return f"atol={_sci(self.atol)}, rtol={_sci(self.rtol)}"

    def need(self) -> str:
        """e.g. '>= 99.9 % within atol=rtol=5e-3'."""
        rate = "100 %" if self.max_fail == 0 else f"{(1 - self.max_fail) * 100:g} %"
        return f">= {rate} within {self.tolerance()}"

    def describe(self) -> str:
        """e.g. 'depth tier (10 layers): >= 99.9 % within atol=rtol=5e-3'."""
        return f"{self.name}: {self.need()}"


def _sci(x: float) -> str:
    """3e-3 rather than 0.003 or 3e-03."""
    m, e = f"{x:.0e}".split("e")
    return f"{m}e{int(e)}"


SINGLE_LAYER = Check("single-layer check", 3e-3, 3e-3, 0.02,
                     "pypto-lib decode_fwd.py single-layer test: ratio_allclose(3e-3, 3e-3, max_error_ratio=0.02)")
TIER_3E3 = Check("3e-3 tier", 3e-3, 3e-3, 0.001,
                 "tier harness counts at 3e-3 (0..80 of 81,920 at 1-10 layers); issue 15")


def depth_tier(layers: int) -> Check:
    """The tier harness's pass-ratio tier for `layers` layers at atol = rtol = 5e-3 (#241)."""
    max_fail = 0.0 if layers <= 1 else 0.001 if layers <= 10 else 0.02
    return Check(f"depth tier ({layers} layer{'s' if layers != 1 else ''})", 5e-3, 5e-3, max_fail,
                 "tier harness qwen3_14b_decode_full.py (#241): 1 layer 1.000, 10 layers 0.999, 40 layers 0.98")


def all_checks(layers: int) -> tuple[Check, ...]:
    """Every comparator, in report order."""
    return (SINGLE_LAYER, depth_tier(layers), TIER_3E3)


def checks_for(fixture: str, layers: int, weights: str = "distinct") -> tuple[Check, ...]:
    """The comparators that decide a run of `layers` layers on `fixture` ('current' or 'tier').

    Today's fixture: the single-layer check for 1 layer (as upstream runs it), the depth tier
    deeper. The tier fixture: the depth tier at every depth, and with distinct weights (the
    tier harness's setting, in which its 3e-3 counts were measured) the 3e-3 tier as well
    (issue 15). With replicated weights the 3e-3 tier is reported for information only.
    ValueError for another fixture name or weight mode.
    """
    if weights not in ("replicated", "distinct"):
        raise ValueError(f"unknown weight mode '{weights}' (replicated or distinct)")
    if fixture == "current":
        return (SINGLE_LAYER,) if layers <= 1 else (depth_tier(layers),)
    if fixture == "tier":
        return (depth_tier(layers), TIER_3E3) if weights == "distinct" else (depth_tier(layers),)
    raise ValueError(f"unknown fixture '{fixture}' (current or tier)")


@records.value
@attrs.frozen(repr=False, eq=False)
class CheckResult:
    """One comparator applied to one output: failing live elements and failing pad elements."""

    check: Check
    failures: int
    total: int
    pad_failures: int

    @property
    def pass_rate(self) -> float:
        """Fraction of the live elements within the tolerance (1.0 when there are none)."""
        return 1.0 - self.failures / self.total if self.total else 1.0

    @property
    def within(self) -> bool:
        """The failing fraction is within the comparator's allowance and no pad element fails."""
        return self.failures <= self.check.max_fail * self.total and self.pad_failures == 0

    def render(self) -> str:
        """'12 of 81,920 failing (99.985 %)'."""
        pad = f", {self.pad_failures} pad-row element(s) failing" if self.pad_failures else ""
        return f"{self.failures:,} of {self.total:,} failing ({self.pass_rate * 100:.3f} %){pad}"

    def render_against(self) -> str:
        """'depth tier (10 layers): 37 of 81,920 failing (99.955 %; needs >= 99.9 % within atol=rtol=5e-3)'."""
        return f"{self.check.name}: {self.render()[:-1]}; needs {self.check.need()})"


@records.value
@attrs.frozen(repr=False, eq=False)
class Comparison:
    """Outcome of comparing one output with the reference under the deciding comparators.

    `results` holds the deciding comparators first (`deciding` of them), then the
    informational ones. `ok` is the verdict: every deciding comparator within its allowance,
    no NaN/Inf, cosine > MIN_COSINE.
    """

    results: tuple[CheckResult, ...]
    deciding: int
    max_abs: float
    cosine: float
    rel_l2: float
    nonfinite: int

    @property
    def ok(self) -> bool:
        """Deciding comparators, finiteness and cosine all acceptable."""
        return (self.nonfinite == 0 and self.cosine > MIN_COSINE
                and all(r.within for r in self.results[:self.deciding]))

    @property
    def primary(self) -> CheckResult:
        """The first deciding comparator's result."""
        return self.results[0]

    @property
    def pass_rate(self) -> float:
        """Pass rate under the first deciding comparator."""
        return self.primary.pass_rate

    @property
    def failures(self) -> int:
        """Failing live elements under the first deciding comparator."""
        return self.primary.failures

    @property
    def pad_failures(self) -> int:
        """Failing pad-row elements under the first deciding comparator."""
        return self.primary.pad_failures

    def result(self, name: str) -> CheckResult:
        """The result of the comparator named `name` (KeyError if not computed)."""
        for r in self.results:
            if r.check.name == name:
                return r
        raise KeyError(name)

    def render(self) -> str:
        """One line: verdict, each deciding comparator, max abs error, cosine, rel L2, NaN/Inf."""
        verdict = "PASS" if self.ok else "FAIL"
        parts = [r.render_against() for r in self.results[:self.deciding]]
        extra = f", {self.nonfinite} NaN/Inf" if self.nonfinite else ""
        return (f"{verdict}: {'; '.join(parts)}; max abs err {self.max_abs:.3e}, cosine {self.cosine:.6f}, "
                f"rel L2 {self.rel_l2:.3e}{extra}")

    def render_info(self) -> list[str]:
        """One line per informational (non-deciding) comparator."""
        return [f"(information) {r.render_against()}" for r in self.results[self.deciding:]]


def compare(actual: np.ndarray, expected: np.ndarray, live_rows: int, checks: Sequence[Check],
            info: Sequence[Check] = ()) -> Comparison:
    """Compare [rows, ...] arrays (any float dtype incl. bf16); rows >= live_rows are pad rows.

    `checks` decide the verdict (at least one); `info` comparators are evaluated and reported
    only. ValueError on a shape mismatch or an empty `checks`.
    """
    if not checks:
        raise ValueError("compare needs at least one deciding comparator")
    a = np.asarray(actual).astype(np.float64)
    e = np.asarray(expected).astype(np.float64)
    if a.shape != e.shape:
        raise ValueError(f"shape {a.shape} vs expected {e.shape}")
    nonfinite = int((~np.isfinite(a)).sum())
    with np.errstate(invalid="ignore"):
        diff = np.abs(a - e)
    mag = np.abs(e)
    results = []
    seen: list[Check] = []
    for chk in (*checks, *info):
        if chk in seen:
            continue
        seen.append(chk)
        with np.errstate(invalid="ignore"):
            ok = diff <= chk.atol + chk.rtol * mag        # NaN compares False: a NaN element fails
        live = ok[:live_rows]
        results.append(CheckResult(chk, int(live.size - live.sum()), int(live.size), int((~ok[live_rows:]).sum())))
    la, le = a[:live_rows].reshape(-1), e[:live_rows].reshape(-1)
    finite = bool(np.isfinite(la).all())
    max_abs = float(np.max(np.abs(la - le))) if finite and la.size else float("inf")
    na, ne = np.linalg.norm(la), np.linalg.norm(le)
    cosine = float(la @ le / (na * ne)) if finite and na > 0 and ne > 0 else (1.0 if finite and na == ne else 0.0)
    rel_l2 = float(np.linalg.norm(la - le) / ne) if finite and ne > 0 else (0.0 if finite and na == 0 else float("inf"))
    deciding = len(dict.fromkeys(checks))
    return Comparison(tuple(results), deciding, max_abs, cosine, rel_l2, nonfinite)
