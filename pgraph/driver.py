"""Chain the stages once: load (parse + includes) → lower → expand → passes → Plan."""

from __future__ import annotations

import re
from pathlib import Path

import attrs

from pgraph.diagnostics import DiagnosticBag, Note
from pgraph.ir.expand import expand
from pgraph.ir.expr import MAX_INT_BITS
from pgraph.ir.loader import load_program_files, read_source
from pgraph.ir.lower import Lowerer, Override
from pgraph.ir.program import Program
from pgraph.plan.base import Plan
from pgraph.plan.pipeline import run_passes
from pgraph.source import SourceFile, Span
from pgraph.syntax import ast
from pgraph.syntax.parser import parse_source


class UsageError(Exception):
    """Bad command-line use (missing file, malformed -D): exit code 2, no diagnostics."""


@attrs.frozen
class Options:
    """Compile options: constant overrides, a config file, a layer count, full expansion."""

    defines: tuple[tuple[str, int], ...] = ()
    config: str | None = None
    layers: int | None = None
    full: bool = False


def parse_define(text: str) -> tuple[str, int]:
    """`NAME=VALUE` (integer VALUE, underscores allowed) → (NAME, VALUE); UsageError otherwise."""
    name, sep, value = text.partition("=")
    name = name.strip()
    if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z_0-9]*", name):  # the grammar's NAME
        raise UsageError(f"-D expects NAME=VALUE, got '{text}'")
    digits = value.strip()
    if not re.fullmatch(r"[+-]?[0-9][0-9_]*", digits):  # the grammar's INT (ASCII digits), with a sign
        raise UsageError(f"-D {name}: '{value}' is not an integer")
    number = int(digits.replace("_", ""))
    if number.bit_length() > MAX_INT_BITS:
        raise UsageError(f"-D {name}: the value exceeds 2**{MAX_INT_BITS} in magnitude")
    return name, number


def resolve_config(spec: Path, config: str) -> Path:
    """A config is a .pgl path, or a name looked up as `<dir>/configs/<name>.pgl`, where <dir> is
    the spec's directory or, failing that, the nearest parent directory that has one."""
    direct = Path(config)
    if config.endswith(".pgl") or "/" in config:
        if direct.is_file():
            return direct
        raise UsageError(f"config file '{config}' not found")
    named = spec.parent / "configs" / f"{config}.pgl"
    for folder in (spec.parent, *spec.parent.parents):
        candidate = folder / "configs" / f"{config}.pgl"
        if candidate.is_file():
            return candidate  # the nearest configs/ up the tree (specs/variants/x.pgl → specs/configs)
    raise UsageError(f"no config named '{config}' (looked for {named} and in the parent directories)")


def _overrides(spec: Path, opts: Options, bag: DiagnosticBag) -> list[Override]:
    out: dict[str, Override] = {}
    if opts.config is not None:
        path = resolve_config(spec, opts.config)
        file = read_spec(path)
        module = parse_source(file, bag)
        for item in module.items if module else ():
            if isinstance(item, ast.Const):
                if item.name in out:  # a second override of one constant would silently win
                    bag.add("PG003", f"constant '{item.name}' is overridden twice in the config file", item.span,
                            [Note("first override", out[item.name].span)], hint="keep one of the two lines")
                    continue
                out[item.name] = Override(item.name, item.expr, item.span, f"--config {file.display}")
            else:
                bag.add("PG019", "a config file holds only `const` overrides", item.span)  # type: ignore[union-attr]
    defines = list(opts.defines)
    if opts.layers is not None:
        defines.append(("NUM_LAYERS", opts.layers))
    for name, value in defines:
        text = f"-D {name}={value}"
        file = SourceFile("<command line>", text)
        span = Span(file, 1, 1, 1, len(text) + 1)
        out[name] = Override(name, ast.Num(value, span), span, f"-D {name}")
    return list(out.values())


def read_spec(path: str | Path) -> SourceFile:
    """Read the spec file, raising UsageError when it cannot be read."""
    p = Path(path)
    try:
        return read_source(p)
    except FileNotFoundError:
        raise UsageError(f"no such file: {path}") from None
    except IsADirectoryError:
        raise UsageError(f"{path} is a directory, not a .pgl file") from None
    except UnicodeDecodeError:
        raise UsageError(f"{path} is not UTF-8 text") from None
    except OSError as err:
        raise UsageError(f"cannot read {path}: {err.strerror}") from None


def compile_program(path: str | Path, opts: Options, bag: DiagnosticBag) -> Program | None:
    """Parse and lower; None when the bag holds errors."""
    root = read_spec(path)
    overrides = _overrides(Path(path), opts, bag)
    loaded = load_program_files(root, bag)
    if loaded is None or bag.has_errors:
        return None
    return Lowerer(loaded, bag, overrides).run()


def plan_program(path: str | Path, opts: Options | None = None) -> tuple[Plan | None, DiagnosticBag]:
    """The whole planner: stops after the first stage that produced errors."""
    opts = opts or Options()
    bag = DiagnosticBag()
    program = compile_program(path, opts, bag)
    if program is None:
        return None, bag
    graph = expand(program, bag, full=opts.full)
    if bag.has_errors:
        return None, bag
    plan = Plan(program, graph, bag)
    run_passes(plan)
    return plan, bag
