"""Packaging: every Python package ships, and a wheel carries the grammar and the rules doc."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

from tests.conftest import KEEP_ENV, ROOT


def _declared() -> set[str]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return set(data["tool"]["setuptools"]["packages"])


def test_every_package_is_declared() -> None:
    on_disk = {
        ".".join(p.relative_to(ROOT).parts)
        for p in (ROOT / "pgraph").rglob("*")
        if p.is_dir() and p.name != "__pycache__" and any(p.glob("*.py"))
    }
    assert on_disk <= _declared(), sorted(on_disk - _declared())
    assert {"pgraph.grammar", "pgraph.docs"} <= _declared()


def test_wheel_runs_without_the_checkout(tmp_path: Path) -> None:
    wheel_dir, target = tmp_path / "wheel", tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "-w", str(wheel_dir), str(ROOT)], check=True, cwd=tmp_path, timeout=300)
    wheel = next(wheel_dir.glob("pgraph-*.whl"))
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)],
                   check=True, cwd=tmp_path, timeout=300)
    probe = ("from pgraph.frontend.parser import parser, _fast_driver, _grammar_text, load_saved_parser; parser(); "
             "assert _fast_driver(), 'tables'; assert load_saved_parser(_grammar_text()), 'pgl.lalr'; "
             "from pgraph.explain import explain; text = explain('PG013'); "
             "assert 'Failing' in text, text; print('ok')")
    out = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True,
                         env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin", **KEEP_ENV}, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
