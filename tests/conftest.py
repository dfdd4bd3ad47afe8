"""Shared fixtures: repository paths, the `--update-golden` switch, a planning helper.

Also what makes the suite safe to run in parallel (`-n auto`, pytest-xdist) and sampled: the
sample key of the run (tests/support/sampling.py), fixed here once for every worker; no
hypothesis files or query cache written into the checkout or a folder another run shares
(.ci/run also puts bytecode outside the clone, and fails when the suite leaves anything in it);
golden files replaced atomically; a lock for shared read-modify-writes; time limits that work
in a worker (tests/unit/test_suite_safety.py).
"""

from __future__ import annotations

import contextlib
import enum
import faulthandler
import fcntl
import importlib.util
import os
import shutil
import signal
import sys
import tempfile
import threading
import types
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis.configuration import set_hypothesis_home_dir

from pgraph.pipeline import Options, plan_program
from tests.support import sampling

# Every pipeline run of the suite verifies the IR after lowering and after expansion
# (pgraph.ir.verify; Options.verify reads it when an Options is made). Subprocesses inherit it.
os.environ.setdefault("PGRAPH_VERIFY", "1")
# The sample key of this run: PGRAPH_SAMPLE when set, else the date, fixed here (conftest is
# imported before any test module and before xdist starts its workers, which inherit the
# environment), so every worker collects the same windows even across midnight.
SAMPLE_KEY_FROM_DATE = not os.environ.get(sampling.ENV, "").strip()
os.environ[sampling.ENV] = str(sampling.run_key())
# No example database, and hypothesis's other files (its caches of the source's constants and of
# Unicode data) in a folder of the run instead of .hypothesis/ in the current folder, the
# checkout: the tests draw derandomized or seeded examples and need no database. The folder is
# made once (workers inherit it) and removed at the end by the process that made it.
settings.register_profile("pgraph", database=None)
settings.load_profile("pgraph")
HYPOTHESIS_DIR_OWNED = "HYPOTHESIS_STORAGE_DIRECTORY" not in os.environ
if HYPOTHESIS_DIR_OWNED:
    os.environ["HYPOTHESIS_STORAGE_DIRECTORY"] = tempfile.mkdtemp(prefix="pgraph-hypothesis-")
set_hypothesis_home_dir(os.environ["HYPOTHESIS_STORAGE_DIRECTORY"])

ROOT = Path(__file__).resolve().parents[1]
SPECS = ROOT / "specs"
HEAD_SPEC = SPECS / "decode_layer.pgl"
#: what a test's subprocess with an environment of its own keeps from this one: where Python is
#: asked to write no bytecode (PYTHONDONTWRITEBYTECODE), or to write it outside the checkout
#: (PYTHONPYCACHEPREFIX, .ci/run), so does the child
KEEP_ENV = {k: os.environ[k] for k in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX") if k in os.environ}
VARIANT_762 = SPECS / "variants" / "decode_layer_762.pgl"

#: The layer-0 edges that order no data (by hand): seed_dummy does no work, so its three
#: out-edges (§2.3: seed_dummy -> rms_recip, kv_seed, mlp_out_seed) order nothing; in layer 0
#: P is x_gamma0, and mlp_out_seed only zeroes fresh layer-0 accumulators whose every reader
#: already waits on P through q_proj/kv_seed/rms_recip, so P -> mlp_out_seed is implied.
REDUNDANT_LAYER0 = sorted([("seed_dummy@L=0", "kv_seed@L=0"), ("seed_dummy@L=0", "mlp_out_seed@L=0"),
                           ("seed_dummy@L=0", "rms_recip@L=0"), ("x_gamma0", "mlp_out_seed@L=0"),
                           # attn_out_seed's body is empty (docs/upstream.md §8.6, fid 3): it touches
                           # nothing, so its edge to the attention orders no data
                           ("attn_out_seed@L=0", "fa_fused@L=0")])


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked `slow` or `full` run only when `-m` names the marker (opt-in)."""
    expr = config.getoption("markexpr") or ""
    for item in items:
        for marker in ("slow", "full"):
            if item.get_closest_marker(marker) is not None and marker not in expr:
                item.add_marker(pytest.mark.skip(reason=f"opt-in: -m {marker}"))


def sample_key_line() -> str:
    """The sample key of the run, and how to rerun its windows."""
    key = os.environ[sampling.ENV]
    where = "the UTC day number" if SAMPLE_KEY_FROM_DATE else "set in the environment"
    return (f"pgraph sample key: {sampling.ENV}={key} ({where}): the sampled sweeps check its windows;"
            f" {sampling.ENV}={key} reruns them, `-m slow` runs the whole sweeps (docs/reliability.md)")


def pytest_unconfigure(config: pytest.Config) -> None:
    """Remove the hypothesis folder this process made (a worker did not make it: it inherited it)."""
    if HYPOTHESIS_DIR_OWNED:
        shutil.rmtree(os.environ["HYPOTHESIS_STORAGE_DIRECTORY"], ignore_errors=True)


def pytest_report_header(config: pytest.Config) -> str:
    """The sample key at the top (shown without -q), so a failing sampled test reruns with its windows."""
    return sample_key_line()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The sample key at the end too (shown with -q, as the README's and CI's runs are)."""
    terminalreporter.write_line(sample_key_line())


#: the caller named the query cache's folder (PGRAPH_CACHE_DIR): the session keeps it
CACHE_DIR_GIVEN = bool(os.environ.get("PGRAPH_CACHE_DIR"))


@pytest.fixture(scope="session", autouse=True)
def query_cache_of_the_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The query cache (pgraph.commands.query_cache) of the whole run, subprocesses included,
    in this worker's temporary folder unless PGRAPH_CACHE_DIR names one: never the user's
    ~/.cache, never a folder another worker or another run writes."""
    with pytest.MonkeyPatch.context() as mp:
        if not CACHE_DIR_GIVEN:
            mp.setenv("PGRAPH_CACHE_DIR", str(tmp_path_factory.mktemp("query-cache")))
        yield


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite golden files under tests/golden/ from the current output")


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-golden"))


def write_golden(path: Path, text: str) -> None:
    """Write one golden file atomically (a temporary file beside it, then a rename): a test
    reading it in another worker meanwhile sees the old text or the new, never a partial file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8", newline="\n") as fh:
        fh.write(text)
    os.replace(tmp, path)


def write_golden_tree(root: Path, files: dict[str, str]) -> None:
    """Make the folder `root` hold exactly `files` (relative path -> text): each file written
    with write_golden, then the files not in `files` removed (never the folder as a whole, which
    a test of another worker may be reading)."""
    for rel, text in files.items():
        write_golden(root / rel, text)
    for p in sorted(root.rglob("*"), reverse=True):
        if p.is_file() and p.relative_to(root).as_posix() not in files:
            p.unlink()
        elif p.is_dir() and not any(p.iterdir()):
            p.rmdir()


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
    on opening a FIFO, or a fuzz input that hangs, fails instead of hanging the suite.

    Signals reach only the main thread; xdist runs tests there (pytest-xdist >= 3.6), but where a
    test runs in another thread, the process instead dumps every thread's stack and exits after
    `seconds` (faulthandler): the run reports the worker's crash instead of hanging."""
    if threading.current_thread() is not threading.main_thread():
        faulthandler.dump_traceback_later(seconds, exit=True)
        try:
            yield
        finally:
            faulthandler.cancel_dump_traceback_later()
        return

    def fire(signum: int, frame: object) -> None:
        raise error(f"pgraph did not finish within {seconds} s")

    old = signal.signal(signal.SIGALRM, fire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive lock (flock) on `path` for the block: a read-modify-write of a shared file
    (docs/reliability.md, written by two long runs that may run in parallel workers) is not
    interleaved with another process's. The file is created when missing."""
    with open(path, "a", encoding="utf-8") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
