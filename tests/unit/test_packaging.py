"""Packaging: every Python package ships, and a wheel carries the grammar and the rules doc."""

from __future__ import annotations

import shutil
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


#: what the wheel is built from (pyproject.toml's packages, package-dir and readme)
SOURCES = ("pyproject.toml", "README.md", "pgraph", "grammar", "docs")


def test_wheel_runs_without_the_checkout(tmp_path: Path) -> None:
    """The wheel is built from a copy of the sources: a build in the checkout would write build/
    and pgraph.egg-info/ into it (and race another run or worker reading the tree)."""
    wheel_dir, target, source = tmp_path / "wheel", tmp_path / "site", tmp_path / "source"
    source.mkdir()
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(ROOT / name, source / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "-w", str(wheel_dir), str(source)], check=True, cwd=tmp_path, timeout=300)
    wheel = next(wheel_dir.glob("pgraph-*.whl"))
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)],
                   check=True, cwd=tmp_path, timeout=300)
    probe = ("from pgraph.frontend.parser import parser, grammar_digest, _grammar_text; parser(); "
             "from pgraph.frontend.lalr import driver; assert driver(grammar_digest(_grammar_text())), 'tables'; "
             "from pgraph.explain import explain; text = explain('PG013'); "
             "assert 'Failing' in text, text; print('ok')")
    out = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True,
                         env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin", **KEEP_ENV}, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
