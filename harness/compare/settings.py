"""The paired tests' settings, checked one flag at a time (``harness.compare`` and the leaderboard's
``--significance``): each refusal names the flag, its value and the valid range."""

from __future__ import annotations

import math

from harness.errors import HarnessError


def check_permutations(value: int) -> None:
    if value < 1:
        raise HarnessError(f"--permutations {value}: must be an integer >= 1 (the randomization permutations and "
                           "bootstrap resamples; e.g. --permutations 10000)")


def check_level(value: float) -> None:
    if not (math.isfinite(value) and 0 < value < 1):
        raise HarnessError(f"--level {value:g}: must be between 0 and 1, both excluded (the intervals' confidence "
                           "level; e.g. --level 0.95)")


def check_alpha(value: float) -> None:
    if not (math.isfinite(value) and 0 < value < 1):
        raise HarnessError(f"--alpha {value:g}: must be between 0 and 1, both excluded (the significance level; "
                           "e.g. --alpha 0.05)")
