"""The pipeline: every stage and every check, in order. The only module that knows the order.

    read -> parse + includes -> lower (names, constants) -> forms -> program checks
         -> expand -> expansion checks -> planner passes -> Plan -> backends

A stage that reports an error stops the pipeline (lowering and the form checks run
together, so one run reports both). With `Options.verify` (or PGRAPH_VERIFY=1 in the
environment, which the tests set) the IR verifier runs after lowering and after expansion.
`run_until` stops after a named stage for `--emit ast|ir|graph|plan`. Each diagnostic code
has one owning stage (`CODE_OWNERS`).
"""

from __future__ import annotations

import contextlib
import gc
import os
from collections.abc import Iterator
from pathlib import Path

import attrs

from pgraph import records
from pgraph.diagnostics import RULES, DiagnosticBag, Waiver
from pgraph.expand.expander import expand
from pgraph.expand.window import make_window
from pgraph.frontend import findings as frontend_findings
from pgraph.frontend.allows import check_allows, inline_waivers
from pgraph.frontend.loader import Loaded, UsageError, load_program_files, project_root, spec_source
from pgraph.frontend.overrides import Override, collect_overrides, parse_define
from pgraph.ir import verify
from pgraph.ir.instances import InstanceGraph
from pgraph.ir.program import Program
from pgraph.ir.queries import Window
from pgraph.kinds import InternalError
from pgraph.lower import findings as lower_findings
from pgraph.lower.forms import check_forms
from pgraph.lower.lowerer import lower
from pgraph.plan import findings as plan_findings
from pgraph.plan.base import Fact, Pass, Plan, ProgramCheck
from pgraph.plan.budgets import BudgetsPass
from pgraph.plan.compat import OldCompilerPass
from pgraph.plan.counts import CountsPass
from pgraph.plan.created import CreatedPass
from pgraph.plan.critical_path import CriticalPathPass
from pgraph.plan.cycles import CyclesPass
from pgraph.plan.declarations import AssertsCheck, CarriesCheck, SettingsCheck, ShapesCheck
from pgraph.plan.early_dispatch import DummyEffectPass, EarlyDispatchPass
from pgraph.plan.expansion_issues import ExpansionIssuesPass
from pgraph.plan.hygiene import DeadTaskPass, DuplicateDepsPass, FunnelPass, RedundantEdgePass, UnusedTensorPass
from pgraph.plan.kernels import KernelTablesCheck
from pgraph.plan.limits import TaskLimitsCheck, ViewLimitsPass
from pgraph.plan.races import FalseSerializationPass, RacePass, SpmdOverlapPass
from pgraph.plan.reach import ReachPass
from pgraph.plan.regions import RangesCheck, RanksCheck
from pgraph.plan.rings import RingsPass
from pgraph.plan.scope_table import ScopeTablePass
from pgraph.plan.scopes import ScopeNestingCheck, VisibilityCheck
from pgraph.plan.signatures import SignaturesCheck
from pgraph.plan.size import check_expansion_size
from pgraph.plan.sync_start import SyncStartStarvedPass
from pgraph.plan.waves import WaveDepsCheck, WavesCheck
from pgraph.plan.writes import DefiniteWritesPass

__all__ = ["CODE_OWNERS", "Options", "PipelineError", "UsageError", "compile_program", "expand_window",
           "owned_bag", "parse_define", "plan_program", "run_until"]


def _codes(*spans: str) -> tuple[str, ...]:
    """`_codes("PG001", "PG006-PG009")` -> the codes, ranges expanded."""
    out: list[str] = []
    for s in spans:
        lo, _, hi = s.partition("-")
        out.extend(f"PG{n:03d}" for n in range(int(lo[2:]), int((hi or lo)[2:]) + 1))
    return tuple(out)


#: The owning stage of every diagnostic code: only the modules of that stage's package name the
#: code and word its message (tests/unit/test_code_owners.py scans the source; bags watch every
#: run). The granularity is the package, one per stage that reports: the frontend reads text
#: (parse, includes, overrides), lowering resolves names (the lowerer and the form checks, one
#: stage of the order: they run together and stop together), the planner checks values (the
#: declaration and use checks, the size guard, the expansion checks and the passes). Finer
#: would split a rule: the planner checks PG006, PG018 and PG026 on the constants before
#: expansion and again on each instance after it, and PG114 on a task's arguments before and on
#: each view's offsets after, each time where its values are first known; where a rule lives
#: is a package, when it runs is this module's order. A stage that meets a case of another
#: stage's rule hands it to the owner as a `pgraph.findings` record (`owned_bag`), reported at
#: once, so the stop points are unchanged. PG030 and PG042 are the bag's own (the error limit, an
#: allow that waived nothing: `DiagnosticBag.waive`).
CODE_OWNERS: dict[str, tuple[str, ...]] = {
    "frontend": _codes("PG001", "PG004", "PG005", "PG041"),
    "lower": _codes("PG002", "PG003", "PG017", "PG019", "PG025", "PG028", "PG033", "PG034", "PG036", "PG038"),
    "plan": _codes("PG006-PG016", "PG018", "PG020-PG024", "PG026", "PG027", "PG029", "PG031", "PG032", "PG035",
                   "PG037", "PG039", "PG040", "PG100-PG124"),
    "diagnostics": _codes("PG030", "PG042"),
}

#: Each owner's reporters of the findings of its rules (`pgraph.findings`).
FINDING_REPORTERS = {"frontend": frontend_findings.REPORTERS, "lower": lower_findings.REPORTERS,
                     "plan": plan_findings.REPORTERS}


#: Code -> its owning stage.
OWNER_OF = {code: stage for stage, codes in CODE_OWNERS.items() for code in codes}


def owned_bag(bag: DiagnosticBag | None = None, check_owners: bool = False) -> DiagnosticBag:
    """`bag` (a new one by default) with every owner's finding reporters registered: a finding
    a stage hands over (`bag.found`) is reported there and then by the stage that owns its code.
    With `check_owners` (`Options.verify`, on in the tests) a code added from a module of a stage that
    does not own it is an InternalError."""
    bag = DiagnosticBag() if bag is None else bag
    for reporters in FINDING_REPORTERS.values():
        bag.reporters.update(reporters)
    if check_owners:
        bag.owners = OWNER_OF
    return bag

#: Checks of the resolved Program, before anything is expanded (pgraph.plan.base.ProgramCheck),
#: in two tiers: the declarations themselves, then their uses (which trust the first tier).
DECLARATION_CHECKS: tuple[ProgramCheck, ...] = (
    ShapesCheck(),          # PG006/PG018 dimensions, PG024 view sizes
    SettingsCheck(),        # PG006 target limits and costs
    AssertsCheck(),         # PG008 asserts (PG018: non-constant ones)
    CarriesCheck(),         # PG029 loop carries
    ScopeNestingCheck(),    # PG022 nesting, PG023 stated rings, PG035 interleave content
    RangesCheck(),          # PG006 negative loop, index and item ranges
    RanksCheck(),           # PG020 region and dep-selection ranks
    WavesCheck(),           # PG026 waves outside the tile space, PG021 wave coverage
)
USE_CHECKS: tuple[ProgramCheck, ...] = (
    WaveDepsCheck(),        # PG027 deps using SPMD block indices
    KernelTablesCheck(),    # PG039 kernels tables: one signature, indices inside the table
    SignaturesCheck(),      # PG009-PG012 calls against kernel signatures
    VisibilityCheck(),      # PG014 TaskIds of closed scopes, PG037 buffers of closed scopes
    TaskLimitsCheck(),      # PG113 sync_start occupancy, PG114 argument and tensor limits
)

#: Checks of the expansion itself; their errors stop the pipeline before the analysis.
EXPANSION_CHECKS: tuple[Pass, ...] = (
    ExpansionIssuesPass(),  # PG006/PG007/PG018 per instance, PG015 empty deps, PG026 dep ranges
    CyclesPass(),           # PG013 cycles, PG032 deps on later submits
    CreatedPass(),          # PG124 runtime-created tensors: one whole `out` creating write, first
)

#: The planner's analysis, in order. Each pass reads the IR, the instance graph and earlier facts.
PASSES: tuple[Pass, ...] = (
    CountsPass(),              # tasks / dummies / blocks / edges, per layer and in total; phases
    ScopeTablePass(),          # scope depths, rings and heap bytes per scope
    ReachPass(),               # happens-before (ancestor sets)
    RacePass(),                # PG100 race, PG101 manual-scope boundary
    SpmdOverlapPass(),         # PG102 blocks of one grid writing the same region
    DefiniteWritesPass(),      # PG122 reads of allocated elements no earlier task writes
    FalseSerializationPass(),  # PG103 disjoint writers the runtime serializes
    EarlyDispatchPass(),       # early-dispatch table; PG105 blocked consumers, PG106 idle flags
    DummyEffectPass(),         # PG104 what each dummy really does
    SyncStartStarvedPass(),    # PG119 sync_start grids starved of cores; the tasks that can hold theirs staged
    OldCompilerPass(),         # PG123 empty-deps dummies an older compiler drops, and their consumers
    CriticalPathPass(),        # longest path (with the sync_start holders' wait), first broken early-resolve link
    RingsPass(),               # PG107-PG112, PG120 rings, task window, heap, dep pool, TensorMap
    ViewLimitsPass(),          # PG114 view offsets and extents that do not fit uint32_t
    DuplicateDepsPass(),       # PG016 duplicate dep entries folded
    RedundantEdgePass(),       # PG115 edges implied by other paths
    FunnelPass(),              # PG116 fan-outs that could go through one node
    DeadTaskPass(),            # PG117 tasks whose outputs nobody reads
    UnusedTensorPass(),        # PG118 tensors nobody touches
    BudgetsPass(),             # PG121 figures over the spec's `budget` statements
)

#: Stop points of `run_until` / `--emit`, in order.
STAGES = ("ast", "ir", "graph", "plan")


class PipelineError(InternalError):
    """The passes are in an order in which a fact is read before it is produced."""


def check_order(passes: tuple[Pass, ...]) -> None:
    """PipelineError unless every fact a pass requires is produced by an earlier pass."""
    made: dict[type[Fact], str] = {}
    producer = {f: p.name for p in passes for f in p.produces}
    for p in passes:
        for f in p.requires:
            if f not in made:
                later = f" ('{producer[f]}' produces it later)" if f in producer else " (no pass produces it)"
                raise PipelineError(f"pass '{p.name}' requires {f.__name__}, which no earlier pass produces{later}")
        for f in p.produces:
            made[f] = p.name


check_order((*EXPANSION_CHECKS, *PASSES))


@records.value
@attrs.frozen(repr=False, eq=False)
class Options:
    """Compile options: constant overrides, a config file, a layer count, full expansion, verification,
    whether includes and the config file may lie outside the spec's project root
    (`--allow-include-outside`; pgraph.frontend.loader.project_root), the codes `--allow`
    waives (`allow`: PGxxx codes), and `what_if`: None when the run is a gate of the spec's
    budgets (`check`, `build`, `plan`), else why it is not (the command: "`pgraph sim`"), in
    which case an overrun is a PG121 warning (pgraph.plan.budgets)."""

    defines: tuple[tuple[str, int], ...] = ()
    config: str | None = None
    layers: int | None = None
    full: bool = False
    verify: bool = attrs.field(factory=lambda: os.environ.get("PGRAPH_VERIFY", "") not in ("", "0"))
    allow_include_outside: bool = False
    allow: tuple[str, ...] = ()
    what_if: str | None = None
    #: Compatibility settings of the target table set from the command line (`--compat pypto<1987`:
    #: (("pypto_pr", 1986),); pgraph.ir.limits.parse_compat), replacing the spec's own.
    compat: tuple[tuple[str, int], ...] = ()
    #: Unsaved editor buffers, read instead of the files on disk: (resolved path, text) pairs
    #: (`pgraph lsp`; pgraph.frontend.loader.spec_source).
    sources: tuple[tuple[Path, str], ...] = ()


@records.value
@attrs.frozen(repr=False, eq=False)
class Stopped:
    """What `run_until` reached: the loaded AST, the Program, the instance graph, the Plan (or None)."""

    loaded: Loaded | None = None
    program: Program | None = None
    graph: InstanceGraph | None = None
    plan: Plan | None = None


def load(path: str | Path, opts: Options, bag: DiagnosticBag) -> tuple[Loaded | None, list[Override]]:
    """Read and parse the spec and its includes, and the overrides of `opts` (UsageError for a bad file)."""
    sources = dict(opts.sources)
    root = spec_source(path, sources)
    project = project_root(path)
    overrides = collect_overrides(Path(path), opts.config, opts.defines, opts.layers, bag, project,
                                  opts.allow_include_outside)
    loaded = load_program_files(root, bag, project, opts.allow_include_outside, sources)
    if loaded is not None and not bag.has_errors:
        check_allows(loaded.items, bag)  # PG041
    if loaded is None or bag.has_errors:
        return None, overrides
    bag.note_hooks.append(loaded.chain_notes)  # every later diagnostic in an included file names the chain
    return loaded, overrides


def compile_program(path: str | Path, opts: Options, bag: DiagnosticBag) -> Program | None:
    """Parse, lower and check the Program (no expansion); None when the bag holds errors."""
    return run_until(path, opts, bag, "ir").program


def run_until(path: str | Path, opts: Options, bag: DiagnosticBag, stage: str = "plan") -> Stopped:
    """Run the pipeline up to and including `stage` (one of STAGES); stops early on errors."""
    if stage not in STAGES:
        raise ValueError(f"unknown stage {stage!r}; one of {', '.join(STAGES)}")
    owned_bag(bag, opts.verify)
    with _collector_paused():
        stopped = _run_until(path, opts, bag, stage)
    waive(stopped, opts, bag)
    return stopped


def waive(stopped: Stopped, opts: Options, bag: DiagnosticBag) -> None:
    """Apply the spec's inline allows and `--allow` (`opts.allow`) to the run's diagnostics
    (`DiagnosticBag.waive`); an allow that waived nothing is PG042 only when the planner ran
    to its end (a stage that stopped early has not said everything yet)."""
    waivers = inline_waivers(stopped.loaded.items) if stopped.loaded is not None else []
    if opts.allow:
        unknown = sorted(set(opts.allow) - set(RULES))
        if unknown:
            raise InternalError(f"--allow codes not checked by the command line: {', '.join(unknown)}")
        waivers.extend(Waiver((code,), "") for code in dict.fromkeys(opts.allow))
    bag.waive(waivers, report_unused=stopped.plan is not None)


def _run_until(path: str | Path, opts: Options, bag: DiagnosticBag, stage: str) -> Stopped:
    """`run_until` with the cyclic collector paused."""
    loaded, overrides = load(path, opts, bag)
    if loaded is None:
        return Stopped()
    if stage == "ast":
        return Stopped(loaded)
    program = lower(loaded, bag, overrides)
    check_forms(loaded, bag)
    if program is None or bag.has_errors:
        return Stopped(loaded)
    if opts.compat:  # `--compat`: the target table's compatibility keys, as if the spec said them
        program = attrs.evolve(program, target={**program.target, **dict(opts.compat)})
    if opts.verify:
        verify.verify_program(program)
    for tier in (DECLARATION_CHECKS, USE_CHECKS):
        for check in tier:
            check.run(program, bag)
        if bag.has_errors:
            return Stopped(loaded)
    window = make_window(program, opts.full)
    if check_expansion_size(program, window, bag):
        return Stopped(loaded)
    if stage == "ir":
        return Stopped(loaded, program)
    return _expand_and_plan(loaded, program, window, opts, bag, stage)


#: Whether the objects a pipeline run built live until the process ends (`keep_results`).
_RESULTS_KEPT = False


def keep_results(keep: bool = True) -> None:
    """Declare that this process keeps what each pipeline run builds until it exits (the command
    line: one run, its outputs, `os._exit`). The cyclic collector then leaves those objects out
    of its scans for good (`gc.freeze`) instead of walking all of them once when it is enabled
    again: ~7 s after a --full plan of the 351,050-task prefill, for no garbage found. A process
    that runs the pipeline again and again (`pgraph lsp`) says `keep=False`."""
    global _RESULTS_KEPT
    _RESULTS_KEPT = keep


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Parsing, expansion and the passes build millions of objects and no reference cycles worth
    collecting: Python's cyclic collector would rescan them again and again (a third of a --full
    prefill plan), so it waits until the pipeline returns (see `keep_results`)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            if _RESULTS_KEPT:
                gc.freeze()
            gc.enable()


def _expand_and_plan(loaded: Loaded, program: Program, window: Window, opts: Options, bag: DiagnosticBag,
                     stage: str) -> Stopped:
    """The stages from expansion on (see `run_until`)."""
    graph = expand(program, opts.full, window)
    if opts.verify:
        verify.verify_graph(graph)
    if stage == "graph":
        return Stopped(loaded, program, graph)
    plan = Plan(program, graph, bag, what_if=opts.what_if)
    for p in EXPANSION_CHECKS:
        p.run(plan)
    if bag.has_errors:
        return Stopped(loaded, program, graph)
    for p in PASSES:
        p.run(plan)
        missing = [f.__name__ for f in p.produces if not plan.has(f)]
        if missing:
            raise PipelineError(f"pass '{p.name}' did not produce {', '.join(missing)}")
    return Stopped(loaded, program, graph, plan)


def expand_window(program: Program, window: Window, opts: Options) -> InstanceGraph:
    """The instance graph of a checked Program under a chosen window (the queries' expansion:
    `pgraph deps` and `why` enumerate the iterations they are asked about; no pass runs)."""
    with _collector_paused():
        graph = expand(program, opts.full, window)
    if opts.verify:
        verify.verify_graph(graph)
    return graph


def plan_program(path: str | Path, opts: Options | None = None) -> tuple[Plan | None, DiagnosticBag]:
    """The whole planner on one spec: the Plan and every diagnostic.

    The Plan is None when a stage before the analysis passes failed; the passes' own errors
    (a race, a capacity overflow) leave a Plan to inspect, and `bag.has_errors` says so.
    """
    bag = DiagnosticBag()
    stopped = run_until(path, opts or Options(), bag, "plan")
    return stopped.plan, bag
