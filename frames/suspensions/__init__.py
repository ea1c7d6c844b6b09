"""Suspending frames, deciding on them, resuming and expiring them
(docs/concepts.md#suspensions)."""
