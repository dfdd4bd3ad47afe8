"""Argument types of the numeric command-line options: a value out of range, not finite or not
a number at all is a usage error (exit 2) at parse time, never a traceback later
(`--max-memory inf` once ended in an OverflowError)."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

__all__ = ["count", "finite_positive"]


def count(minimum: int) -> Callable[[str], int]:
    """An integer option of at least `minimum` (`--layers`: 1, `--depth`: 0), in decimal."""

    def parse(text: str) -> int:
        try:
            value = int(text.strip(), 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got '{text}'") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value

    parse.__name__ = "integer"
    return parse


def finite_positive(text: str) -> float:
    """A positive, finite number (`--max-memory GIB`): 'inf', 'nan', 0 and negatives refused."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got '{text}'") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive, finite number, got '{text}'")
    return value
