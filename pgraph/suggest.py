"""'Did you mean ...?': the one spelling-suggestion rule for keywords and declared names."""

from __future__ import annotations

from collections.abc import Iterable


def edit_distance(a: str, b: str) -> int:
    """Optimal-string-alignment distance: insertions, deletions, substitutions, adjacent swaps."""
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cost = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                cost = min(cost, prev2[j - 2] + 1)
            cur.append(cost)
        prev2, prev = prev, cur
    return prev[-1]


def allowed_edits(word: str) -> int:
    """Edits a misspelling may be away from what was meant: 1 up to 5 letters, 2 up to 11, then 3."""
    return 1 if len(word) <= 5 else 2 if len(word) <= 11 else 3


class Guess(str):
    """The answer of `closest`: the candidate, and `sole`: whether a respelling to it is safe
    enough to be a machine fix: the word has 5 letters or more, is one edit from the guess, and
    no other candidate (of any length) is as near. A hint names the guess either way. `TILEn`
    is as near `TILE` as `TILES`, `yC` as near `C` as `TC`, and a short name one edit from a
    declared one is as often another name altogether (a deleted `const KS` is not `K`): a
    wrong respelling makes a new error, a shape or a value that no longer fits."""

    sole: bool

    def __new__(cls, value: str, sole: bool) -> Guess:
        self = super().__new__(cls, value)
        self.sole = sole
        return self


def closest(word: str, candidates: Iterable[str]) -> Guess | None:
    """The candidate nearest to a misspelt `word` within `allowed_edits`, or None.

    Ties prefer the candidate of the same length (`cosnt` -> `const`, not `cost`), then the
    alphabetically first. A word of up to 3 letters is only matched by a missing or extra
    letter (`dep` -> `deps`), so short names such as `foo` are not taken for `for`.
    """
    limit = allowed_edits(word)
    pool = set(candidates) - {word}
    ranked = sorted((edit_distance(word, c), abs(len(c) - len(word)), c) for c in pool
                    if len(word) > 3 or len(c) != len(word))
    if not ranked or ranked[0][0] > limit:
        return None
    best, _, guess = ranked[0]
    sole = len(word) >= 5 and best == 1 and not any(c != guess and edit_distance(word, c) <= best for c in pool)
    return Guess(guess, sole)
