"""Hypothesis settings per profile, chosen by ``HYPOTHESIS_PROFILE`` (``ci`` when unset).

- ``ci``: derandomized, so every run tries the same examples and a red build is red again
  on the next run and on a laptop; no deadline (a shared CI machine's timing is no
  property of the code); the example database off, since derandomized runs replay nothing.
- ``fuzz`` (``make fuzz``): random, and ``FUZZ_FACTOR`` times the examples of each test,
  to find what the fixed examples do not; a failure prints the blob that replays it.

A test that must keep its number of examples small (one example writes a thousand rows)
asks ``examples(n)``: n under ``ci``, ``FUZZ_FACTOR * n`` under ``fuzz``.
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


def examples(ci: int) -> int:
    """How many examples a test of ``ci`` examples in CI tries under the loaded profile."""
    return ci * FUZZ_FACTOR if PROFILE == FUZZ else ci
