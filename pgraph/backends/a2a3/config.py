"""The a2a3 target configuration: the devkit include folders of extern kernels and the output layout.

`load_config(files, layout)` reads `a2a3.toml` (package data, every key with its source in the
comments), then each `--target-config FILE.toml` in order (same layout; a key it gives replaces
the default), then `--layout`. A file that cannot be read, is not TOML, names an unknown key or
gives a value of the wrong type is `TargetRefused` (the build's usage error, exit 2).
"""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from importlib import resources
from pathlib import Path, PurePosixPath
from typing import Any

import attrs

from pgraph import records
from pgraph.backends.target import TargetRefused

#: Output layouts: name -> the folder of the orchestration source (relative to the output).
#: "pypto": pypto's writer (`pto_backend.py`); "runtime": the runtime's example tree.
LAYOUTS = {"pypto": "orchestration", "runtime": "kernels/orchestration"}

#: The keys of the configuration: section -> key -> what it holds (for the errors).
KEYS = {"devkit": {"include_dirs": "a list of folders relative to $ASCEND_HOME_PATH"},
        "output": {"layout": f"one of {', '.join(LAYOUTS)}"}}


@records.value
@attrs.frozen(repr=False, eq=False)
class A2A3Config:
    """What the a2a3 emitter reads from the target configuration.

    `include_dirs`: the CANN devkit include folders of extern kernels, relative POSIX paths
    under $ASCEND_HOME_PATH, in order (kernel_config.py expands them at load time).
    `layout`: a key of LAYOUTS.
    """

    include_dirs: tuple[str, ...]
    layout: str

    @property
    def orchestration_dir(self) -> str:
        """The folder of the orchestration source, relative to the output directory."""
        return LAYOUTS[self.layout]


def _check(data: dict[str, Any], where: str) -> dict[str, Any]:
    """The (section.key -> value) pairs of one file, checked."""
    out: dict[str, Any] = {}
    for section, items in data.items():
        if section not in KEYS or not isinstance(items, dict):
            raise TargetRefused(f"{where}: unknown section [{section}] (known: {', '.join(f'[{s}]' for s in KEYS)})")
        for key, value in items.items():
            if key not in KEYS[section]:
                raise TargetRefused(f"{where}: unknown key '{key}' in [{section}] (known: {', '.join(KEYS[section])})")
            name = f"{section}.{key}"
            if name == "devkit.include_dirs":
                if not isinstance(value, list) or not all(isinstance(d, str) and d for d in value):
                    raise TargetRefused(f"{where}: {name} must be {KEYS[section][key]}")
                for d in value:
                    pp = PurePosixPath(d)
                    if pp.is_absolute() or ".." in pp.parts or "\\" in d:
                        raise TargetRefused(f"{where}: {name}: '{d}' must be a folder relative to $ASCEND_HOME_PATH "
                                            "(no leading '/', no '..', '/' as the separator)")
                value = tuple(value)
            elif value not in LAYOUTS:
                raise TargetRefused(f"{where}: {name} must be {KEYS[section][key]}, got {value!r}")
            out[name] = value
    return out


def _read(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as err:
        raise TargetRefused(f"cannot read the target configuration {path}: {err.strerror or err}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise TargetRefused(f"the target configuration {path} is not valid TOML: {err}") from None


def default_text() -> str:
    """The text of the packaged `a2a3.toml`."""
    return resources.files("pgraph.backends.a2a3").joinpath("a2a3.toml").read_text(encoding="utf-8")


def load_config(files: Sequence[str | Path] = (), layout: str | None = None) -> A2A3Config:
    """The packaged configuration, with `files` (in order) and then `layout` applied."""
    values = _check(tomllib.loads(default_text()), "a2a3.toml")
    for path in files:
        values.update(_check(_read(Path(path)), str(path)))
    if layout is not None:
        values.update(_check({"output": {"layout": layout}}, "--layout"))
    return A2A3Config(include_dirs=values["devkit.include_dirs"], layout=values["output.layout"])
