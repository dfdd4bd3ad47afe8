"""One NumPy run session: a fully expanded plan, inputs, dense reference, executions, `pgraph run`.

`Session.create` takes a Plan with every layer expanded (`Options(full=True)`), prepares the
inputs (fixture and weight mode; per-layer tensors are drawn on demand) and runs the dense
reference once; `Session.execute` runs the instance graph (or a mutated copy of its edges) in
one order and compares the output with the reference under the comparators that decide the run
(`compare.checks_for`: fixture, depth, weight mode), the others reported for information.

`TARGET` is the numpy runner of `pgraph.backends.target` (`pgraph run`): `TARGET.run(plan,
RunOptions(...))` prepares a Session, prints its header and one line per trial through
`RunOptions.echo`, and returns a RunResult.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import attrs
import networkx as nx
import numpy as np

from pgraph import records
from pgraph.backends.numpy.binding import Binder
from pgraph.backends.numpy.blas import blas_threads
from pgraph.backends.numpy.compare import MIN_COSINE, Check, Comparison, all_checks, checks_for, compare
from pgraph.backends.numpy.executor import Executor
from pgraph.backends.numpy.golden import GoldenResult, golden_decode
from pgraph.backends.numpy.inputs import LAYER_CACHE, LAYERED, Inputs, make_inputs
from pgraph.backends.numpy.orders import block_permutation, make_order
from pgraph.backends.numpy.races import RaceDetector, RaceFound, RaceReport
from pgraph.backends.numpy.storage import NP_DTYPES, KernelFault
from pgraph.backends.target import TargetRefused, require_full
from pgraph.ir import program as ir
from pgraph.kinds import TaskKind
from pgraph.plan.base import Plan

OUT_KEY = ("out", ())


#: Default limit of `memory_estimate` for a run (bytes): the full-size 40-layer run needs ~2.3 GiB.
DEFAULT_MAX_MEMORY = 16 << 30


def memory_estimate(program: ir.Program, layers: int) -> int:
    """Bytes a run of `program` allocates, an upper estimate: every non-view tensor once, the
    per-layer tensors (`inputs.LAYERED`) for LAYER_CACHE + 1 layers only (they are drawn per
    layer on demand), and twice the largest per-layer slice in f64 for the reference."""
    total = 0
    largest = 0
    for t in program.tensors.values():
        if t.base is not None:
            continue
        n = math.prod(t.shape)
        size = n * NP_DTYPES[t.dtype].itemsize if t.dtype in NP_DTYPES else n * 8
        if t.name in LAYERED and layers > 0:
            slice_elems = n // layers
            largest = max(largest, slice_elems)
            size = size // layers * min(layers, LAYER_CACHE + 1)
        total += size
    return total + 2 * 8 * largest


@records.shared_repr
@attrs.define(repr=False)
class Execution:
    """One executed order: output, final f32 residual, races, fault, comparison, wall time."""

    kind: str
    seed: int
    out: np.ndarray | None
    residual: np.ndarray | None
    races: list[RaceReport]
    fault: str | None
    comparison: Comparison | None
    seconds: float
    buffers: dict | None = None
    residual_comparison: Comparison | None = None

    @property
    def ok(self) -> bool:
        """No race, no kernel fault, and the comparison passed."""
        return not self.races and self.fault is None and self.comparison is not None and self.comparison.ok


@records.shared_repr
@attrs.define(repr=False)
class Session:
    """A planned spec with its inputs and reference output."""

    plan: Plan
    inputs: Inputs
    golden: GoldenResult
    binder: Binder
    layers: int

    @classmethod
    def create(cls, plan: Plan, seed: int = 1234, batch: int | None = None,
               fixture: str = "current", weights: str = "auto", max_memory: int = DEFAULT_MAX_MEMORY) -> Session:
        """Inputs and the dense reference for a planned spec.

        `plan` must be expanded in full (every layer: `Options(full=True)`); ValueError otherwise,
        and for inputs the spec cannot take (a batch outside 1..BATCH_PAD). `fixture`
        'current' | 'tier' and `weights` 'auto' | 'replicated' | 'distinct' go to
        `inputs.make_inputs` (ValueError for bad values, as there). ValueError too when
        `memory_estimate` exceeds `max_memory` bytes (nothing large is allocated before).
        """
        if not plan.graph.full:
            raise ValueError("the NumPy executor runs every layer: plan the spec with full expansion")
        inputs = make_inputs(plan.program, seed=seed, batch=batch, fixture=fixture, weights=weights)
        need = memory_estimate(plan.program, inputs.geometry.layers)
        if need > max_memory:
            raise ValueError(f"the NumPy run would need about {need / (1 << 30):.1f} GiB (every buffer of the "
                             f"spec, {LAYER_CACHE + 1} layers of per-layer tensors, the reference's f64 "
                             f"copies), more than the limit of {max_memory / (1 << 30):.1f} GiB; run a smaller "
                             f"configuration (--config small) or raise the limit with --max-memory GIB")
        with blas_threads(1):
            golden = golden_decode(inputs, keep_layers=True)
        binder = Binder(plan.graph, inputs.scalars)
        return cls(plan, inputs, golden, binder, inputs.geometry.layers)

    @property
    def checks(self) -> tuple[Check, ...]:
        """The comparators that decide this run (fixture, depth, weights: `compare.checks_for`)."""
        return checks_for(self.inputs.fixture, self.layers, self.inputs.weights)

    @property
    def info_checks(self) -> tuple[Check, ...]:
        """The other comparators, reported for information."""
        return tuple(c for c in all_checks(self.layers) if c not in self.checks)

    def compare(self, actual: np.ndarray, expected: np.ndarray) -> Comparison:
        """`compare.compare` with this run's live rows, deciding and informational comparators."""
        return compare(actual, expected, self.inputs.batch, self.checks, self.info_checks)

    def residual_key(self) -> tuple[str, tuple[int, ...]] | None:
        """Buffer read by copy_out (the final f32 residual stream), if the spec has one."""
        for inst in self.plan.graph.instances:
            if inst.kind in (TaskKind.ALLOC, TaskKind.DUMMY):
                continue
            if self.plan.program.dispatch(inst.dispatch).kernel == "copy_out":
                calls = self.binder.calls(inst.id)
                src = next(pb for pb in calls[0].params if pb.param.direction == "in")  # copy_out(out, cur, row0)
                return src.buffer
        return None

    def execute(self, kind: str, seed: int = 0, races: bool = True, graph: nx.DiGraph | None = None,
                stop_at_first: bool = False, keep_buffers: bool = False,
                order: list[int] | None = None) -> Execution:
        """Run one order of `graph` (default: the plan's own edges) and compare with the reference.

        `kind` is 'topo', 'random' (seeded by `seed`) or 'adversarial'; an explicit `order`
        (a legal order of `graph`) overrides it, with blocks in index order.
        """
        ig = self.plan.graph
        g = graph if graph is not None else ig.graph
        detector = RaceDetector(ig, g, stop_at_first=stop_at_first) if races else None
        ex = Executor(ig, self.inputs, self.binder, detector)
        blocks = block_permutation(kind, seed) if order is None else None
        order = make_order(kind, g, ig, seed) if order is None else order
        t0 = time.perf_counter()
        fault = None
        try:
            with blas_threads(1), np.errstate(all="ignore"):
                result = ex.run(order, blocks, keep_going=races)  # type: ignore[arg-type]
            fault = result.faults[0] if result.faults else None
        except KernelFault as err:
            fault = str(err)
        except RaceFound:
            pass
        seconds = time.perf_counter() - t0
        reports = list(detector.reports) if detector is not None else []
        out = residual = None
        comparison = None
        if fault is None and not (stop_at_first and reports):
            out = np.array(ex.storage[OUT_KEY].array) if OUT_KEY in ex.storage else None  # type: ignore[attr-defined]
            rkey = self.residual_key()
            if rkey is not None and rkey in ex.storage:
                residual = np.array(ex.storage[rkey].array)  # type: ignore[attr-defined]
            if out is not None:
                comparison = self.compare(out, self.golden.out)
        residual_comparison = None
        if residual is not None:
            residual_comparison = self.compare(residual, self.golden.residual)
        return Execution(kind, seed, out, residual, reports, fault, comparison, seconds,
                         ex.storage if keep_buffers else None, residual_comparison)

    def noise_floor(self) -> NoiseFloor:
        """The dense reference against itself with its projections in f64 (`golden_decode(wide=True)`).

        Same inputs and bf16 rounding points, another f32 summation error: the pass rates no
        implementation with a different summation order (split-K atomics) can be expected to
        beat. Costs one more reference run (about 1.3 s per full-size layer).
        """
        with blas_threads(1):
            wide = golden_decode(self.inputs, wide=True)
        return NoiseFloor(self.compare(wide.out, self.golden.out), self.compare(wide.residual, self.golden.residual))


@records.value
@attrs.frozen(repr=False, eq=False)
class NoiseFloor:
    """Comparisons of the f64-projection reference with the f32 reference: bf16 `out`, f32 residual."""

    out: Comparison
    residual: Comparison

    def render(self) -> str:
        """One line: the floor's failures for `out` and the f32 residual (first deciding comparator)."""
        return (f"reference noise floor (projections in f64 vs f32, same bf16 rounding points), "
                f"{self.out.primary.check.name}: out {self.out.primary.render()}, "
                f"f32 residual {self.residual.primary.render()}")

    def explains(self, c: Comparison) -> bool:
        """True when `c` fails only its pass-rate tier, by at most 1.25x the floor's failures + 0.1 %.

        NaN/Inf, pad-row failures or a cosine <= 0.999 are never explained by the floor.
        """
        if c.ok or c.nonfinite or c.pad_failures or c.cosine <= MIN_COSINE:
            return False
        return 1 - c.pass_rate <= 1.25 * (1 - self.out.pass_rate) + 0.001


def max_diff(a: np.ndarray | None, b: np.ndarray | None) -> float:
    """max |a - b| in f64 (inf when either is missing or non-finite)."""
    if a is None or b is None:
        return float("inf")
    d = np.abs(np.asarray(a).astype(np.float64) - np.asarray(b).astype(np.float64))
    return float(d.max()) if np.isfinite(d).all() else float("inf")


def run_trials(session: Session, kind: str, trials: int, seed: int, print_fn=print, max_races: int = 10,
               floor: bool = False) -> int:
    """Run `trials` executions of order `kind`, print one line each and a summary; exit code.

    Each line gives the verdict on the bf16 `out` under the deciding comparators
    (`Session.checks`) and, for information, the f32 residual stream before copy_out under
    the first of them. After the first trial, the informational comparators' results. With
    `floor`, the reference's own noise floor is measured and printed (Session.noise_floor) and
    trials that fail only within it are marked; the exit code still follows the comparators
    (1 when any trial fails).
    """
    ig = session.plan.graph
    passed = 0
    first: Execution | None = None
    diffs: list[tuple[float, float]] = []
    tier_only: list[Comparison] = []
    for t in range(trials):
        s = seed + t
        ex = session.execute(kind, seed=s)
        label = f"trial {t + 1}/{trials} {kind}" + (f" (order seed {s})" if kind == "random" else "")
        if ex.fault is not None:
            print_fn(f"{label}: kernel fault: {ex.fault}")
        elif ex.comparison is not None:
            res = ex.residual_comparison
            extra = f"; f32 residual {res.primary.render()}" if res is not None else ""
            print_fn(f"{label}: {ex.comparison.render()}; races {len(ex.races)}{extra}")
            c = ex.comparison
            if first is None:
                for line in c.render_info():
                    print_fn(f"  {line}")
            if not ex.races and not c.ok and not c.nonfinite and not c.pad_failures:
                tier_only.append(c)
        else:
            print_fn(f"{label}: no output")
        for rep in ex.races[:max_races]:
            print_fn(rep.render(ig))
        if len(ex.races) > max_races:
            print_fn(f"... {len(ex.races) - max_races} more race report(s)")
        passed += ex.ok
        if first is None:
            first = ex
        else:
            diffs.append((max_diff(ex.out, first.out), max_diff(ex.residual, first.residual)))
    if diffs:
        print_fn(f"order independence: max |out - out(trial 1)| = {max(d[0] for d in diffs):.3e}, "
                 f"max |f32 residual - trial 1| = {max(d[1] for d in diffs):.3e}")
    if floor:
        nf = session.noise_floor()
        print_fn(nf.render())
        explained = sum(nf.explains(c) for c in tier_only)
        if explained:
            print_fn(f"note: {explained} failing trial(s) are within the reference's own noise floor: the bf16 "
                     "rounding points make deep runs diverge at the ulp level (docs/backend_numpy.md)")
    elif tier_only and session.layers > 1:
        print_fn("hint: rerun with --floor to measure how close the reference comes to itself at this depth")
    print_fn(f"per-layer inputs: {session.inputs.generated} layer slice(s) drawn (reference and executions)")
    print_fn(f"result: {passed}/{trials} trial(s) passed")
    return 0 if passed == trials else 1


def describe(session: Session, spec: str, config: str | None, seed: int) -> str:
    """Header of `pgraph run`: sizes, graph, fixture, weight mode; then each deciding comparator and its source."""
    ig = session.plan.graph
    tasks = [i for i in ig.instances if i.kind not in (TaskKind.ALLOC, TaskKind.DUMMY)]
    blocks = sum(i.blocks for i in tasks)
    inp = session.inputs
    g = inp.geometry
    cfg = f", config {config}" if config else ""
    mode = "replicated layer-0 weights" if inp.replicated else "distinct weights per layer"
    fixture = {"current": "today's fixture (reference §5)", "tier": "the tier harness's fixture"}[inp.fixture]
    head = (f"{spec}: {g.layers} layer(s), batch {inp.batch}/{g.batch_pad}, seed {seed}{cfg}; "
            f"hidden {g.hidden}, intermediate {g.intermediate}, heads {g.num_heads}/{g.num_kv_heads}; "
            f"{len(tasks)} tasks, {blocks} blocks; inputs: {fixture}, {mode}")
    return "\n".join([head, *(f"  decides: {c.describe()} (source: {c.source})" for c in session.checks)])


@records.value
@attrs.frozen(repr=False, eq=False)
class RunOptions:
    """What `pgraph run` asks of the numpy runner: the inputs (`seed`, `batch` live rows,
    `fixture` 'current' | 'tier', `weights` 'auto' | 'replicated' | 'distinct', `max_memory` in
    bytes: see `Session.create`), the executions (`order` 'topo' | 'random' | 'adversarial',
    `trials`, `floor`: see `run_trials`), the spec and config as the header names them, and
    `echo`, which prints each line of the report as soon as it is known (a full-size trial takes
    seconds)."""

    seed: int = 1234
    batch: int | None = None
    fixture: str = "current"
    weights: str = "auto"
    max_memory: int = DEFAULT_MAX_MEMORY
    order: str = "topo"
    trials: int = 1
    floor: bool = False
    spec: str = ""
    config: str | None = None
    echo: Callable[[str], None] = print


@records.value
@attrs.frozen(repr=False, eq=False)
class RunResult:
    """The outcome of `NumpyTarget.run`: whether every trial passed (`run_trials`' exit code 0)."""

    ok: bool

    @property
    def exit_code(self) -> int:
        """0 when every trial passed, 1 otherwise (`pgraph run`)."""
        return 0 if self.ok else 1


@records.value
@attrs.frozen(repr=False, eq=False)
class NumpyTarget:
    """The numpy runner (`pgraph run`): execute a fully expanded plan and compare it with the reference."""

    name: str = "numpy"
    description: str = ("execute the task graph with NumPy kernels and check it against the dense reference "
                        "(`pgraph run`)")
    needs_full: bool = True  # every layer is executed, each task once

    def run(self, plan: Plan, options: RunOptions) -> RunResult:
        """Prepare the Session (TargetRefused for inputs the spec cannot take, a run over
        `max_memory`, or memory running out while preparing), echo its header (`describe`),
        run the trials (`run_trials`). InternalError for a windowed plan."""
        require_full(self, plan)
        try:
            session = Session.create(plan, seed=options.seed, batch=options.batch, fixture=options.fixture,
                                     weights=options.weights, max_memory=options.max_memory)
        except ValueError as err:
            raise TargetRefused(str(err)) from None
        except MemoryError:
            raise TargetRefused("the NumPy run ran out of memory while preparing the inputs and the reference; "
                                "run a smaller configuration (--config small)") from None
        options.echo(describe(session, options.spec, options.config, options.seed))
        code = run_trials(session, options.order, options.trials, options.seed, print_fn=options.echo,
                          floor=options.floor)
        return RunResult(code == 0)


TARGET = NumpyTarget()
