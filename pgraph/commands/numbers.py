"""Argument types of the numeric command-line options: a value out of range, not finite or not
a number at all is a usage error (exit 2) at parse time, never a traceback later
(`--max-memory inf` once ended in an OverflowError)."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

__all__ = ["count", "finite_positive"]

#: Most digits an integer option takes (a seed or a count of 10**19 is already far past use).
MAX_DIGITS = 19


def _shown(text: str) -> str:
    """`text` quoted for a message, cut to 40 characters."""
    return f"'{text}'" if len(text) <= 40 else f"'{text[:37]}...' ({len(text)} characters)"


def count(minimum: int) -> Callable[[str], int]:
    """An integer option of at least `minimum` (`--layers`: 1, `--depth`: 0), in decimal."""

    def parse(text: str) -> int:
        word = text.strip()
        if len(word.lstrip("+-")) > MAX_DIGITS:
            raise argparse.ArgumentTypeError(f"expected an integer of at most {MAX_DIGITS} digits, got {_shown(text)}")
        try:
            value = int(word, 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {_shown(text)}") from None
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
        raise argparse.ArgumentTypeError(f"expected a number, got {_shown(text)}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive, finite number, got {_shown(text)}")
    return value
