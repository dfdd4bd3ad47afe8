"""Shared fixtures: repository paths, the `--update-golden` switch, a planning helper."""

from __future__ import annotations

import contextlib
import enum
import importlib.util
import os
import signal
import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pgraph.pipeline import Options, plan_program

# Every pipeline run of the suite verifies the IR after lowering and after expansion
# (pgraph.ir.verify; Options.verify reads it when an Options is made). Subprocesses inherit it.
os.environ.setdefault("PGRAPH_VERIFY", "1")

ROOT = Path(__file__).resolve().parents[1]
SPECS = ROOT / "specs"
HEAD_SPEC = SPECS / "decode_layer.pgl"
#: what a test's subprocess with an environment of its own keeps from this one: where Python is
#: asked to write no bytecode (PYTHONDONTWRITEBYTECODE, .ci/run), neither does the child
KEEP_ENV = {k: os.environ[k] for k in ("PYTHONDONTWRITEBYTECODE",) if k in os.environ}
VARIANT_762 = SPECS / "variants" / "decode_layer_762.pgl"

#: The layer-0 edges that order no data (by hand): seed_dummy does no work, so its three
#: out-edges (§2.3: seed_dummy -> rms_recip, kv_seed, mlp_out_seed) order nothing; in layer 0
#: P is x_gamma0, and mlp_out_seed only zeroes fresh layer-0 accumulators whose every reader
#: already waits on P through q_proj/kv_seed/rms_recip, so P -> mlp_out_seed is implied.
REDUNDANT_LAYER0 = sorted([("seed_dummy@L=0", "kv_seed@L=0"), ("seed_dummy@L=0", "mlp_out_seed@L=0"),
                           ("seed_dummy@L=0", "rms_recip@L=0"), ("x_gamma0", "mlp_out_seed@L=0"),
                           # attn_out_seed's body is empty (ABI reference §3.1, fid 3): it touches
                           # nothing, so its edge to the attention orders no data
                           ("attn_out_seed@L=0", "fa_fused@L=0")])


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked `slow` or `full` run only when `-m` names the marker (opt-in)."""
    expr = config.getoption("markexpr") or ""
    for item in items:
        for marker in ("slow", "full"):
            if item.get_closest_marker(marker) is not None and marker not in expr:
                item.add_marker(pytest.mark.skip(reason=f"opt-in: -m {marker}"))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite golden files under tests/golden/ from the current output")


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-golden"))


def plan_ok(path: Path, **kw: object):
    """Plan a spec that must have no errors; return the Plan."""
    plan, bag = plan_program(path, Options(**kw))  # type: ignore[arg-type]
    assert plan is not None and not bag.has_errors, [d.message for d in bag.items]
    return plan


def require_tool(name: str) -> str:
    """Path of an external tool (`dot`, `g++`). Missing: skip locally, fail under CI=true."""
    import os
    import shutil

    path = shutil.which(name)
    if path is None:
        message = f"`{name}` is not installed (.ci/run installs it with apt-get)"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(message)
        pytest.skip(message)
    return path


def numpy_session(spec: Path, options: Options, **kw: object):
    """A NumPy Session on `spec` planned with every layer expanded (the executor's contract)."""
    import attrs

    from pgraph.backends.numpy.runner import Session

    plan, bag = plan_program(spec, attrs.evolve(options, full=True))
    assert plan is not None and not bag.has_errors, [d.message for d in bag.items]
    return Session.create(plan, **kw)  # type: ignore[arg-type]


class ArgDirection(enum.Enum):
    """Stand-in for simpler's `simpler.task_interface.ArgDirection` (IN, OUT, INOUT), which the
    generated kernel_config.py imports as `_D`; simpler itself is not installed for the tests."""

    IN = "IN"
    OUT = "OUT"
    INOUT = "INOUT"


def simpler_stub_env(where: Path) -> dict[str, str]:
    """Environment for running a generated kernel_config.py as a process: PYTHONPATH names a stub
    package `simpler.task_interface` (written under `where`) with an ArgDirection enum."""
    pkg = where / "simpler_stub" / "simpler"
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "task_interface.py").write_text(
        "import enum\n\n\nclass ArgDirection(enum.Enum):\n    IN = 'IN'\n    OUT = 'OUT'\n    INOUT = 'INOUT'\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(where / "simpler_stub"), *filter(None, [env.get("PYTHONPATH")])])
    return env


def load_kernel_config(path: Path) -> types.ModuleType:
    """Load a kernel_config.py the way pypto's `compile_and_assemble` does (importlib, as a module),
    with a stub `simpler.task_interface` providing ArgDirection."""
    simpler = types.ModuleType("simpler")
    task_interface = types.ModuleType("simpler.task_interface")
    task_interface.ArgDirection = ArgDirection  # type: ignore[attr-defined]
    simpler.task_interface = task_interface  # type: ignore[attr-defined]
    saved = {k: sys.modules.get(k) for k in ("simpler", "simpler.task_interface")}
    sys.modules["simpler"], sys.modules["simpler.task_interface"] = simpler, task_interface
    try:
        spec = importlib.util.spec_from_file_location(f"kernel_config_{abs(hash(str(path)))}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v


@contextlib.contextmanager
def time_limit(seconds: int, error: Callable[[str], BaseException] = TimeoutError) -> Iterator[None]:
    """Raise `error` in the main thread after `seconds` (SIGALRM): a test that would block, e.g.
    on opening a FIFO, or a fuzz input that hangs, fails instead of hanging the suite."""

    def fire(signum: int, frame: object) -> None:
        raise error(f"pgraph did not finish within {seconds} s")

    old = signal.signal(signal.SIGALRM, fire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
