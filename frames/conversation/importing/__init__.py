"""Transcript import: uploads of a transcript kept per source, and the job that writes what
they brought as one session, with a frame per conversation (the main one and each
subagent), its turns and its usage, at the transcript's own times.

``receiving``: an upload (``import_receive``) stores text: a file's part starting at a
byte ``offset`` (only what was appended since the last upload, as Claude Code's hook sends
it), or the whole file again; it queues the job, which a worker claims once.

``executing``: the job (``import_execute``) reads the whole text received so far with the
``readers`` and writes the entries beyond those already written; while the transcript is
not final it holds back the trailing ones that later lines may still change. Importing a
file in parts therefore writes what importing it whole does, and importing the same file
twice writes nothing the second time. A final transcript ends its session; one that grows
after that reopens it.

An entry that is not a valid message is skipped and reported by its line
(``TranscriptInvalid``); anything else that fails leaves what earlier batches wrote, and
the next upload's job goes on from there. The package re-exports nothing: import from the
module that owns a name.
"""
