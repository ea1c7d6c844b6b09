"""Long polls that cannot starve anyone: slots for requests that wait.

``GET /suspensions/{token}?wait=N`` holds a web thread for up to 30 s. Each web process
lets waits hold at most ``CONTEXTOPS_WAIT_SLOTS`` of its threads (half of ``WEB_THREADS``
by default), and one API key at most ``CONTEXTOPS_WAITS_PER_KEY`` of those at once; past
either, the request answers 429 ``too_many_waits`` with ``Retry-After`` at once instead
of waiting. The other threads stay for everything else: another organization's reads,
``/healthz`` and ``/readyz`` never queue behind waits.
"""

import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings

from .errors import TooManyWaits

RETRY_AFTER_SECONDS = 2


class WaitSlots:
    """The waits one web process is holding, in all and per key."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_key: Counter[str] = Counter()
        self._total = 0

    @contextmanager
    def hold(self, key_id: str) -> Iterator[None]:
        per_key = settings.CONTEXTOPS_WAITS_PER_KEY
        total = settings.CONTEXTOPS_WAIT_SLOTS
        with self._lock:
            if self._by_key[key_id] >= per_key:
                raise TooManyWaits(
                    f"This key already has {per_key} waits open, the most it may; "
                    f"retry in {RETRY_AFTER_SECONDS} s or wait less often.",
                    limit=per_key,
                    retry_after=RETRY_AFTER_SECONDS,
                )
            if self._total >= total:
                raise TooManyWaits(
                    "The server is holding as many waits as it allows; "
                    f"retry in {RETRY_AFTER_SECONDS} s.",
                    limit=total,
                    retry_after=RETRY_AFTER_SECONDS,
                )
            self._by_key[key_id] += 1
            self._total += 1
        try:
            yield
        finally:
            with self._lock:
                self._by_key[key_id] -= 1
                if self._by_key[key_id] <= 0:
                    del self._by_key[key_id]
                self._total -= 1


wait_slots = WaitSlots()
