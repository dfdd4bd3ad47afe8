"""`pgraph lsp`: a Language Server Protocol server over stdio (pygls; `pip install pgraph[lsp]`).

An editor starts `pgraph lsp` (or `python3 -m pgraph lsp`) and speaks JSON-RPC on its stdin and
stdout. The server
- publishes the diagnostics `pgraph check` gives when a document is opened, changed (after a
  pause of DEBOUNCE seconds in typing) or saved, for every open document (an edit of an
  included file changes its includers' diagnostics): code (`PG013`), severity (error, warning,
  note as information), range, the notes with a place as related information, the notes
  without one and the hint in the message; an include-only file is checked in the context of
  the files that include it (pgraph.commands.context), with the editor's unsaved text;
- answers hover (a task's task count, blocks and the regions it reads and writes; a tensor's
  shape, dtype and storage; a constant's folded value; a kernel's signature) and
  go-to-definition (constants, tensors, views, scalars, tasks, fragments, kernels and kernel
  tables, lets and axes; an `include` line opens the file), from pgraph.commands.editor.

It never stops on bad input: an exception while checking a document is logged to the client
(window/logMessage, with the trace) and published as a diagnostic at line 1 of the document
(an unreadable --config or a file that is not UTF-8 the same way, as the usage error it is),
and a failing hover or definition answers nothing. It imports what `check` imports and the
protocol library, no backend. The -D, --config, --layers and --allow-include-outside options
given to `pgraph lsp` apply to every check.
"""

from __future__ import annotations

import asyncio
import contextlib
import traceback
from pathlib import Path
from typing import Any

import attrs

from pgraph import __version__
from pgraph.commands import editor
from pgraph.diagnostics import Severity
from pgraph.frontend.loader import UsageError, real_path
from pgraph.pipeline import Options
from pgraph.source import MAX_SOURCE_BYTES, read_input

__all__ = ["DEBOUNCE", "make_server", "serve"]

#: Seconds without a change before a changed document is checked again.
DEBOUNCE = 0.3


def _import_protocol() -> tuple[Any, Any, Any]:
    """pygls and lsprotocol, or a UsageError that says how to install them."""
    try:
        from lsprotocol import types
        from pygls import uris
        from pygls.lsp.server import LanguageServer
    except ImportError as err:
        raise UsageError(f"`pgraph lsp` needs pygls (pip install 'pgraph[lsp]'): {err}") from None
    return types, uris, LanguageServer


class _Session:
    """The server's state and the work behind each feature: the analyses of the open documents,
    the version each was made of, the latest version a change announced."""

    def __init__(self, server: Any, types: Any, uris: Any, opts: Options) -> None:
        self.server, self.types, self.uris, self.opts = server, types, uris, opts
        self.analyses: dict[str, editor.Analysis] = {}
        self.checked: dict[str, int | None] = {}   # the document version each analysis was made of
        self.versions: dict[str, int] = {}         # the latest version a change announced

    def log(self, kind: Any, message: str) -> None:
        with contextlib.suppress(Exception):  # a log that cannot be sent is not worth a crash
            self.server.window_log_message(self.types.LogMessageParams(type=kind, message=message))

    def path_of(self, uri: str) -> Path | None:
        path = self.uris.to_fs_path(uri)
        return Path(path) if path else None

    def lines_of(self, path: Path) -> list[str]:
        workspace = self.server.workspace
        for uri in list(workspace.text_documents):
            p = self.path_of(uri)
            if p is not None and real_path(p) == real_path(path):
                return workspace.get_text_document(uri).source.split("\n")
        try:
            return read_input(path, MAX_SOURCE_BYTES).decode("utf-8", errors="replace").split("\n")
        except OSError:
            return []

    def to_range(self, lines: list[str], line: int, col: int, end_line: int, end_col: int) -> Any:
        types = self.types
        codec = self.server.workspace.position_codec
        start = types.Position(line=max(line - 1, 0), character=max(col - 1, 0))
        end = types.Position(line=max(end_line - 1, 0), character=max(end_col - 1, 0))
        if (end.line, end.character) < (start.line, start.character):
            end = start
        return codec.range_to_client_units(lines, types.Range(start=start, end=end))

    def sources(self) -> tuple[tuple[Path, str], ...]:
        out = []
        for uri in list(self.server.workspace.text_documents):
            p = self.path_of(uri)
            if p is not None:
                out.append((real_path(p), self.server.workspace.get_text_document(uri).source))
        return tuple(out)

    def check(self, uri: str) -> None:
        """Analyse one open document and publish its diagnostics (never raises)."""
        types = self.types
        doc = self.server.workspace.get_text_document(uri)
        lines = doc.source.split("\n")
        path = self.path_of(uri)
        if path is None:
            return
        self.checked[uri] = doc.version
        try:
            analysis = editor.analyze(path, attrs.evolve(self.opts, sources=self.sources()))
            self.analyses[uri] = analysis
            diags = [self.diagnostic(d, lines) for d in analysis.diagnostics]
        except UsageError as err:
            diags = [_message_at_line_1(types, f"pgraph: {err}", types.DiagnosticSeverity.Error)]
        except Exception as err:  # noqa: BLE001 - an internal error must not stop the server
            self.log(types.MessageType.Error, f"pgraph internal error while checking {uri}:\n{traceback.format_exc()}")
            diags = [_message_at_line_1(types, f"pgraph internal error: {type(err).__name__}: {err} (a bug in "
                                               "pgraph, not in the spec: the server's log has the trace)",
                                        types.DiagnosticSeverity.Error)]
        self.server.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, diagnostics=diags, version=doc.version))

    def diagnostic(self, d: editor.EditorDiagnostic, lines: list[str]) -> Any:
        types = self.types
        related = []
        for r in d.related:
            related.append(types.DiagnosticRelatedInformation(
                location=types.Location(uri=self.uris.from_fs_path(str(real_path(r.path))),
                                        range=self.to_range(self.lines_of(r.path), r.line, r.col, r.end_line,
                                                            r.end_col)),
                message=r.message))
        return types.Diagnostic(range=self.to_range(lines, d.line, d.col, d.end_line, d.end_col),
                                message=d.message, severity=_SEVERITY(types)[d.severity], code=d.code,
                                source="pgraph", related_information=related or None)

    def check_all(self) -> None:
        for uri in list(self.server.workspace.text_documents):
            self.check(uri)

    def close(self, uri: str) -> None:
        self.analyses.pop(uri, None)
        self.checked.pop(uri, None)
        self.server.text_document_publish_diagnostics(self.types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))
        self.check_all()

    def current(self, uri: str) -> editor.Analysis | None:
        """The analysis of the document's present text (checked again when it changed since)."""
        doc = self.server.workspace.get_text_document(uri)
        if uri not in self.analyses or self.checked.get(uri) != doc.version:
            self.check(uri)
        return self.analyses.get(uri)

    def position(self, uri: str, pos: Any) -> tuple[str, int, int]:
        doc = self.server.workspace.get_text_document(uri)
        lines = doc.source.split("\n")
        p = self.server.workspace.position_codec.position_from_client_units(lines, pos)
        return doc.source, p.line + 1, p.character + 1

    def hover(self, params: Any) -> Any:
        types = self.types
        uri = params.text_document.uri
        try:
            analysis = self.current(uri)
            if analysis is None:
                return None
            text, line, col = self.position(uri, params.position)
            md = editor.hover(analysis, text, line, col)
        except Exception:  # noqa: BLE001
            self.log(types.MessageType.Error, f"pgraph internal error in hover:\n{traceback.format_exc()}")
            return None
        if md is None:
            return None
        return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=md))

    def definition(self, params: Any) -> Any:
        types = self.types
        uri = params.text_document.uri
        try:
            analysis = self.current(uri)
            if analysis is None:
                return None
            text, line, col = self.position(uri, params.position)
            found = editor.definition(analysis, text, line, col)
            out = []
            for path, span in found:
                target = self.uris.from_fs_path(str(real_path(path)))
                if span is None:
                    rng = types.Range(start=types.Position(line=0, character=0),
                                      end=types.Position(line=0, character=0))
                else:
                    rng = self.to_range(self.lines_of(path), span.line, span.col, span.end_line, span.end_col)
                out.append(types.Location(uri=target, range=rng))
        except Exception:  # noqa: BLE001
            self.log(types.MessageType.Error, f"pgraph internal error in definition:\n{traceback.format_exc()}")
            return None
        return out or None


def make_server(opts: Options) -> Any:
    """The pygls LanguageServer with pgraph's features registered (see the module docstring)."""
    types, uris, LanguageServer = _import_protocol()
    server = LanguageServer("pgraph", __version__)
    session = _Session(server, types, uris, opts)

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: Any, params: Any) -> None:
        session.check_all()

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: Any, params: Any) -> None:
        session.check_all()

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: Any, params: Any) -> None:
        session.close(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    async def did_change(ls: Any, params: Any) -> None:
        uri = params.text_document.uri
        session.versions[uri] = version = params.text_document.version
        await asyncio.sleep(DEBOUNCE)
        if session.versions.get(uri) == version:
            session.check_all()

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    def on_hover(ls: Any, params: Any) -> Any:
        return session.hover(params)

    @server.feature(types.TEXT_DOCUMENT_DEFINITION)
    def on_definition(ls: Any, params: Any) -> Any:
        return session.definition(params)

    return server


def _SEVERITY(types: Any) -> dict[Severity, Any]:
    return {Severity.ERROR: types.DiagnosticSeverity.Error, Severity.WARNING: types.DiagnosticSeverity.Warning,
            Severity.NOTE: types.DiagnosticSeverity.Information}


def _message_at_line_1(types: Any, message: str, severity: Any) -> Any:
    zero = types.Position(line=0, character=0)
    return types.Diagnostic(range=types.Range(start=zero, end=types.Position(line=0, character=1)),
                            message=message, severity=severity, source="pgraph")


def serve(opts: Options) -> int:
    """Run the server on stdin/stdout until the client says exit; 0."""
    make_server(opts).start_io()
    return 0
