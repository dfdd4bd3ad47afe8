"""Command line: argument parsing only; every subcommand calls the driver.

Exit codes: 0 ok, 1 diagnostics with errors, 2 usage error.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from pgraph import __version__
from pgraph.diagnostics import DiagnosticBag, Severity, diagnostic_json, render_all_text, render_json
from pgraph.driver import Options, UsageError, parse_define, plan_program


def write_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` through a temporary file and a rename (no half-written file).

    A symlink is followed (its target is replaced); a device or FIFO (`-o /dev/null`) is written
    in place, never replaced by a rename. OSError propagates (the CLI turns it into exit 2).
    """
    if path.is_symlink():
        path = path.resolve()  # update the file the link names; keep the link
    if path.is_dir():
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
    if path.exists() and not path.is_file():  # /dev/null, a FIFO: a rename would replace the node itself
        with path.open("w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; a normal output file follows the umask
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _write_or_usage_error(write: Callable[[], None], where: str) -> None:
    """Run `write`; an OSError (read-only place, a file where a folder should be) is UsageError."""
    try:
        write()
    except OSError as err:
        raise UsageError(f"cannot write {where}: {err.strerror or err}") from None


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("spec", help="the .pgl file")
    p.add_argument("-D", dest="defines", action="append", default=[], metavar="NAME=VALUE",
                   help="override a constant before folding (repeatable)")
    p.add_argument("--config", metavar="NAME|FILE.pgl",
                   help="constant overrides from a .pgl file of `const` lines (a bare name is <spec dir>/configs/NAME.pgl)")
    p.add_argument("--layers", type=int, metavar="N", help="same as -D NUM_LAYERS=N")
    p.add_argument("--full", action="store_true",
                   help="expand every loop iteration instead of the two-iteration window (slower; for checking)")
    p.add_argument("--format", choices=("text", "json"), default="text", help="report format")
    p.add_argument("--notes", action="store_true",
                   help="also print notes (`plan` always does; `check` and `build` count them)")


def build_parser() -> argparse.ArgumentParser:
    """The argparse tree of `pgraph`."""
    ap = argparse.ArgumentParser(prog="pgraph", description="Plan and check .pgl task graphs.")
    ap.add_argument("--version", action="version", version=f"pgraph {__version__}")
    sub = ap.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check", help="parse, lower and check a spec; print diagnostics only")
    _common(check)
    plan = sub.add_parser("plan", help="check a spec and print its cost report (or a Graphviz picture)")
    _common(plan)
    plan.add_argument("--dot", action="store_true", help="emit the Graphviz picture instead of the report")
    plan.add_argument("-o", "--output", metavar="FILE", help="write the report/picture to FILE (atomically)")
    run = sub.add_parser("run", help="execute the spec's task graph with NumPy kernels and check it "
                                     "against the dense reference")
    run.add_argument("spec", help="the .pgl file")
    run.add_argument("-D", dest="defines", action="append", default=[], metavar="NAME=VALUE",
                     help="override a constant before folding (repeatable)")
    run.add_argument("--config", metavar="small|full|FILE.pgl", help="constant overrides (see `plan --config`)")
    run.add_argument("--layers", type=int, metavar="N", help="same as -D NUM_LAYERS=N")
    run.add_argument("--batch", type=int, metavar="B", help="live rows, 1..BATCH_PAD (default BATCH_PAD)")
    run.add_argument("--seed", type=int, default=1234, metavar="S", help="input seed; random orders use S + trial - 1 (default %(default)s)")
    run.add_argument("--order", choices=("topo", "random", "adversarial"), default="topo",
                     help="execution order (default %(default)s)")
    run.add_argument("--trials", type=int, default=1, metavar="K", help="number of executions (default %(default)s)")
    run.add_argument("--inputs", choices=("current", "tier"), default="current",
                     help="input fixture: 'current' = pypto-lib's random_inputs (reference §5), 'tier' = the "
                          "distributions of the tier harness (docs/backend_numpy.md) (default %(default)s)")
    run.add_argument("--weights", choices=("auto", "replicated", "distinct"), default="auto",
                     help="per-layer tensors: layer 0's for every layer, or distinct per layer (drawn on demand "
                          "from the seed and the layer); auto = distinct up to 2 GiB of them (default %(default)s)")
    run.add_argument("--floor", action="store_true",
                     help="also measure the reference against itself with f64 projections (the best pass "
                          "rate any other summation order can expect; one more reference run)")
    build = sub.add_parser("build", help="check a spec and write the device orchestration for a target runtime")
    _common(build)
    build.add_argument("--target", required=True, choices=("a2a3",),
                       help="a2a3: orchestration C++ and kernel_config.py for simpler's tensormap_and_ringbuffer")
    build.add_argument("-o", "--output", required=True, metavar="OUTDIR",
                       help="output directory (written only when the plan has no errors)")
    explain = sub.add_parser("explain", help="print the documentation of a diagnostic code")
    explain.add_argument("code", help="e.g. PG013 or dependency-cycle")
    return ap


def _options(args: argparse.Namespace) -> Options:
    return Options(defines=tuple(parse_define(d) for d in args.defines), config=args.config, layers=args.layers,
                   full=getattr(args, "full", False))


def _emit_diagnostics(bag: DiagnosticBag, notes: bool = True) -> None:
    """Print diagnostics to stderr as text; with `notes=False` notes are counted, not shown."""
    diags = bag.sorted()
    shown = diags if notes else [d for d in diags if d.level is not Severity.NOTE]
    text = render_all_text(shown)
    hidden = len(diags) - len(shown)
    if hidden:
        text += f"{hidden} note(s) not shown (pass --notes, or see `pgraph plan`)\n"
    if text:
        print(text, file=sys.stderr, end="")


def cmd_check(args: argparse.Namespace) -> int:
    """`pgraph check`: diagnostics only."""
    plan, bag = plan_program(args.spec, _options(args))
    if args.format == "json":
        print(render_json(bag.sorted()))
    else:
        _emit_diagnostics(bag, notes=args.notes)
        if not bag.has_errors:
            print(f"{args.spec}: ok")
    return 1 if bag.has_errors else 0


def cmd_plan(args: argparse.Namespace) -> int:
    """`pgraph plan`: diagnostics plus the report (text/JSON) or the Graphviz picture."""
    from pgraph.report import render_json as report_json_text
    from pgraph.report import render_text

    plan, bag = plan_program(args.spec, _options(args))
    if plan is None or bag.has_errors:
        if args.format == "json":
            print(json.dumps({"diagnostics": [diagnostic_json(d) for d in bag.sorted()]}, indent=2, sort_keys=True))
        else:
            _emit_diagnostics(bag)
        return 1
    if args.dot:
        from pgraph.backends.dot import render_dot

        text = render_dot(plan)
    elif args.format == "json":
        text = report_json_text(plan, args.spec)
    else:
        _emit_diagnostics(bag)
        text = render_text(plan, args.spec)
    if args.output:
        _write_or_usage_error(lambda: write_atomic(Path(args.output), text), args.output)
    else:
        sys.stdout.write(text)
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    """`pgraph run`: execute every layer with the NumPy backend, compare with the dense reference."""
    from pgraph.backends.numpy.runner import Session, describe, run_trials

    if args.trials < 1:
        raise UsageError("--trials must be at least 1")
    if args.seed < 0:
        raise UsageError(f"--seed must be a non-negative integer, got {args.seed}")
    try:
        session, bag = Session.create(args.spec, _options(args), seed=args.seed, batch=args.batch,
                                      fixture=args.inputs, weights=args.weights)
    except ValueError as err:
        raise UsageError(str(err)) from None
    if session is None:
        _emit_diagnostics(bag)
        return 1
    print(describe(session, args.spec, args.config, args.seed))
    return run_trials(session, args.order, args.trials, args.seed, floor=args.floor)


def cmd_build(args: argparse.Namespace) -> int:
    """`pgraph build --target a2a3 -o OUTDIR`: diagnostics, then the backend's files (none on errors)."""
    from pgraph.backends.a2a3 import BackendError, build, write_build

    opts = _options(args)
    plan, bag = plan_program(args.spec, opts)
    if args.format == "json":
        print(render_json(bag.sorted()))
    else:
        _emit_diagnostics(bag, notes=args.notes)
    if plan is None or bag.has_errors:
        return 1
    try:
        files = build(plan, args.spec, opts)
    except BackendError as err:
        print(f"pgraph: error: {err}", file=sys.stderr)
        return 1
    _write_or_usage_error(lambda: write_build(files, args.output), args.output)
    if args.format == "text":
        for rel in sorted(files):
            print(f"wrote {Path(args.output) / rel}")
    return 0


def cmd_explain(args: argparse.Namespace) -> int:
    """`pgraph explain CODE`: the rule's documentation."""
    from pgraph.explain import explain

    text = explain(args.code)
    if text is None:
        print(f"pgraph: unknown diagnostic code '{args.code}'", file=sys.stderr)
        return 2
    print(text)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `pgraph` console script."""
    args = build_parser().parse_args(argv)
    try:
        if args.command == "check":
            return cmd_check(args)
        if args.command == "run":
            return cmd_run(args)
        if args.command == "plan":
            return cmd_plan(args)
        if args.command == "build":
            return cmd_build(args)
        return cmd_explain(args)
    except UsageError as err:
        print(f"pgraph: error: {err}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
