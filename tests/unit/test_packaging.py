"""Packaging: every Python package ships, and a wheel carries the grammar and the rules doc.

The wheel also carries the specs (with configs/ and variants/), the editor grammar, the docs and
the license, and its metadata states the license, authors, keywords and classifiers of
pyproject.toml. The expected file lists are globbed from the checkout, not from the build.
"""

from __future__ import annotations

import binascii
import email.parser
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

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


#: what the wheel is built from (pyproject.toml's packages, package-dir, readme and license files)
SOURCES = ("pyproject.toml", "README.md", "LICENSE", "pgraph", "grammar", "docs", "specs")


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the wheel built from the checkout, the folder it is installed into with `pip --target`).
    The wheel is built from a copy of the sources: a build in the checkout would write build/
    and pgraph.egg-info/ into it (and race another run or worker reading the tree)."""
    tmp_path = tmp_path_factory.mktemp("packaging")
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
    return wheel, target


def _pgraph(target: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`python -m pgraph ARGS` from the installed wheel, outside the checkout."""
    return subprocess.run([sys.executable, "-m", "pgraph", *args], cwd=target.parent, capture_output=True,
                          text=True, env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin", **KEEP_ENV},
                          timeout=300)


def test_wheel_runs_without_the_checkout(installed: tuple[Path, Path]) -> None:
    _, target = installed
    tmp_path = target.parent
    probe = ("from pgraph.frontend.parser import parser, _fast_driver, _grammar_text, load_saved_parser; parser(); "
             "assert _fast_driver(), 'tables'; assert load_saved_parser(_grammar_text()), 'pgl.lalr'; "
             "from pgraph.explain import explain; text = explain('PG013'); "
             "assert 'Failing' in text, text; print('ok')")
    out = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True,
                         env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin", **KEEP_ENV}, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
    probe = "from pgraph.backends.a2a3.config import load_config; print(load_config().layout)"
    out = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True,
                         env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin", **KEEP_ENV}, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "pypto", out.stderr


def _data_files(folder: str, patterns: tuple[str, ...]) -> set[str]:
    """Files of a top-level folder of the checkout matching `patterns`, as wheel paths under pgraph/."""
    base = ROOT / folder
    return {f"pgraph/{folder}/{p.relative_to(base).as_posix()}" for pat in patterns for p in base.glob(pat)}


def test_wheel_carries_specs_grammars_docs_and_license(installed: tuple[Path, Path]) -> None:
    wheel, _ = installed
    names = set(zipfile.ZipFile(wheel).namelist())
    specs = _data_files("specs", ("*.pgl", "*/*.pgl", "pgraph.toml"))
    assert {"pgraph/specs/decode_layer.pgl", "pgraph/specs/configs/small.pgl",
            "pgraph/specs/variants/decode_layer_762.pgl", "pgraph/specs/pgraph.toml"} <= specs
    assert specs <= names, sorted(specs - names)
    grammar = _data_files("grammar", ("pgl.lark", "pgl.lalr", "pgl.tmLanguage.json"))
    assert len(grammar) == 3 and grammar <= names, sorted(grammar - names)
    docs = _data_files("docs", ("*.md",))
    assert "pgraph/docs/upstream.md" in docs and docs <= names, sorted(docs - names)
    # the target configurations the backends read as package data
    assert {"pgraph/ir/a2a3_timing.toml", "pgraph/ir/a2a3_variants.toml", "pgraph/backends/a2a3/a2a3.toml"} <= names
    license_file = next(n for n in names if n.endswith(".dist-info/licenses/LICENSE"))
    text = zipfile.ZipFile(wheel).read(license_file).decode("utf-8")
    assert text == (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in text and "Version 2.0, January 2004" in text


def test_wheel_metadata_states_license_authors_keywords_classifiers(installed: tuple[Path, Path]) -> None:
    wheel, _ = installed
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    with zipfile.ZipFile(wheel) as z:
        meta = email.parser.Parser().parsestr(
            z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode("utf-8"))
    assert meta["License-Expression"] == project["license"] == "Apache-2.0"
    assert meta.get_all("License-File") == ["LICENSE"]
    assert meta["Author"] == "pgraph developers"
    assert meta["Keywords"].split(",") == project["keywords"]
    assert meta.get_all("Classifier") == project["classifiers"]
    # no license classifier beside the SPDX expression (PEP 639), and no invented project URL
    assert not any(c.startswith("License ::") for c in project["classifiers"])
    assert meta.get_all("Project-URL") is None and meta["Home-page"] is None


def test_installed_specs_plan_and_check_outside_the_checkout(installed: tuple[Path, Path]) -> None:
    """The shipped specs work where pip put them: the HEAD spec plans, `--config small` finds the
    config beside it, and the variants' `include "../decode_layer.pgl"` stays inside their project
    root (the shipped specs/pgraph.toml; without it the root would be variants/ and PG005)."""
    _, target = installed
    specs = target / "pgraph" / "specs"
    out = _pgraph(target, "plan", str(specs / "decode_layer.pgl"), "--config", "small", "--layers", "2")
    assert out.returncode == 0, out.stderr
    for variant in sorted((specs / "variants").glob("*.pgl")):
        out = _pgraph(target, "check", str(variant), "--config", "small")
        assert out.returncode == 0 and "PG005" not in out.stderr, (variant.name, out.stderr)


def test_installed_version_names_the_installed_grammar(installed: tuple[Path, Path]) -> None:
    _, target = installed
    out = _pgraph(target, "--version")
    grammar = (target / "pgraph" / "grammar" / "pgl.lark").read_bytes()
    version = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    digest = f"{binascii.crc32(grammar) & 0xFFFFFFFF:08x}-{len(grammar)}"
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"pgraph {version}, lark ") and out.stdout.endswith(f", grammar {digest}\n"), out.stdout
