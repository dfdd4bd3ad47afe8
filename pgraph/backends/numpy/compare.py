"""Compare an executor output with the dense reference (pypto-lib golden `ratio_allclose`).

An element passes when |a - e| <= atol + rtol*|e| with atol = rtol = 3e-3 (reference §5:
one bf16 ULP at 1.0 is 2^-8 > 3e-3, so a fraction of elements may fail). The pass-rate
threshold depends on the depth (issue 5): up to 10 layers >= 99.9 %, deeper >= 98 %.
The pass rate and cosine similarity are taken over the live rows; pad rows must all pass;
any NaN or Inf anywhere fails.
"""

from __future__ import annotations

import attrs
import numpy as np

ATOL = 3e-3
RTOL = 3e-3
MIN_COSINE = 0.999


def tier(layers: int) -> float:
    """Required element pass rate for a run of `layers` layers."""
    return 0.999 if layers <= 10 else 0.98


@attrs.frozen
class Comparison:
    """Outcome of one comparison; `ok` is the verdict."""

    pass_rate: float
    required: float
    max_abs: float
    cosine: float
    nonfinite: int
    pad_failures: int

    @property
    def ok(self) -> bool:
        """Pass rate, cosine, finiteness and pad rows all acceptable."""
        return (self.nonfinite == 0 and self.pad_failures == 0 and self.pass_rate >= self.required
                and self.cosine > MIN_COSINE)

    def render(self) -> str:
        """One line: pass rate (vs tier), max abs error, cosine, NaN/Inf count."""
        verdict = "PASS" if self.ok else "FAIL"
        extra = f", {self.nonfinite} NaN/Inf" if self.nonfinite else ""
        pad = f", {self.pad_failures} pad-row failures" if self.pad_failures else ""
        return (f"{verdict}: pass rate {self.pass_rate * 100:.3f}% (need {self.required * 100:.1f}%), "
                f"max abs err {self.max_abs:.3e}, cosine {self.cosine:.6f}{extra}{pad}")


def compare(actual: np.ndarray, expected: np.ndarray, live_rows: int, layers: int,
            atol: float = ATOL, rtol: float = RTOL) -> Comparison:
    """Compare [rows, ...] arrays (any float dtype incl. bf16); rows >= live_rows are pad rows."""
    a = np.asarray(actual).astype(np.float64)
    e = np.asarray(expected).astype(np.float64)
    if a.shape != e.shape:
        raise ValueError(f"shape {a.shape} vs expected {e.shape}")
    nonfinite = int((~np.isfinite(a)).sum())
    with np.errstate(invalid="ignore"):
        ok = np.abs(a - e) <= atol + rtol * np.abs(e)
    live_ok = ok[:live_rows]
    pass_rate = float(live_ok.mean()) if live_ok.size else 1.0
    pad_failures = int((~ok[live_rows:]).sum())
    la, le = a[:live_rows].reshape(-1), e[:live_rows].reshape(-1)
    finite = np.isfinite(la).all()
    max_abs = float(np.max(np.abs(la - le))) if finite and la.size else float("inf")
    na, ne = np.linalg.norm(la), np.linalg.norm(le)
    cosine = float(la @ le / (na * ne)) if finite and na > 0 and ne > 0 else (1.0 if finite and na == ne else 0.0)
    return Comparison(pass_rate, tier(layers), max_abs, cosine, nonfinite, pad_failures)
