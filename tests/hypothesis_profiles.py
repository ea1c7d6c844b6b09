"""Hypothesis settings per profile, chosen by ``HYPOTHESIS_PROFILE`` (``ci`` when unset).

- ``ci``: derandomized, so every run tries the same examples and a red build is red again
  on the next run and on a laptop; no deadline (a shared CI machine's timing is no
  property of the code); the example database off, since derandomized runs replay nothing.
- ``fuzz`` (``make fuzz``): random, and ``FUZZ_FACTOR`` times the examples of each test,
  to find what the fixed examples do not; a failure prints the blob that replays it.

A test that must keep its number of examples small (one example writes a thousand rows)
asks ``examples(n)``: n under ``ci``, ``FUZZ_FACTOR * n`` under ``fuzz``; or
``examples(n, fuzz=m)`` when CI's few examples should not cut what ``make fuzz`` explores.
"""

import os

from hypothesis import settings

CI, FUZZ = "ci", "fuzz"
FUZZ_FACTOR = 10
CI_EXAMPLES = 100

settings.register_profile(
    CI, derandomize=True, max_examples=CI_EXAMPLES, deadline=None, database=None, print_blob=True
)
settings.register_profile(
    FUZZ, derandomize=False, max_examples=FUZZ_FACTOR * CI_EXAMPLES, deadline=None, print_blob=True
)

PROFILE = os.environ.get("HYPOTHESIS_PROFILE", CI)
settings.load_profile(PROFILE)


def examples(ci: int, *, fuzz: int | None = None) -> int:
    """How many examples a test of ``ci`` examples in CI tries under the loaded profile:
    under ``fuzz``, ``fuzz`` when given, else ``FUZZ_FACTOR`` times ``ci``."""
    if PROFILE != FUZZ:
        return ci
    return fuzz if fuzz is not None else ci * FUZZ_FACTOR
