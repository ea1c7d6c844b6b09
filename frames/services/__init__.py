"""Writes to sessions, frames, handles and usage, one module for each thing they own:
``sessions``, ``stack`` (push, reserve, results, pop and close), ``usage`` (with its
PostgreSQL statements in ``usage_sql``), ``pressure`` (a frame's level and the session's
gauge), ``handles`` and ``expiry`` (suspension expiry). Import from the module that owns
a write; this package re-exports nothing.

Each service runs in one transaction, locks the session row first (then the frames it
changes, parents before children) and appends its event to the session's log inside that
transaction. Every write of one session therefore serializes on the session row, which
is what keeps budget arithmetic exact when many agents write at once; on SQLite the
IMMEDIATE transaction mode gives the same guarantee for the whole database.
"""
