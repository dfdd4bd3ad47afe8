"""`pgraph fix FILE [--code CODE] [--dry-run]`: apply the machine fixes of a spec's diagnostics.

A diagnostic whose hint is mechanical carries the edits that carry it out (`Diagnostic.fix`, the
`"fix"` of `--format json`). This command plans the spec, takes the fixes of its errors and
warnings (with `--code`, of every diagnostic of those codes, notes included), merges them into
one set of edits (`pgraph.diagnostics.merge_fixes`: an edit made by several fixes is made once,
insertions at one position are joined, a fix that overlaps another is left for a later run),
plans the edited text again in memory, and writes the edited files, each atomically
(`pgraph.backends.output.write_atomic`), keeping a file's byte-order mark and CRLF line ends.
`--dry-run` prints the change as a unified diff on stdout and writes nothing.

Exit codes: 0 the spec as edited (or as it is, when nothing has a fix) has no error; 1 errors
remain (printed: they have no machine fix, or the edits revealed them); 2 usage error (a file
that cannot be read or written, an unknown code).
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import attrs

from pgraph import records
from pgraph.diagnostics import Diagnostic, DiagnosticBag, Edit, Fix, Severity, apply_edits, merge_fixes
from pgraph.pipeline import Options, plan_program

__all__ = ["FixResult", "apply_fixes", "fixable", "run"]


def fixable(diags: Iterable[Diagnostic], codes: Sequence[str] = ()) -> list[Diagnostic]:
    """The diagnostics whose fix `pgraph fix` applies: with `codes`, every one of those codes that
    has a fix; without, the errors and warnings that have one (a note's fix is a tidy-up the
    planner does not ask for: `--code` names it)."""
    return [d for d in diags if d.fix is not None and d.span is not None
            and (d.code in codes if codes else d.level is not Severity.NOTE)]


@records.shared_repr
@attrs.frozen(repr=False, eq=False)
class FixResult:
    """What `apply_fixes` makes of a list of diagnostics: the new text of every file an applied
    fix edits (resolved path -> text as the reader holds it: no BOM, `\\n` line ends), the
    text each was read as (`originals`), the diagnostics whose fix went in, and those whose fix overlapped an earlier one and was left out."""

    texts: dict[Path, str]
    originals: dict[Path, str]
    applied: list[Diagnostic]
    skipped: list[Diagnostic]


def apply_fixes(diags: Sequence[Diagnostic]) -> FixResult:
    """Merge the fixes of `diags` (each has one, and a span in a file on disk) and apply them to
    the text each diagnostic was read from."""
    fixes: list[Fix] = [d.fix for d in diags if d.fix is not None]
    edits, skipped_at = merge_fixes(fixes)
    by_file: dict[Path, list[Edit]] = {}
    originals: dict[Path, str] = {}
    for e in edits:
        path = e.span.file.path
        if path is None:  # a span on the command line: nothing to edit
            continue
        key = path.resolve()
        by_file.setdefault(key, []).append(e)
        originals[key] = e.span.file.text
    texts = {path: apply_edits(originals[path], es) for path, es in sorted(by_file.items())}
    left = set(skipped_at)
    with_fix = [d for d in diags if d.fix is not None]
    return FixResult(texts, {p: originals[p] for p in texts}, [d for i, d in enumerate(with_fix) if i not in left],
                     [d for i, d in enumerate(with_fix) if i in left])


def _on_disk(path: Path, text: str) -> str:
    """`text` (as the reader holds it) in the form of the file at `path`: its byte-order mark and
    CRLF line ends kept."""
    try:
        raw = path.read_bytes()
    except OSError:
        return text
    if b"\r\n" in raw:
        text = text.replace("\n", "\r\n")
    return ("\ufeff" + text) if raw.startswith(b"\xef\xbb\xbf") else text


def _display(path: Path) -> str:
    """`path` relative to the working folder when it lies below it."""
    try:
        return str(path.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _counts(diags: Iterable[Diagnostic]) -> str:
    c = Counter(d.code for d in diags)
    return ", ".join(f"{code}{f' x{n}' if n > 1 else ''}" for code, n in sorted(c.items()))


def run(args: argparse.Namespace, opts: Options, emit: Callable[[DiagnosticBag], None],
        write: Callable[[Path, str], None]) -> int:
    """Fix the spec of `args` (`args.codes`, `args.dry_run`); see the module docstring."""
    _, bag = plan_program(args.spec, opts)
    chosen = fixable(bag.sorted(), tuple(args.codes))
    if not chosen:
        emit(bag)
        what = f" of {', '.join(args.codes)}" if args.codes else ""
        print(f"{args.spec}: nothing to fix (no diagnostic{what} has a machine fix)", file=sys.stderr)
        return 1 if bag.has_errors else 0
    result = apply_fixes(chosen)
    sources = tuple((*((p, t) for p, t in opts.sources if p not in result.texts), *result.texts.items()))
    _, after = plan_program(args.spec, attrs.evolve(opts, sources=sources))
    if args.dry_run:
        for path, text in result.texts.items():
            name = _display(path)
            sys.stdout.writelines(difflib.unified_diff(result.originals[path].splitlines(keepends=True), text.splitlines(keepends=True),
                                                       f"a/{name}", f"b/{name}"))
    else:
        for path, text in result.texts.items():
            write(path, _on_disk(path, text))
    verb = "would fix" if args.dry_run else "fixed"
    files = ", ".join(_display(p) for p in result.texts)
    print(f"{args.spec}: {verb} {len(result.applied)} diagnostic(s) ({_counts(result.applied)}) in {files}",
          file=sys.stderr)
    if result.skipped:
        print(f"{args.spec}: left {len(result.skipped)} fix(es) ({_counts(result.skipped)}) for another run: "
              "they overlap an edit made above", file=sys.stderr)
    if any(d.level is not Severity.NOTE for d in after.items):
        print("after the fixes:" if not args.dry_run else "after these fixes:", file=sys.stderr)
        emit(after)
    else:
        print(f"{args.spec}: ok after the fixes", file=sys.stderr)
    return 1 if after.has_errors else 0
