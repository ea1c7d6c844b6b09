"""Suspending frames, deciding on them, resuming and expiring them (seed 000 §3, §4.5)."""
