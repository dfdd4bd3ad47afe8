"""Pin the BLAS thread count: 16-row matmuls are fastest single-threaded.

Measured on the 2-core development machine (OpenBLAS 0.3.31 from the numpy wheel): one
16x1024 @ 1024x1024 f32 matmul takes ~8 ms with OpenBLAS's default threads under load and
~1.2 ms with one thread. The executor issues hundreds of such tile matmuls per layer, so
runs and benchmarks pin OpenBLAS to one thread. Without an OpenBLAS (another BLAS, other
platform) this is a no-op.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import glob
import os
from collections.abc import Iterator

_SET = ("scipy_openblas_set_num_threads64_", "openblas_set_num_threads64_", "openblas_set_num_threads")
_GET = ("scipy_openblas_get_num_threads64_", "openblas_get_num_threads64_", "openblas_get_num_threads")


def _libraries() -> list[ctypes.CDLL]:
    paths: list[str] = []
    try:
        with open("/proc/self/maps", encoding="utf-8") as fh:
            last = (line.split()[-1] for line in fh if line.strip())
            paths = sorted({p for p in last if "openblas" in os.path.basename(p) and ".so" in p})
    except OSError:
        pass
    if not paths:
        import numpy

        libs = os.path.join(os.path.dirname(os.path.dirname(numpy.__file__)), "numpy.libs")
        paths = sorted(glob.glob(os.path.join(libs, "*openblas*")))
    out = []
    for p in paths:
        try:
            out.append(ctypes.CDLL(p))
        except OSError:
            continue
    return out


@functools.cache
def _funcs() -> tuple[object, object] | None:
    for lib in _libraries():
        for s, g in zip(_SET, _GET, strict=False):
            if hasattr(lib, s) and hasattr(lib, g):
                return getattr(lib, s), getattr(lib, g)
    return None


@contextlib.contextmanager
def blas_threads(n: int = 1) -> Iterator[None]:
    """Run the body with OpenBLAS limited to `n` threads, restoring the previous count."""
    funcs = _funcs()
    if funcs is None:
        yield
        return
    set_threads, get_threads = funcs
    before = int(get_threads())  # type: ignore[operator]
    set_threads(n)  # type: ignore[operator]
    try:
        yield
    finally:
        set_threads(before)  # type: ignore[operator]
