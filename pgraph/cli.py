"""Command line: argument parsing and printing only; every subcommand calls the pipeline.

Exit codes: 0 ok, 1 diagnostics with errors, 2 usage error, 3 internal error (a bug in
pgraph: please report it), 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from pgraph import __version__, interrupts
from pgraph.commands.diagnostic_options import diagnostic_options, parse_allow, side_defines
from pgraph.commands.numbers import count, finite_positive
from pgraph.diagnostics import (
    DiagnosticBag,
    Severity,
    diagnostic_json,
    render_all_text,
    render_allowed,
    render_json,
    render_note_summary,
)
from pgraph.pipeline import STAGES, Options, UsageError, keep_results, parse_define, plan_program, run_until

if TYPE_CHECKING:
    from pgraph.backends.target import Emitter, Target
    from pgraph.commands import context

EXIT_OK, EXIT_ERRORS, EXIT_USAGE, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


def _write_or_usage_error(write: Callable[[], None], where: str) -> None:
    """Run `write`; an OSError (read-only place, a file where a folder should be) is UsageError."""
    try:
        write()
    except OSError as err:
        raise UsageError(f"cannot write {where}: {err.strerror or err}") from None


ALLOW_OUTSIDE_HELP = ("read includes and the --config file even when they lie outside the spec's project root "
                      "(the nearest folder above the spec with .git, pyproject.toml or pgraph.toml, else the "
                      "spec's folder)")


def _allow_outside(p: argparse.ArgumentParser, top: bool = False) -> None:
    """`--allow-include-outside`, accepted before the subcommand and after it.

    The subcommand's copy has no default (SUPPRESS), so it never resets the top-level one."""
    p.add_argument("--allow-include-outside", dest="allow_include_outside", action="store_true",
                   default=False if top else argparse.SUPPRESS, help=ALLOW_OUTSIDE_HELP)


def _spec(p: argparse.ArgumentParser, config_metavar: str = "NAME|FILE.pgl",
          config_help: str = "constant overrides (see `plan --config`)") -> None:
    """The spec argument, its constant overrides and the diagnostic options (every command that
    reads one spec)."""
    p.add_argument("spec", help="the .pgl file")
    p.add_argument("-D", dest="defines", action="append", default=[], metavar="NAME=VALUE",
                   help="override a constant before folding (repeatable)")
    p.add_argument("--config", metavar=config_metavar, help=config_help)
    p.add_argument("--layers", type=count(1), metavar="N", help="same as -D NUM_LAYERS=N")
    p.add_argument("--compat", type=_compat, action="append", default=[], metavar="MODE",
                   help="plan for an older compiler: `pypto<1987` drops every empty-deps dummy, as pypto "
                        "did before #1987 (the target table's `pypto_pr = 1986`)")
    _allow_outside(p)
    diagnostic_options(p)


def _compat(text: str) -> tuple[str, int]:
    """A `--compat` mode (pgraph.ir.limits.parse_compat); a bad one is a usage error (exit 2)."""
    from pgraph.ir.limits import parse_compat

    try:
        return parse_compat(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _common(p: argparse.ArgumentParser) -> None:
    _spec(p, config_help="constant overrides from a .pgl file of `const` lines (a bare name is "
                         "<spec dir>/configs/NAME.pgl)")
    p.add_argument("--full", action="store_true",
                   help="expand every loop iteration instead of the two-iteration window (slower; for checking)")
    p.add_argument("--format", choices=("text", "json"), default="text", help="report format")


def _picture_options(p: argparse.ArgumentParser, prefix: str) -> None:
    """`--focus`, `--depth`, `--collapse`: the dot emitter's view (pgraph.backends.dot.DotView)."""
    p.add_argument("--focus", metavar="TASK",
                   help=prefix + "draw TASK's neighbourhood only: its producers and consumers up to --depth edges "
                                 "away (TASK: a dispatch, a tiles declaration, a task label such as q_proj@L=1); the "
                                 "rest is elided and counted in the legend")
    p.add_argument("--depth", type=int, metavar="N", help=prefix + "edges away from --focus to keep (default 1)")
    p.add_argument("--collapse", metavar="LEVEL[,LEVEL]",
                   help=prefix + "draw each group of a level as one node: tiles (the waves of one tiles "
                                 "declaration), phase (a phase block), loop (everything inside an outermost loop)")


def _a2a3_options(p: argparse.ArgumentParser) -> None:
    """`--layout`, `--target-config`: the a2a3 emitter's options (pgraph.backends.a2a3.config)."""
    p.add_argument("--layout", choices=("pypto", "runtime"),
                   help="--target a2a3: where the orchestration goes: pypto = orchestration/<entry>.cpp (as pypto "
                        "writes it), runtime = kernels/orchestration/<entry>.cpp (the runtime's example tree) "
                        "(default: the target configuration's, pypto)")
    p.add_argument("--target-config", action="append", default=[], metavar="FILE.toml",
                   help="--target a2a3: a TOML file laid out like pgraph/backends/a2a3/a2a3.toml (the devkit include "
                        "folders of extern kernels, the layout) whose keys replace the packaged ones; repeatable")


def version_text() -> str:
    """What `pgraph --version` prints: pgraph's version, the version of the Lark module pgraph
    imports, and the digest (`grammar_digest`: CRC-32 and byte length) of the grammar it reads."""
    from pgraph.frontend import import_lark
    from pgraph.frontend.parser import _grammar_text, grammar_digest

    try:
        lark_version = str(getattr(import_lark(), "__version__", "unknown"))
    except ImportError:
        lark_version = "not installed"
    try:
        grammar = "grammar " + grammar_digest(_grammar_text()).decode("ascii")
    except OSError:
        grammar = "grammar missing"
    return f"pgraph {__version__}, lark {lark_version}, {grammar}"


class _VersionAction(argparse.Action):
    """`--version`: print `version_text()` and exit 0 (computed only when asked for, so that no
    other command reads the grammar or imports Lark for it)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS,
                 default: str = argparse.SUPPRESS, help: str | None = None) -> None:
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        sys.stdout.write(version_text() + "\n")
        parser.exit()


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The argparse tree of `pgraph`. With `command` (a subcommand about to run), only that
    subcommand gets its options: the others are listed (the usage and help texts are the same)
    without them, so that `pgraph plan` builds one option table and imports neither the
    simulator's options nor the queries'."""
    ap = argparse.ArgumentParser(prog="pgraph", description="Plan and check .pgl task graphs.")
    ap.add_argument("--version", action=_VersionAction,
                    help="print the versions of pgraph and Lark and the grammar digest, and exit")
    _allow_outside(ap, top=True)
    sub = ap.add_subparsers(dest="command", required=True)
    want = (lambda name: True) if command not in COMMANDS else (lambda name: name == command)
    _plan_commands(sub, want)
    run = sub.add_parser("run", help="execute the spec's task graph with NumPy kernels and check it "
                                     "against the dense reference")
    if want("run"):
        _spec(run, config_metavar="small|full|FILE.pgl")
        run.add_argument("--batch", type=int, metavar="B", help="live rows, 1..BATCH_PAD (default BATCH_PAD)")
        run.add_argument("--seed", type=int, default=1234, metavar="S", help="input seed; random orders use S + trial - 1 (default %(default)s)")
        run.add_argument("--order", choices=("topo", "random", "adversarial"), default="topo",
                         help="execution order (default %(default)s)")
        run.add_argument("--trials", type=int, default=1, metavar="K", help="number of executions (default %(default)s)")
        run.add_argument("--inputs", choices=("current", "tier"), default="current",
                         help="input fixture: 'current' = pypto-lib's random_inputs (reference §5), 'tier' = the "
                              "distributions of the tier harness (docs/backend_numpy.md) (default %(default)s)")
        run.add_argument("--max-memory", type=finite_positive, default=16.0, metavar="GIB",
                         help="refuse a run whose estimated memory exceeds GIB gibibytes (default 16)")
        run.add_argument("--weights", choices=("auto", "replicated", "distinct"), default="auto",
                         help="per-layer tensors: layer 0's for every layer, or distinct per layer (drawn on demand "
                              "from the seed and the layer); auto = distinct up to 2 GiB of them (default %(default)s)")
        run.add_argument("--floor", action="store_true",
                         help="also measure the reference against itself with f64 projections (the best pass "
                              "rate any other summation order can expect; one more reference run)")
    _output_commands(sub, want)
    dif = sub.add_parser("diff", help="compare two task graphs (each a .pgl spec or a deps.json): tasks, edges, "
                                      "per-layer counts, diagnostics, critical path")
    if want("diff"):
        dif.add_argument("old", metavar="OLD", help="a .pgl spec or a deps.json (*.json)")
        dif.add_argument("new", metavar="NEW", help="a .pgl spec or a deps.json (*.json)")
        dif.add_argument("-D", dest="defines", action="append", default=[], metavar="NAME=VALUE",
                         help="override a constant of both spec sides before folding (repeatable)")
        side_defines(dif, "OLD", "NEW")
        dif.add_argument("--config", metavar="NAME|FILE.pgl", help="constant overrides of the spec side(s)")
        dif.add_argument("--layers", type=count(1), metavar="N", help="same as -D NUM_LAYERS=N")
        diagnostic_options(dif)
        dif.add_argument("--format", choices=("text", "json"), default="text", help="report format")
        dif.add_argument("--limit", type=count(1), default=40, metavar="N", help="change groups shown (default %(default)s)")
        dif.add_argument("-o", "--output", metavar="FILE", help="write the report to FILE (atomically)")
    _query_commands(sub, want)
    fmt = sub.add_parser("fmt", help="rewrite .pgl files in the canonical layout (comments kept)")
    if want("fmt"):
        fmt.add_argument("files", nargs="+", metavar="FILE", help="the .pgl files")
        fmt.add_argument("--check", action="store_true", help="write nothing; exit 1 when a file would change")
    fix = sub.add_parser("fix", help="apply the machine fixes of a spec's diagnostics (the hints that are edits)")
    if want("fix"):
        _spec(fix)
        fix.add_argument("--code", dest="codes", action="append", default=[], metavar="CODE",
                         help="fix only the diagnostics of CODE (PG100 or its slug race; repeatable), notes included")
        fix.add_argument("--dry-run", action="store_true",
                         help="print the change as a unified diff on stdout and write nothing")
    lsp = sub.add_parser("lsp", help="a language server on stdin/stdout for editors: diagnostics, hover, "
                                     "go-to-definition (needs pip install 'pgraph[lsp]')")
    if want("lsp"):
        lsp.add_argument("-D", dest="defines", action="append", default=[], metavar="NAME=VALUE",
                         help="override a constant in every check (repeatable)")
        lsp.add_argument("--config", metavar="NAME|FILE.pgl", help="constant overrides of every check")
        lsp.add_argument("--layers", type=count(1), metavar="N", help="same as -D NUM_LAYERS=N")
        lsp.add_argument("--stdio", action="store_true", help="talk on stdin/stdout (the default and only transport)")
        _allow_outside(lsp)
    explain = sub.add_parser("explain", help="print the documentation of a diagnostic code")
    if want("explain"):
        explain.add_argument("code", help="e.g. PG013 or dependency-cycle")
    return ap


def _plan_commands(sub: Any, want: Callable[[str], bool]) -> None:
    """`check` and `plan` (their options only when `want` them: see build_parser)."""
    check = sub.add_parser("check", help="parse, lower and check a spec; print diagnostics only")
    if want("check"):
        _common(check)
        check.add_argument("--emit", choices=STAGES, metavar="|".join(STAGES),
                           help="stop after a stage and print its stable text dump (ast: the canonical source; "
                                "ir: the lowered program; graph: the instance graph; plan: the facts)")
    plan = sub.add_parser("plan", help="check a spec and print its cost report (or a Graphviz picture)")
    if want("plan"):
        _common(plan)
        plan.add_argument("--dot", action="store_true",
                          help="emit the Graphviz picture instead of the report (-o FILE.svg|png|pdf renders it "
                               "through Graphviz' dot; any other FILE gets the DOT text)")
        _picture_options(plan, "")
        plan.add_argument("--no-budgets", action="store_true",
                          help="report budget overruns (PG121) as warnings instead of failing: a what-if")
        plan.add_argument("-o", "--output", metavar="FILE", help="write the report/picture to FILE (atomically)")


def _output_commands(sub: Any, want: Callable[[str], bool]) -> None:
    """`build`, `sim`, `export`, `import`: the commands that write a target's output or read one."""
    build = sub.add_parser("build", help="check a spec and write the output of a target (device orchestration, picture)")
    if want("build"):
        from pgraph.backends.target import EMITTERS

        _common(build)
        build.add_argument("--target", required=True, choices=sorted(EMITTERS),
                           help="; ".join(f"{name}: {desc}" for name, (_, desc) in sorted(EMITTERS.items())))
        build.add_argument("-o", "--output", required=True, metavar="OUTDIR",
                           help="output directory (written only when the plan has no errors)")
        _picture_options(build, "--target dot: ")
        _a2a3_options(build)
    sim = sub.add_parser("sim", help="simulate the simpler scheduler on a2a3: makespan, critical path, waits, "
                                     "a swimlane trace, comparisons, stalls")
    if want("sim"):
        _spec(sim)
        from pgraph.commands.sim_options import add_arguments as add_sim_arguments

        add_sim_arguments(sim)
    export = sub.add_parser("export", help="write the planned instance graph as simpler's deps.json")
    if want("export"):
        _common(export)
        export.add_argument("--deps-json", required=True, metavar="OUT", help="the deps.json to write (atomically)")
    imp = sub.add_parser("import", help="read a deps.json (a capture or an export): summary, or the normalised view")
    if want("import"):
        imp.add_argument("deps_json", metavar="DEPS_JSON", help="the deps.json file")
        imp.add_argument("--tasks", action="store_true", help="also list every task in submit order with its producers")
        imp.add_argument("--format", choices=("text", "json"), default="text",
                         help="text: the summary; json: the normalised deps.json (ids as strings, records merged)")
        imp.add_argument("-o", "--output", metavar="FILE", help="write to FILE (atomically)")


def _query_commands(sub: Any, want: Callable[[str], bool]) -> None:
    """`deps`, `why`, `stats`: the queries on a planned spec (pgraph.commands.query)."""
    deps = sub.add_parser("deps", help="producers and consumers of tasks: provenance and tensor regions of each edge")
    if want("deps"):
        from pgraph.commands.query import add_spec_arguments

        add_spec_arguments(deps)
        deps.add_argument("task", nargs="+", help="task names as the report spells them (out_proj.direct, "
                                                  "gate_proj[n=3,k=1]@L=2)")
    why = sub.add_parser("why", help="the shortest ordering path from task A to task B, or 'unordered' and "
                                     "the regions they share")
    if want("why"):
        from pgraph.commands.query import add_spec_arguments

        add_spec_arguments(why)
        why.add_argument("a", help="a task name (as in `deps`)")
        why.add_argument("b", help="a task name (as in `deps`)")
    stats = sub.add_parser("stats", help="the plan's headline figures (the names `budget` statements use)")
    if want("stats"):
        from pgraph.commands.query import add_spec_arguments

        add_spec_arguments(stats)


def _options(args: argparse.Namespace, full: bool | None = None, what_if: str | None = None) -> Options:
    """The compile options of a command's arguments; `what_if` (None: the run is a gate of the
    spec's budgets) says why the command does not enforce them (pgraph.plan.budgets)."""
    return Options(defines=tuple(parse_define(d) for d in args.defines), config=args.config, layers=args.layers,
                   full=getattr(args, "full", False) if full is None else full,
                   allow_include_outside=bool(getattr(args, "allow_include_outside", False)),
                   allow=parse_allow(getattr(args, "allow", ())), what_if=what_if,
                   compat=tuple(getattr(args, "compat", ())))


def what_if(command: str) -> str:
    """The reason a what-if command gives for not enforcing budgets (the PG121 warning says it)."""
    return f"`pgraph {command}` is a what-if"


def _emit_diagnostics(bag: DiagnosticBag, notes: bool = False, label: str | None = None) -> None:
    """Print diagnostics to stderr as text: errors and warnings in full; notes counted by code, and
    the diagnostics allows waived counted, unless `notes` (`--notes`) shows them in full. A
    `label` line names the spec first (a comparison prints two sides)."""
    diags = bag.sorted()
    shown = diags if notes else [d for d in diags if d.level is not Severity.NOTE]
    text = render_all_text(shown)
    text += render_note_summary([d for d in diags if d.level is Severity.NOTE] if not notes else [])
    text += render_allowed(bag.allowed, full=notes)
    if text:
        print((f"{label}:\n" if label else "") + text, file=sys.stderr, end="")


def cmd_check(args: argparse.Namespace) -> int:
    """`pgraph check`: diagnostics only, or a stage's dump with `--emit`."""
    if args.emit:
        return cmd_emit(args)
    opts = _options(args)
    plan, bag = plan_program(args.spec, opts)
    if plan is None and bag.has_errors:  # an include-only file is checked in its includers' context
        from pgraph.commands import context

        in_context = context.check_include_only(args.spec, opts)
        if in_context is not None:
            return _report_in_context(args, in_context)
    if args.format == "json":
        print(render_json(bag.sorted()))
    else:
        _emit_diagnostics(bag, notes=args.notes)
        if not bag.has_errors:
            print(f"{args.spec}: ok")
    return EXIT_ERRORS if bag.has_errors else EXIT_OK


def _report_in_context(args: argparse.Namespace, result: context.ContextCheck) -> int:
    """`pgraph check` of an include-only file: its diagnostics in the context of its includers
    (pgraph.commands.context); the contexts are named on stderr before the diagnostics."""
    shown = DiagnosticBag()
    shown.items = list(result.diagnostics)
    if args.format == "json":
        print(render_json(shown.sorted()))
        return EXIT_ERRORS if result.has_errors else EXIT_OK
    more = f" and {result.skipped} more" if result.skipped else ""
    print(f"{args.spec}: no entry here or in its includes: checked in the context of the "
          f"{len(result.contexts) + result.skipped} file(s) of the project that include it "
          f"({', '.join(result.contexts)}{more})", file=sys.stderr)
    _emit_diagnostics(shown, notes=args.notes)
    for name, n in result.outside.items():
        stop = (f" stopped its check before planning, so {args.spec} was not fully checked in it"
                if name in result.incomplete else "")
        print(f"{name}: {n} error(s) outside {args.spec}{stop} (`pgraph check {name}` shows them)", file=sys.stderr)
    if not result.has_errors:
        print(f"{args.spec}: ok (in the context of {', '.join(result.contexts)}{more})")
    return EXIT_ERRORS if result.has_errors else EXIT_OK


def cmd_emit(args: argparse.Namespace) -> int:
    """`pgraph check --emit STAGE`: the stable text dump of the stage (diagnostics on stderr)."""
    from pgraph import dump

    bag = DiagnosticBag()
    stopped = run_until(args.spec, _options(args), bag, args.emit)
    _emit_diagnostics(bag, notes=args.notes)
    if bag.has_errors:
        return EXIT_ERRORS
    sys.stdout.write(dump.render(stopped, args.emit))
    return EXIT_OK


#: File suffixes of pictures: `plan --dot -o` renders .svg, .png and .pdf through Graphviz, and
#: refuses to fill the others with DOT text
IMAGE_SUFFIXES = frozenset({".svg", ".png", ".pdf", ".jpg", ".jpeg", ".gif", ".ps", ".eps"})


def _dot_target(args: argparse.Namespace) -> Emitter:
    """The registered dot emitter with the view of `--focus`, `--depth`, `--collapse`."""
    from pgraph.backends.dot import DotTarget, DotView, parse_collapse
    from pgraph.backends.target import emitter
    from pgraph.kinds import InternalError

    base = emitter("dot")
    if not isinstance(base, DotTarget):
        raise InternalError(f"the registered dot emitter is a {type(base).__name__}, not a DotTarget")
    if args.depth is not None and args.focus is None:
        raise UsageError("--depth counts edges away from --focus TASK: give --focus too")
    if args.depth is not None and args.depth < 0:
        raise UsageError(f"--depth must be 0 or more, got {args.depth}")
    try:
        collapse = parse_collapse(args.collapse) if args.collapse is not None else ()
    except ValueError as err:
        raise UsageError(f"--collapse: {err}") from None
    view = DotView(focus=args.focus, depth=1 if args.depth is None else args.depth, collapse=collapse)
    return attrs.evolve(base, view=view)


def _a2a3_target(args: argparse.Namespace) -> Emitter:
    """The registered a2a3 emitter with `--layout` and the `--target-config` files (checked now,
    before planning: a bad file is a usage error)."""
    from pgraph.backends.a2a3 import A2A3Target
    from pgraph.backends.a2a3.config import load_config
    from pgraph.backends.target import TargetRefused, emitter
    from pgraph.kinds import InternalError

    base = emitter("a2a3")
    if not isinstance(base, A2A3Target):
        raise InternalError(f"the registered a2a3 emitter is a {type(base).__name__}, not an A2A3Target")
    try:
        load_config(args.target_config, args.layout)
    except TargetRefused as err:
        raise UsageError(str(err)) from None
    return attrs.evolve(base, layout=args.layout, config_files=tuple(args.target_config))


def _picture_given(args: argparse.Namespace) -> bool:
    return any(getattr(args, name, None) is not None for name in ("focus", "depth", "collapse"))


def cmd_plan(args: argparse.Namespace) -> int:
    """`pgraph plan`: diagnostics plus the report (text/JSON) or the Graphviz picture."""
    from pgraph.backends.report import render_json as report_json_text
    from pgraph.backends.report import render_text

    if _picture_given(args) and not args.dot:
        raise UsageError("--focus, --depth and --collapse shape the Graphviz picture: add --dot")
    image = None  # the picture format `-o` asks for
    if args.dot and args.output and Path(args.output).suffix.lower() in IMAGE_SUFFIXES:
        from pgraph.backends.dot import IMAGE_FORMATS

        suffix = Path(args.output).suffix.lower()
        if suffix[1:] not in IMAGE_FORMATS:
            stem = Path(args.output).with_suffix(".dot")
            raise UsageError(f"--dot renders .svg, .png and .pdf pictures, not {suffix}: write the DOT text to {stem} "
                             f"and render it (`dot -T{suffix[1:]} {stem} -o {args.output}`)")
        image = suffix[1:]

    opts = _options(args, what_if="`--no-budgets` was given" if args.no_budgets else None)
    dot = None
    if args.dot:  # the dot emitter's picture instead of the report
        dot = _dot_target(args)
        opts = _for_target(opts, dot)
    plan, bag = plan_program(args.spec, opts)
    if plan is None or bag.has_errors:
        if args.format == "json":
            import json

            print(json.dumps({"diagnostics": [diagnostic_json(d) for d in bag.sorted()]}, indent=2, sort_keys=True))
        else:
            _emit_diagnostics(bag, notes=args.notes)
        return EXIT_ERRORS
    data: str | bytes
    if dot is not None:
        from pgraph.backends.target import BuildInfo, TargetRefused

        try:
            (text,) = dot.emit(plan, BuildInfo(str(args.spec), overrides_text(opts))).values()
        except TargetRefused as err:
            raise UsageError(str(err)) from None
        data = text if image is None else _render(text, image, args.output)
    elif args.format == "json":
        text = data = report_json_text(plan, args.spec)
    else:
        _emit_diagnostics(bag, notes=args.notes)
        text = data = render_text(plan, args.spec, notes=args.notes)
    if args.output:
        from pgraph.backends.output import write_atomic

        _write_or_usage_error(lambda: write_atomic(Path(args.output), data), args.output)
    else:
        sys.stdout.write(text)
    return EXIT_OK


def _render(text: str, fmt: str, output: str) -> bytes:
    """The picture of DOT `text` for `-o output` (pgraph.backends.dot.render_image); UsageError
    when Graphviz is missing or fails."""
    from pgraph.backends.dot import RenderError, render_image

    try:
        return render_image(text, fmt)
    except RenderError as err:
        stem = Path(output).with_suffix(".dot")
        raise UsageError(f"cannot render {output}: {err}; write the DOT text instead (-o {stem})") from None


def cmd_run(args: argparse.Namespace) -> int:
    """`pgraph run`: execute every layer with the numpy runner, compare with the dense reference."""
    from pgraph.backends.numpy.runner import RunOptions
    from pgraph.backends.target import TargetRefused, runner

    if args.trials < 1:
        raise UsageError("--trials must be at least 1")
    if args.seed < 0:
        raise UsageError(f"--seed must be a non-negative integer, got {args.seed}")
    if args.max_memory <= 0:
        raise UsageError(f"--max-memory must be positive, got {args.max_memory}")
    numpy = runner("numpy")
    plan, bag = plan_program(args.spec, _for_target(_options(args, what_if=what_if("run")), numpy))
    _emit_diagnostics(bag, notes=args.notes)
    if plan is None or bag.has_errors:   # the executor runs only graphs `check` accepts
        return EXIT_ERRORS
    run_opts = RunOptions(seed=args.seed, batch=args.batch, fixture=args.inputs, weights=args.weights,
                          max_memory=int(args.max_memory * (1 << 30)), order=args.order, trials=args.trials,
                          floor=args.floor, spec=args.spec, config=args.config)
    try:
        result = numpy.run(plan, run_opts)
    except TargetRefused as err:
        raise UsageError(str(err)) from None
    return int(result.exit_code)


def overrides_text(opts: Options) -> str:
    """The overrides of a build as the header of its files shows them."""
    parts = []
    if opts.config is not None:
        parts.append(f"--config {Path(opts.config).name}")
    parts.extend(f"-D {name}={value}" for name, value in opts.defines)
    if opts.layers is not None:
        parts.append(f"--layers {opts.layers}")
    return " ".join(parts)


def _for_target(opts: Options, target: Target) -> Options:
    """`opts` as `target` needs them: a full expansion when it says `needs_full`."""
    from pgraph.backends.target import plan_full

    full = plan_full(target, opts.full)
    return opts if full == opts.full else attrs.evolve(opts, full=full)


def cmd_build(args: argparse.Namespace) -> int:
    """`pgraph build --target T -o OUTDIR`: diagnostics, then the emitter's files (none on errors)."""
    from pgraph.backends.output import write_tree
    from pgraph.backends.target import BuildInfo, TargetRefused, emitter

    out = emitter(args.target)
    if _picture_given(args):
        if args.target != "dot":
            raise UsageError(f"--focus, --depth and --collapse shape the Graphviz picture: options of --target dot, "
                             f"not of --target {args.target}")
        out = _dot_target(args)
    if args.layout is not None or args.target_config:
        if args.target != "a2a3":
            raise UsageError(f"--layout and --target-config configure the a2a3 output: options of --target a2a3, "
                             f"not of --target {args.target}")
        out = _a2a3_target(args)
    opts = _for_target(_options(args), out)
    plan, bag = plan_program(args.spec, opts)
    if args.format == "json":
        print(render_json(bag.sorted()))
    else:
        _emit_diagnostics(bag, notes=args.notes)
    if plan is None or bag.has_errors:
        return EXIT_ERRORS
    try:
        files = out.emit(plan, BuildInfo(str(args.spec), overrides_text(opts)))
    except TargetRefused as err:
        raise UsageError(str(err)) from None
    _write_or_usage_error(lambda: write_tree(files, args.output), args.output)
    if args.format == "text":
        for rel in sorted(files):
            print(f"wrote {Path(args.output) / rel}")
    return EXIT_OK


def cmd_sim(args: argparse.Namespace) -> int:
    """`pgraph sim`: the scheduler model (pgraph.backends.sim)."""
    from pgraph.backends.output import write_atomic
    from pgraph.commands.sim import run

    def write(path: Path, text: str) -> None:
        _write_or_usage_error(lambda: write_atomic(path, text), str(path))

    def emit(bag: DiagnosticBag, label: str | None = None) -> None:
        _emit_diagnostics(bag, notes=args.notes, label=label)

    gate = bool(getattr(args, "enforce_budgets", False))
    return run(args, _options(args, what_if=None if gate else what_if("sim")), emit, write)


def _atomic(path: Path, text: str) -> None:
    from pgraph.backends.output import write_atomic

    _write_or_usage_error(lambda: write_atomic(path, text), str(path))


def cmd_export(args: argparse.Namespace) -> int:
    """`pgraph export SPEC --deps-json OUT` (pgraph.commands.deps)."""
    from pgraph.commands.deps import run_export

    return run_export(args, _options(args, what_if=what_if("export")),
                      lambda bag: _emit_diagnostics(bag, notes=args.notes), _atomic)


def cmd_import(args: argparse.Namespace) -> int:
    """`pgraph import DEPS_JSON` (pgraph.commands.deps)."""
    from pgraph.commands.deps import run_import

    return run_import(args, _atomic)


def cmd_diff(args: argparse.Namespace) -> int:
    """`pgraph diff OLD NEW` (pgraph.commands.deps)."""
    from pgraph.commands.deps import run_diff

    return run_diff(args, _options(args, full=False, what_if=what_if("diff")),
                    lambda bag: _emit_diagnostics(bag, notes=args.notes), _atomic)


def cmd_explain(args: argparse.Namespace) -> int:
    """`pgraph explain CODE`: the rule's documentation."""
    from pgraph.explain import explain

    text = explain(args.code)
    if text is None:
        print(f"pgraph: error: unknown diagnostic code '{args.code}' (docs/rules.md lists every code)", file=sys.stderr)
        return EXIT_USAGE
    print(text)
    return EXIT_OK


def cmd_query(args: argparse.Namespace) -> int:
    """`pgraph deps`, `why`, `stats` (pgraph.commands.query)."""
    from pgraph.commands import query

    run = {"deps": query.run_deps, "why": query.run_why, "stats": query.run_stats}[args.command]
    return run(args, lambda bag: _emit_diagnostics(bag, notes=args.notes))


def cmd_fmt(args: argparse.Namespace) -> int:
    """`pgraph fmt`: canonical layout (pgraph.commands.fmt)."""
    from pgraph.backends.output import write_atomic
    from pgraph.commands.fmt import run

    def write(path: Path, text: str) -> None:
        _write_or_usage_error(lambda: write_atomic(path, text), str(path))

    return run(args, _emit_diagnostics, write)


def cmd_fix(args: argparse.Namespace) -> int:
    """`pgraph fix`: apply the machine fixes (pgraph.commands.fix)."""
    from pgraph.backends.output import write_atomic
    from pgraph.commands.fix import run

    def write(path: Path, text: str) -> None:
        _write_or_usage_error(lambda: write_atomic(path, text), str(path))

    try:
        args.codes = list(parse_allow(args.codes))
    except UsageError as err:
        raise UsageError(str(err).replace("--allow", "--code", 1)) from None
    return run(args, _options(args), lambda bag: _emit_diagnostics(bag, notes=args.notes), write)


def cmd_lsp(args: argparse.Namespace) -> int:
    """`pgraph lsp`: the language server (pgraph.commands.lsp) until the editor closes it."""
    from pgraph.commands.lsp import serve
    from pgraph.pipeline import keep_results

    keep_results(False)  # one process, many runs: what a run built must be collectable
    return serve(_options(args))


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "check": cmd_check, "plan": cmd_plan, "run": cmd_run, "build": cmd_build, "sim": cmd_sim, "explain": cmd_explain,
    "export": cmd_export, "import": cmd_import, "diff": cmd_diff,
    "deps": cmd_query, "why": cmd_query, "stats": cmd_query, "fmt": cmd_fmt, "fix": cmd_fix, "lsp": cmd_lsp,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `pgraph` console script (see the module docstring for exit codes)."""
    words = list(sys.argv[1:] if argv is None else argv)
    command = next((w for w in words if not w.startswith("-")), None)
    args = build_parser(command).parse_args(words)
    try:
        return COMMANDS[args.command](args)
    except UsageError as err:
        print(f"pgraph: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        return EXIT_OK
    except KeyboardInterrupt:
        interrupts.stop()  # a second Ctrl-C now ends the process at once, with the same code
        print("pgraph: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as err:  # noqa: BLE001 - the last line of defence: a bug, reported as one
        print(f"pgraph: internal error: {type(err).__name__}: {err}", file=sys.stderr)
        if os.environ.get("PGRAPH_TRACEBACK"):
            import traceback

            print("".join(traceback.format_exception(err)).rstrip(), file=sys.stderr)
        print("  note: this is a bug in pgraph, not in your spec; please report it with the spec and the command "
              "line (rerun with PGRAPH_TRACEBACK=1 to include the trace)", file=sys.stderr)
        return EXIT_INTERNAL


def run() -> None:
    """The console script `pgraph` and `python3 -m pgraph`: `main`, then exit at once.

    Outputs are complete when `main` returns (written atomically, streams flushed here), so the
    process ends without tearing down its objects one by one: after a --full plan of a
    351,050-task prefill that teardown alone takes seconds. For the same reason the cyclic
    collector never scans the pipeline's objects (`pipeline.keep_results`).
    """
    keep_results()
    try:
        with interrupts.raising():  # inside: KeyboardInterrupt (cleanups run); outside: exit 130 at once
            code = main()
    except KeyboardInterrupt:  # between the handlers of `main`
        print("pgraph: interrupted", file=sys.stderr)
        code = EXIT_INTERRUPTED
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (BrokenPipeError, ValueError):
        pass
    os._exit(code)


if __name__ == "__main__":
    run()
