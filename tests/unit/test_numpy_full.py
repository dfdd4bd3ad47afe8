"""Full-size Qwen3-14B runs of the NumPy executor (opt-in: `python -m pytest -m full`).

hidden 5120, intermediate 17408, 40/8 heads, batch 16, MAX_SEQ 4096 (`--config full`);
1, 10 and 40 layers; both input fixtures; both weight modes (replicated layer-0 weights,
distinct weights drawn per layer on demand). What must hold (comparators with their sources
in pgraph.backends.numpy.compare and docs/backend_numpy.md):

- today's fixture: 1 layer the single-layer check (atol = rtol = 3e-3, at most 2 % failing),
  10 and 40 layers the depth tiers at atol = rtol = 5e-3 (0.999, 0.98);
- the tier fixture: the depth tiers (1 layer 1.000) and, with distinct weights (the tier
  harness's setting), at every depth >= 99.9 % within atol = rtol = 3e-3 (with replicated
  weights that is reported only: it is not met at 10 and 40 layers, docs/backend_numpy.md);
- always: no race, no kernel fault, no NaN/Inf, cosine > 0.999, pad rows checked, peak RSS
  below 8 GiB (40 distinct full-size layers would be about 36 GB if held at once);
- today's fixture, replicated, 10 and 40 layers: within 1.25x the failures of the reference
  against itself with f64 projections (+0.1 %).

The figures printed here are recorded by bench/bench_numpy.py in docs/performance.md.
Measured 2026-12-01: eleven pass; tier-distinct-40 fails its 3e-3 tier (769 failing of 81,920,
81 allowed; the reference against itself fails 912), an open point of issue 15
(docs/backend_numpy.md, "The 3e-3 tier at 40 layers on the tier fixture is not met").
"""

from __future__ import annotations

import resource

import pytest

from pgraph.backends.numpy.compare import SINGLE_LAYER, TIER_3E3, depth_tier
from pgraph.backends.numpy.runner import Execution, Session
from pgraph.pipeline import Options
from tests.conftest import HEAD_SPEC, numpy_session

pytestmark = pytest.mark.full


@pytest.fixture(autouse=True)
def _opt_in(request: pytest.FixtureRequest) -> None:
    if "full" not in (request.config.getoption("markexpr") or ""):
        pytest.skip("full-size run: opt in with -m full")


_RUNS: dict[tuple[str, str, int], tuple[Session, Execution]] = {}


def _run(fixture: str, weights: str, layers: int) -> tuple[Session, Execution]:
    key = (fixture, weights, layers)
    if key not in _RUNS:
        _RUNS.clear()  # keep one full-size session in memory at a time
        session = numpy_session(HEAD_SPEC, Options(config="full", layers=layers), fixture=fixture,
                                weights=weights)
        g = session.inputs.geometry
        assert (g.hidden, g.intermediate, g.num_heads, g.num_kv_heads, g.batch_pad) == (5120, 17408, 40, 8, 16)
        assert session.inputs.weights == weights and session.inputs.fixture == fixture
        _RUNS[key] = (session, session.execute("topo"))
    return _RUNS[key]


def _peak_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / (1 << 20)


CASES = [(f, w, n) for f in ("current", "tier") for w in ("replicated", "distinct") for n in (1, 10, 40)]


@pytest.mark.parametrize("fixture,weights,layers", CASES, ids=[f"{f}-{w}-{n}" for f, w, n in CASES])
def test_full_size_tiers(fixture: str, weights: str, layers: int, capsys: pytest.CaptureFixture[str]) -> None:
    session, ex = _run(fixture, weights, layers)
    assert ex.races == [] and ex.fault is None
    c = ex.comparison
    assert c is not None
    with capsys.disabled():
        print(f"\n{fixture}/{weights}/{layers}: {c.render()}")
        for line in c.render_info():
            print(f"  {line}")
        print(f"  peak RSS {_peak_gib():.2f} GiB, {session.inputs.generated} layer slices drawn")
    assert c.nonfinite == 0 and c.cosine > 0.999 and c.pad_failures == 0
    if fixture == "current":
        want = SINGLE_LAYER if layers == 1 else depth_tier(layers)
        assert [r.check for r in c.results[:c.deciding]] == [want]
    elif weights == "distinct":
        assert [r.check for r in c.results[:c.deciding]] == [depth_tier(layers), TIER_3E3]
        assert c.result(TIER_3E3.name).pass_rate >= 0.999
    else:   # the tier harness's 3e-3 counts were measured with distinct weights
        assert [r.check for r in c.results[:c.deciding]] == [depth_tier(layers)]
    assert c.ok, c.render()
    assert _peak_gib() < 8
    if fixture == "current" and weights == "replicated" and layers > 1:
        # the reference against itself with f64 projections (the noise floor): the executor
        # stays within 1.25x of its failures + 0.1 % (measured at 0cf58ea: 1.05-1.13x, issue 15)
        floor = session.noise_floor()
        with capsys.disabled():
            print(f"  {floor.render()}")
        assert c.failures <= 1.25 * floor.out.failures + 0.001 * c.primary.total
