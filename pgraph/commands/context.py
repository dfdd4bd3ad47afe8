"""`pgraph check` of an include-only file: the file checked in the context of its includers.

A file with no entry (none of its own, none in the files it includes) is a file of shared
declarations: `specs/decode_common.pgl` holds the orchestration arguments and kernels of the
decode specs and names the constants `specs/qwen3_14b.pgl` defines, so alone it would be one
PG002 (no entry) or a hundred (undefined names). When files of the project root include it
(pgraph.frontend.includers), each of them that declares an entry is planned in turn, with the
file's current text (an editor's unsaved buffer too: `Options.sources`), and the diagnostics
located in the file, or in the files it includes, are the file's: the same diagnostics, with
the same codes, spans, notes and hints, that `check` gives for the includer, each with the
include chain of its context among its notes; a diagnostic of the includer's text with a note
in the file (a call that does not match a kernel the file declares) is the file's too. A diagnostic met in several contexts is shown
once. What a context reports elsewhere (in the includer's own text) is counted, not shown; a
context whose own errors stop it before the planner ran is named, since the file was then not
fully checked in it. A file that no file includes gets the plain check (PG002 for no entry).
"""

from __future__ import annotations

from pathlib import Path

import attrs

from pgraph import records
from pgraph.diagnostics import Diagnostic, DiagnosticBag, Severity
from pgraph.frontend import ast
from pgraph.frontend.includers import find_includers
from pgraph.frontend.loader import Loaded, display_name, project_root, real_path
from pgraph.pipeline import Options, Stopped, run_until

__all__ = ["ContextCheck", "check_in_context", "check_include_only", "include_only"]

#: Most includers a file is checked in (each is a full plan: about a second for the decode specs).
MAX_CONTEXTS = 16


@records.shared_repr
@attrs.define(repr=False)
class ContextCheck:
    """The check of an include-only file in the context of its includers.

    `contexts` are the includers' display names (at most MAX_CONTEXTS; `skipped` counts the
    rest), `diagnostics` the file's own (sorted, each once), `outside` the errors each context
    reports outside the file, `incomplete` the contexts that stopped before the planner on them.
    """

    contexts: list[str]
    diagnostics: list[Diagnostic]
    outside: dict[str, int] = attrs.Factory(dict)
    incomplete: list[str] = attrs.Factory(list)
    skipped: int = 0
    #: the run of the first context that lowered (the Program and Plan an editor's hover reads)
    stopped: Stopped | None = None

    @property
    def has_errors(self) -> bool:
        """Errors in the file, or a context that could not check it."""
        return bool(self.incomplete) or any(d.level is Severity.ERROR for d in self.diagnostics)


def include_only(loaded: Loaded | None) -> bool:
    """Whether the loaded file and its includes declare no entry (a parse that failed: False)."""
    return loaded is not None and not any(isinstance(item, ast.Entry) for item in loaded.items)


def _files_of(loaded: Loaded) -> set[Path]:
    """The resolved paths of the file and of every file it includes."""
    out = {real_path(loaded.root.path)} if loaded.root.path is not None else set()
    out.update(real_path(i.span.file.path) for i in loaded.items if i.span.file.path is not None)
    return out


def _at(span: object, files: set[Path]) -> bool:
    path = getattr(getattr(span, "file", None), "path", None)
    return path is not None and real_path(path) in files


def _in(diag: Diagnostic, files: set[Path]) -> bool:
    """Whether `diag` is located in `files`, or one of its notes points there (a call in the
    includer that does not match a kernel the file declares)."""
    return _at(diag.span, files) or any(_at(n.span, files) for n in diag.notes)


def check_in_context(path: str | Path, opts: Options, loaded: Loaded) -> ContextCheck | None:
    """Check the include-only file `path` (its `loaded` files) in the context of each file of its
    project root that includes it; None when no file includes it."""
    sources = dict(opts.sources)
    includers = find_includers(Path(path), project_root(path), sources)
    if not includers:
        return None
    files = _files_of(loaded)
    result = ContextCheck([display_name(p) for p in includers[:MAX_CONTEXTS]], [],
                          skipped=max(len(includers) - MAX_CONTEXTS, 0))
    seen: set[tuple[object, ...]] = set()
    for includer, name in zip(includers, result.contexts):
        bag = DiagnosticBag()
        stopped = run_until(includer, opts, bag, "plan")
        if result.stopped is None and stopped.program is not None:
            result.stopped = stopped
        mine = [d for d in bag.sorted() if _in(d, files)]
        for d in mine:
            assert d.span is not None
            key = (d.code, d.message, d.span.filename, d.span.line, d.span.col)
            if key not in seen:
                seen.add(key)
                result.diagnostics.append(d)
        others = sum(1 for d in bag.items if d.level is Severity.ERROR and not _in(d, files))
        if others:
            result.outside[name] = others
            if stopped.plan is None and not any(d.level is Severity.ERROR for d in mine):
                result.incomplete.append(name)
    result.diagnostics.sort(key=Diagnostic.sort_key)
    return result


def check_include_only(path: str | Path, opts: Options) -> ContextCheck | None:
    """For a spec whose plain check failed: its check in the context of its includers when it is
    an include-only file that files of the project include, else None (the plain check stands)."""
    stopped = run_until(path, opts, DiagnosticBag(), "ast")
    if not include_only(stopped.loaded):
        return None
    assert stopped.loaded is not None
    return check_in_context(path, opts, stopped.loaded)
