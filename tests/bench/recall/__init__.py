"""`make bench-recall`: how much of what a question needs does a context pack hold?

LoCoMo's development conversations (read from ``LOCOMO_PATH``, default
``../shared/fixtures/locomo/locomo-dev.json``; CC BY-NC 4.0, evaluation only, never copied
here) are loaded through the JSON API into a fresh database (SQLite, or PostgreSQL when
DATABASE_URL is set): turns as handles, observations as facts, both together, and each
session as one long document (where the pack shows excerpts, set beside the same hybrid
over passages of whole turns). Every
question of categories 1-4 is asked as a pack's ``query`` at each budget, and the pack's
recall of the question's evidence turns is set beside newest-first, BM25 and a BM25 +
embedding hybrid computed in the same run on the same texts and token counts.

It writes docs/benchmarks-recall.md (docs/benchmarks-recall-<engine>.md off PostgreSQL)
and ``figures.recall`` in docs/benchmarks.json (docs/benchmarks-<engine>.json), prints the
tables and the issue's targets, met or not. A missed target never fails the command: it
is a measurement.

Options (environment): ``RECALL_CONVERSATIONS`` (how many, from the first; all by
default), ``RECALL_BUDGETS`` (default ``1000,2000,4000``), ``RECALL_MODES`` (default
``handles,facts,both,documents``), ``RECALL_WRITE=0`` (print only, write no docs),
``RECALL_DETAILS=<file>`` (every question's recall per method as JSON lines: ids and
figures, no text of the data).

Modules: ``locomo`` reads the data, ``baselines`` ranks and fills, ``run`` drives the API,
``summary`` averages and checks the targets, ``main`` ties them together.
"""
