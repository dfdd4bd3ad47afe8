"""Constant overrides from the command line: `-D NAME=VALUE`, `--config NAME|FILE.pgl`, `--layers N`."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

import attrs

from pgraph import records
from pgraph.diagnostics import DiagnosticBag
from pgraph.expr import MAX_INT_BITS, Expr, Num
from pgraph.findings import NotAnOverride, OverriddenTwice
from pgraph.frontend import ast
from pgraph.frontend.loader import (
    UsageError,
    check_regular,
    is_inside,
    outside_note,
    project_root,
    read_spec,
    real_path,
)
from pgraph.frontend.parser import parse_source
from pgraph.source import SourceFile, Span


@records.value
@attrs.frozen(repr=False, eq=False)
class Override:
    """A constant override: from `-D NAME=VALUE` (a `<command line>` span) or a `--config` file."""

    name: str
    expr: Expr
    span: Span | None
    origin: str


def parse_define(text: str) -> tuple[str, int]:
    """`NAME=VALUE` (integer VALUE, underscores allowed) -> (NAME, VALUE); UsageError otherwise."""
    name, sep, value = text.partition("=")
    name = name.strip()
    if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z_0-9]*", name):  # the grammar's NAME
        raise UsageError(f"-D expects NAME=VALUE, got '{text}'")
    digits = value.strip()
    if not re.fullmatch(r"[+-]?[0-9][0-9_]*", digits):  # the grammar's INT (ASCII digits), with a sign
        raise UsageError(f"-D {name}: '{value}' is not an integer")
    plain = digits.replace("_", "").lstrip("+-").lstrip("0")
    if len(plain) > MAX_INT_BITS // 3 + 1:  # more digits than 2**MAX_INT_BITS has (int() refuses past 4300)
        raise UsageError(f"-D {name}: the value exceeds 2**{MAX_INT_BITS} in magnitude")
    number = int(digits.replace("_", ""))
    if number.bit_length() > MAX_INT_BITS:
        raise UsageError(f"-D {name}: the value exceeds 2**{MAX_INT_BITS} in magnitude")
    return name, number


def resolve_config(spec: Path, config: str, root: Path | None = None, allow_outside: bool = False) -> Path:
    """A config is a .pgl path, or a name looked up as `<dir>/configs/<name>.pgl`, where <dir> is
    the spec's directory or, failing that, the nearest parent directory that has one.

    The file must lie inside `root` (the spec's project root, `pgraph.frontend.loader.project_root`)
    after its symlinks are resolved, unless `allow_outside`: a path outside is a UsageError
    before anything reads it, and the name lookup stops at `root`. A config that is not a
    regular file (a FIFO, a device) is a UsageError before it is opened.
    """
    root = project_root(spec) if root is None else root
    direct = Path(config)
    if config.endswith(".pgl") or "/" in config:
        _inside(direct, config, root, allow_outside)
        try:
            check_regular(real_path(direct))
        except FileNotFoundError:
            raise UsageError(f"config file '{config}' not found") from None
        except IsADirectoryError:
            raise UsageError(f"config file '{config}' is a directory, not a .pgl file") from None
        except OSError as err:
            raise UsageError(f"cannot read config file '{config}': {err.strerror or err}") from None
        return direct
    named = spec.parent / "configs" / f"{config}.pgl"
    start = Path(os.path.abspath(spec)).parent
    for folder in (start, *start.parents):
        candidate = folder / "configs" / f"{config}.pgl"
        if not allow_outside and not is_inside(real_path(folder), root):
            break  # the lookup never leaves the project
        if candidate.is_file():
            _inside(candidate, config, root, allow_outside)  # configs/ itself may be a symlink out
            return candidate  # the nearest configs/ up the tree (specs/variants/x.pgl -> specs/configs)
    raise UsageError(f"no config named '{config}' (looked for {named} and in the parent directories"
                     + ("" if allow_outside else ", up to the project root") + ")")


def _inside(path: Path, config: str, root: Path, allow_outside: bool) -> None:
    if allow_outside or is_inside(real_path(path), root):
        return
    raise UsageError(f"--config {config} is outside the project root, so it was not read; {outside_note(root)}; "
                     "move the file into the project or pass --allow-include-outside")


def collect_overrides(spec: Path, config: str | None, defines: Sequence[tuple[str, int]], layers: int | None,
                      bag: DiagnosticBag, root: Path | None = None, allow_outside: bool = False) -> list[Override]:
    """The overrides of one run, in precedence order (a later one of a name wins).

    The config file may hold only `const` lines, each constant once: what else it holds is handed to
    lowering, which owns the rules (PG019, PG003 for a name given twice: `pgraph.findings`);
    it must lie inside `root` unless `allow_outside` (`resolve_config`).
    """
    out: dict[str, Override] = {}
    if config is not None:
        path = resolve_config(spec, config, root, allow_outside)
        file = read_spec(path)
        module = parse_source(file, bag)
        for item in module.items if module else ():
            if isinstance(item, ast.Const):
                if item.name in out:  # a second override of one constant would silently win
                    bag.found(OverriddenTwice(span=item.span, name=item.name, first=out[item.name].span))
                    continue
                out[item.name] = Override(item.name, item.expr, item.span, f"--config {file.display}")
            else:
                bag.found(NotAnOverride(span=item.span))  # type: ignore[union-attr]
    all_defines = list(defines)
    if layers is not None:
        all_defines.append(("NUM_LAYERS", layers))
    for name, value in all_defines:
        text = f"-D {name}={value}"
        file = SourceFile("<command line>", text)
        span = Span(file, 1, 1, 1, len(text) + 1)
        out[name] = Override(name, Num(value, span), span, f"-D {name}")
    return list(out.values())
