"""`pgraph --version`: the versions of pgraph and Lark and the digest of the grammar in use.

The expected values do not come from the code under test: pgraph's version from pyproject.toml,
Lark's from its installed distribution's metadata, and the digest recomputed here with
`binascii.crc32` (not the `zlib` call of `grammar_digest`) over the grammar file's bytes; it must
also be the digest the saved LALR tables (grammar/pgl.lalr) say they were built from.
"""

from __future__ import annotations

import binascii
import subprocess
import sys
import tomllib
from importlib import metadata

import pytest

from pgraph import cli
from pgraph.frontend import parser
from tests.conftest import ROOT

GRAMMAR = ROOT / "grammar" / "pgl.lark"


def _digest(data: bytes) -> str:
    """CRC-32 (8 hex digits) and byte length, as `grammar_digest` names a grammar."""
    return f"{binascii.crc32(data) & 0xFFFFFFFF:08x}-{len(data)}"


def _expected() -> str:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    return f"pgraph {version}, lark {metadata.version('lark')}, grammar {_digest(GRAMMAR.read_bytes())}"


def test_version_prints_pgraph_lark_and_the_grammar_digest() -> None:
    out = subprocess.run([sys.executable, "-m", "pgraph", "--version"], cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""
    assert out.stdout == _expected() + "\n"


def test_version_wins_over_a_subcommand() -> None:
    # argparse acts on --version where it stands: nothing is planned, the spec is not even read
    out = subprocess.run([sys.executable, "-m", "pgraph", "--version", "plan", "no/such/spec.pgl"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert (out.returncode, out.stdout, out.stderr) == (0, _expected() + "\n", "")


def test_the_digest_is_the_one_the_saved_tables_were_built_from() -> None:
    with (ROOT / "grammar" / "pgl.lalr").open("rb") as f:
        head = f.readline()
    lark = metadata.version("lark")
    assert head == f"pgraph-lalr-2 {_digest(GRAMMAR.read_bytes())} lark-{lark}\n".encode("ascii")


def test_the_digest_follows_the_grammar_text(monkeypatch: pytest.MonkeyPatch) -> None:
    edited = GRAMMAR.read_text(encoding="utf-8") + "\n// one more line\n"
    monkeypatch.setattr(parser, "_grammar_text", lambda: edited)
    text = cli.version_text()
    assert text.endswith(f", grammar {_digest(edited.encode('utf-8'))}")
    assert _digest(edited.encode("utf-8")) != _digest(GRAMMAR.read_bytes())


def test_a_missing_grammar_is_reported_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing() -> str:
        raise FileNotFoundError("grammar/pgl.lark is missing from the pgraph installation")

    monkeypatch.setattr(parser, "_grammar_text", missing)
    assert cli.version_text().endswith(", grammar missing")
