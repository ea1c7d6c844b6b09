"""Data a user owns: a whole session exported as one JSON document, and deleted with
everything that belongs only to it (its frames, events, turns, usage, handles, working
set, suspensions, compactions, imports, RLM states and the facts of its own scope)."""
