"""Success rates, their 95% intervals and a baseline's comparison (pure).

Wilson's score interval rather than the normal one: it stays inside [0, 1] and is honest at the
small counts and the rates near 0 or 1 an evaluation of a few episodes gives. A task "fell beyond
chance" when Fisher's exact test, one-sided, says a drop this large from the baseline's count
would happen by chance less than 5% of the time with the two rates equal.
"""

from __future__ import annotations

from math import comb, sqrt

Z95 = 1.959963984540054  # the standard normal's 97.5th percentile
FELL_P = 0.05


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The interval of a rate of ``successes`` in ``n`` trials; (0, 1) when there were none."""
    if not 0 <= successes <= n:
        raise ValueError(f"successes must be within 0..n (got {successes} of {n})")
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def drop_p_value(base_successes: int, base_n: int, successes: int, n: int) -> float:
    """One-sided Fisher exact p-value that the new rate is lower than the baseline's: the chance,
    with both rates equal and the total successes fixed, of the new count being this low or lower."""
    total = base_successes + successes
    everyone = base_n + n
    if n == 0 or base_n == 0:
        return 1.0
    denominator = comb(everyone, total)
    low = max(0, total - base_n)
    return sum(comb(n, k) * comb(base_n, total - k) for k in range(low, successes + 1)) / denominator


def fell_beyond_chance(base_successes: int, base_n: int, successes: int, n: int) -> bool:
    return successes * base_n < base_successes * n and drop_p_value(base_successes, base_n, successes, n) < FELL_P
