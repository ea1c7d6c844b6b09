"""Pausing Python's cyclic garbage collector around work that allocates a lot and keeps
nothing in cycles.

The cyclic collector runs when allocations outnumber deallocations by a threshold, and
every so often it walks every object of the process. A context pack of a large frame
makes tens of thousands of short-lived objects (rows, candidates, scores, the answer's
items), none of them in a reference cycle: reference counting frees them all, and the
collections their allocations set off only walked the heap for nothing (a third of the
pack's time on a 1,000-handle frame, measured with ``gc.callbacks``).
"""

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def cyclic_collector_paused() -> Iterator[None]:
    """Run the block with the cyclic collector off, and turn it back on after (if it was
    on). The collector is the process's: a request of another thread running meanwhile
    goes without it too, for as long as the block, and nothing is lost (a cycle made
    meanwhile is collected by the next collection). Nested or concurrent blocks are safe:
    only a block that found the collector on turns it back on."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
