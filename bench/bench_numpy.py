"""Wall time of the NumPy executor vs the dense reference, same process, same inputs.

Usage: python bench/bench_numpy.py [--spec specs/decode_layer.pgl] [--config full] [--layers 1]
                                   [--repeat 3] [--races]

Both sides run with OpenBLAS pinned to one thread (pgraph.backends.numpy.blas) and are timed
best-of-`repeat`. The executor runs the topological order with the race detector off
(`--races` turns it on, to measure its cost). Prints one line per measurement and the ratio
executor / reference; the issue's target is <= 1.5 at full size, 1 layer. Peak RSS is the
process maximum (ru_maxrss) after everything ran.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pgraph.backends.numpy.blas import blas_threads  # noqa: E402
from pgraph.backends.numpy.golden import golden_decode  # noqa: E402
from pgraph.backends.numpy.runner import Session  # noqa: E402
from pgraph.pipeline import Options, plan_program  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spec", default=str(ROOT / "specs" / "decode_layer.pgl"))
    ap.add_argument("--config", default="full")
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--races", action="store_true", help="keep the race detector on in the executor")
    args = ap.parse_args()
    t0 = time.perf_counter()
    plan, bag = plan_program(args.spec, Options(config=args.config, layers=args.layers, full=True))
    if plan is None or bag.has_errors:
        print("\n".join(d.message for d in bag.items), file=sys.stderr)
        return 1
    session = Session.create(plan)
    setup = time.perf_counter() - t0
    ref_times, exe_times = [], []
    last = None
    for _ in range(args.repeat):
        with blas_threads(1):
            t = time.perf_counter()
            golden_decode(session.inputs)
            ref_times.append(time.perf_counter() - t)
        last = session.execute("topo", races=args.races)
        exe_times.append(last.seconds)
    assert last is not None and last.comparison is not None
    ref, exe = min(ref_times), min(exe_times)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / (1 << 20)
    g = session.inputs.geometry
    print(f"spec {Path(args.spec).name}, config {args.config}, {g.layers} layer(s), hidden {g.hidden}, "
          f"intermediate {g.intermediate}, batch {session.inputs.batch}")
    print(f"setup (plan + inputs + first reference): {setup:.2f} s")
    print(f"dense reference: best {ref:.3f} s of {[round(x, 3) for x in ref_times]}")
    print(f"executor (races {'on' if args.races else 'off'}): best {exe:.3f} s of {[round(x, 3) for x in exe_times]}")
    print(f"ratio executor / reference: {exe / ref:.2f} (target <= 1.5)")
    print(f"comparison: {last.comparison.render()}")
    print(f"peak RSS: {peak:.2f} GiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
