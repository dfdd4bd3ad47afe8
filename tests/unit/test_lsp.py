"""`pgraph lsp`: a real Language Server Protocol session over stdio (tests/support/lsp_client.py
speaks JSON-RPC with Content-Length framing to `python3 -m pgraph lsp`).

Positions are found in the spec text by searching for the planted or looked-up token, and the
figures a hover shows are worked out from the constants of specs/qwen3_14b.pgl by hand: q_proj
is an SPMD grid of Q_ON * QKV_OK = (5120 / 512) * 5 = 50 blocks, one task per layer, 40 layers.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import KEEP_ENV, ROOT, SPECS
from tests.support.lsp_client import LspClient

pytest.importorskip("pygls", reason="pgraph lsp needs pygls (pip install 'pgraph[lsp]'; the test extra has it)")

ENV = {"PYTHONPATH": str(ROOT), "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PGRAPH_VERIFY": "1", **KEEP_ENV}


@pytest.fixture
def specs(tmp_path: Path) -> Path:
    shutil.copytree(SPECS, tmp_path / "specs")
    return tmp_path / "specs"


@pytest.fixture
def client(specs: Path) -> Iterator[LspClient]:
    c = LspClient(specs, env=ENV)
    c.initialize(specs)
    yield c
    assert c.close() == 0


def where(text: str, token: str, skip: int = 0) -> tuple[int, int]:
    """0-based (line, character) of the start of `token` in `text` (ASCII here: UTF-16 = code points)."""
    at = -1
    for _ in range(skip + 1):
        at = text.index(token, at + 1)
    return text.count("\n", 0, at), at - text.rfind("\n", 0, at) - 1


def pos(uri_path: Path, line: int, char: int) -> dict[str, Any]:
    return {"textDocument": {"uri": uri_path.as_uri()}, "position": {"line": line, "character": char}}


def test_initialize_advertises_hover_and_definition(specs: Path) -> None:
    c = LspClient(specs, env=ENV)
    caps = c.initialize(specs)["capabilities"]
    assert caps["hoverProvider"] and caps["definitionProvider"]
    assert c.close() == 0


def test_a_broken_spec_gets_its_diagnostic_with_code_and_position(client: LspClient, specs: Path) -> None:
    path = specs / "decode_layer.pgl"
    text = path.read_text(encoding="utf-8").replace("deps(prev, q_seed)", "deps(prev, q_sed)")
    client.open(path, text)
    diags = client.diagnostics(path)
    errors = [d for d in diags if d["severity"] == 1]
    line, char = where(text, "q_sed")
    assert [(d["code"], d["range"]["start"], d["range"]["end"]) for d in errors] == [
        ("PG002", {"line": line, "character": char}, {"line": line, "character": char + len("q_sed")})]
    assert errors[0]["source"] == "pgraph"
    assert errors[0]["message"].startswith("'q_proj' depends on 'q_sed', which is not a declared task")
    assert "hint: did you mean 'q_seed'?" in errors[0]["message"]


def test_notes_with_a_place_are_related_information(client: LspClient, specs: Path) -> None:
    """PG012 at the call; its note at the kernel parameter in decode_common.pgl is related information."""
    path = specs / "decode_layer.pgl"
    common = (specs / "decode_common.pgl").read_text(encoding="utf-8")
    text = path.read_text(encoding="utf-8").replace("call copy_hidden(hidden0, hidden, cb * COPY_ROW_TILE)",
                                                    "call copy_hidden(hidden0[0, :], hidden, cb * COPY_ROW_TILE)")
    client.open(path, text)
    (err,) = [d for d in client.diagnostics(path) if d["severity"] == 1]
    assert err["code"] == "PG012"
    line, char = where(text, "hidden0[0, :]")
    assert err["range"]["start"] == {"line": line, "character": char}
    related = err["relatedInformation"]
    pline, pchar = where(common, "cur : out f32[BATCH_PAD, HIDDEN]")
    assert related[0]["location"]["uri"] == (specs / "decode_common.pgl").resolve().as_uri()
    assert related[0]["location"]["range"]["start"] == {"line": pline, "character": pchar}
    assert related[0]["message"] == "parameter 'cur' declared here"


def test_an_include_only_file_is_checked_in_its_includers_context_with_unsaved_text(
        client: LspClient, specs: Path) -> None:
    path = specs / "decode_common.pgl"
    client.open(path)
    assert [d for d in client.diagnostics(path, version=1) if d["severity"] in (1, 2)] == []
    text = path.read_text(encoding="utf-8")
    line, char = where(text, "KV_HIDDEN]", skip=0)
    client.notify("textDocument/didChange", {
        "textDocument": {"uri": path.as_uri(), "version": 2},
        "contentChanges": [{"range": {"start": {"line": line, "character": char},
                                      "end": {"line": line, "character": char + len("KV_HIDDEN")}},
                            "text": "KV_HIDEN"}]})
    (err,) = [d for d in client.diagnostics(path, version=2) if d["severity"] == 1]
    assert err["code"] == "PG002" and err["range"]["start"] == {"line": line, "character": char}
    assert "'KV_HIDEN' is not defined here" in err["message"]
    assert "in a file included from" in err["message"]   # the context, as `check` words it
    assert (specs / "decode_common.pgl").read_text(encoding="utf-8") == text  # nothing written


def test_hover_on_a_task_a_tensor_and_a_constant(client: LspClient, specs: Path) -> None:
    path = specs / "decode_layer.pgl"
    text = path.read_text(encoding="utf-8")
    client.open(path)
    client.diagnostics(path)
    line, char = where(text, "spmd q_proj[")
    md = client.request("textDocument/hover", pos(path, line, char + len("spmd ")))["contents"]["value"]
    assert "40 task(s), 2,000 block(s) in the program; per layer 1 task(s), 50 block(s)" in md
    assert "axes: i in 0..50" in md
    assert "- reads `normed[:, i % 5 * 1024 +: 1024]`" in md          # ks = i % QKV_OK, QKV_K_SLICE = 1024
    assert "- atomic_add `q_acc[:, i / 5 * 512 +: 512]` of f32[16, 5120]" in md  # nt * QKV_N_TILE
    line, char = where(text, "tensor q_acc")
    md = client.request("textDocument/hover", pos(path, line, char + len("tensor ")))["contents"]["value"]
    assert "**f32[16, 5120]**" in md and "allocated on the heap" in md   # BATCH_PAD x HIDDEN = 16 x 40 * 128
    common = (specs / "decode_common.pgl").read_text(encoding="utf-8")
    assert "tensor hidden " in common
    line, char = where(text, "QKV_K_SLICE")
    md = client.request("textDocument/hover", pos(path, line, char + 1))["contents"]["value"]
    assert "= **1,024**" in md                                         # HIDDEN / QKV_OK = 5120 / 5
    assert client.request("textDocument/hover", pos(path, 0, 0)) is None   # a comment: nothing


def test_definition_of_a_kernel_a_constant_a_task_and_an_include(client: LspClient, specs: Path) -> None:
    path = specs / "decode_layer.pgl"
    text = path.read_text(encoding="utf-8")
    common = (specs / "decode_common.pgl").read_text(encoding="utf-8")
    consts = (specs / "qwen3_14b.pgl").read_text(encoding="utf-8")
    client.open(path)
    client.diagnostics(path)

    def target(token: str, skip: int = 0, offset: int = 1) -> list[tuple[str, int, int]]:
        line, char = where(text, token, skip)
        found = client.request("textDocument/definition", pos(path, line, char + offset))
        return [(Path(loc["uri"].removeprefix("file://")).name, loc["range"]["start"]["line"],
                 loc["range"]["start"]["character"]) for loc in found or []]

    kline, kchar = where(common, "kernel q_proj aic")
    assert target("call q_proj(", offset=len("call ") + 1) == [("decode_common.pgl", kline, kchar + len("kernel "))]
    cline, cchar = where(consts, "const QKV_K_SLICE")
    assert target("QKV_K_SLICE") == [("qwen3_14b.pgl", cline, cchar + len("const "))]
    tline, tchar = where(text, "at q_seed early")
    assert target("deps(prev, q_seed)", offset=len("deps(prev, ") + 1) == [("decode_layer.pgl", tline, tchar + 3)]
    assert target('include "decode_common.pgl"', offset=3) == [("decode_common.pgl", 0, 0)]
    fline, fchar = where(text, "fragment entry_setup")
    assert target("use entry_setup", offset=len("use ") + 1) == [("decode_layer.pgl", fline, fchar + len("fragment "))]
    vline, vchar = where(text, "tensor q_acc")
    assert target("atomic_add q_acc", offset=len("atomic_add ") + 1) == [("decode_layer.pgl", vline,
                                                                            vchar + len("tensor "))]


def test_bad_input_never_stops_the_server(client: LspClient, specs: Path, tmp_path: Path) -> None:
    """Garbage, a position past the end, an untitled document: diagnostics or nothing, never a crash."""
    junk = specs / "junk.pgl"
    junk.write_text("\x00\x01 entry {{{ ]]] \ufffd\n", encoding="utf-8")
    client.open(junk)
    (d,) = client.diagnostics(junk)
    assert d["code"] == "PG001" and d["severity"] == 1
    assert client.request("textDocument/hover", pos(junk, 999, 999)) is None
    assert client.request("textDocument/definition", pos(junk, 0, 10_000)) is None
    client.notify("textDocument/didOpen", {"textDocument": {"uri": "untitled:Untitled-1", "languageId": "pgl",
                                                            "version": 1, "text": "entry e {"}})
    path = specs / "decode_layer.pgl"
    client.open(path)
    assert isinstance(client.diagnostics(path), list)     # still answering


def test_an_internal_error_is_logged_and_shown_at_line_1(specs: Path) -> None:
    driver = ("import pgraph.commands.editor as e\n"
              "def boom(*a, **k):\n    raise RuntimeError('boom in a pass')\n"
              "e.analyze = boom\n"
              "from pgraph.cli import main\nraise SystemExit(main(['lsp']))\n")
    c = LspClient(specs, env=ENV, command=[sys.executable, "-c", driver])
    c.initialize(specs)
    path = specs / "decode_layer.pgl"
    c.open(path)
    (d,) = c.diagnostics(path)
    assert d["range"]["start"] == {"line": 0, "character": 0} and d["severity"] == 1
    assert d["message"].startswith("pgraph internal error: RuntimeError: boom in a pass")
    log = c.wait_for(lambda m: m.get("method") == "window/logMessage")
    assert log["params"]["type"] == 1 and "Traceback" in log["params"]["message"]
    assert c.close() == 0


def test_a_usage_error_is_a_diagnostic_at_line_1(specs: Path) -> None:
    c = LspClient(specs, args=["--config", "nope"], env=ENV)
    c.initialize(specs)
    path = specs / "decode_layer.pgl"
    c.open(path)
    (d,) = c.diagnostics(path)
    assert d["range"]["start"] == {"line": 0, "character": 0} and d["message"].startswith("pgraph: ")
    assert "nope" in d["message"]
    assert c.close() == 0


def test_the_server_imports_what_check_imports_and_the_protocol_only() -> None:
    """After one analysis the server has no backend, numpy, networkx or graphviz loaded beyond what
    `pgraph check` loads itself."""
    probe = ("import sys\n{body}\nprint('\\n'.join(sorted(sys.modules)))\n")
    check = ("from pgraph.cli import main\nimport contextlib, io\n"
             "with contextlib.redirect_stdout(io.StringIO()): main(['check', 'specs/decode_layer.pgl'])")
    serve = ("from pgraph.commands.lsp import make_server\nfrom pgraph.commands import editor\n"
             "from pgraph.pipeline import Options\nmake_server(Options())\n"
             "a = editor.analyze('specs/decode_layer.pgl', Options())\n"
             "text = open('specs/decode_layer.pgl').read()\n"
             "editor.hover(a, text, 114, 11)\n")

    def modules(body: str) -> set[str]:
        out = subprocess.run([sys.executable, "-c", probe.format(body=body)], cwd=ROOT, capture_output=True,
                             text=True, env=ENV, timeout=120, check=True)
        return set(out.stdout.split())

    extra = modules(serve) - modules(check)
    heavy = sorted(m for m in extra if m.split(".")[0] in ("numpy", "networkx", "graphviz", "ml_dtypes", "lark")
                   or m.startswith("pgraph.backends"))
    assert heavy == []
    ours = sorted(m for m in extra if m.startswith("pgraph"))
    assert set(ours) <= {"pgraph.commands", "pgraph.commands.lsp", "pgraph.commands.editor", "pgraph.commands.context",
                         "pgraph.frontend.includers"}, ours


def test_lsp_without_pygls_is_a_usage_error_that_says_how_to_install_it(tmp_path: Path) -> None:
    driver = ("import sys\nsys.modules['pygls'] = None\nsys.modules['lsprotocol'] = None\n"
              "from pgraph.cli import main\nraise SystemExit(main(['lsp']))\n")
    proc = subprocess.run([sys.executable, "-c", driver], cwd=tmp_path, capture_output=True, text=True, env=ENV,
                          timeout=60, check=False)
    assert proc.returncode == 2
    assert proc.stderr.startswith("pgraph: error: `pgraph lsp` needs pygls (pip install 'pgraph[lsp]')")
