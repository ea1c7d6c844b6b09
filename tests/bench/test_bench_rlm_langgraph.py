"""RLM checkpoints beside LangGraph's PostgreSQL checkpointer, on the same database.

A state of 1,000 variables (~200-byte values, the seed's limit) on our side, a LangGraph
checkpoint of the same 1,000 values as channels on theirs, same database, same process.
Every round changes one variable and times each side's operations back to back, so both
see the same load on a shared machine:

- save: our ``checkpoint_create`` (a position in the mutation log: a checkpoint row with
  the completion and the non-zero access counts, its event) beside ``PostgresSaver.put``
  with every channel new (a full save, the yardstick of the issue) and with only the
  changed channel new (LangGraph's incremental save after a step);
- load: our ``rollback`` (restores every variable exactly, writing back the ones changed
  since, logs the rollback as a mutation with its pre-images and an event, and answers
  with what it did: counts, checkpoint, the names rewritten) beside ``get_tuple`` (reads
  the checkpoint and deserializes its 1,000 channel values); and ``state_rollback``, the
  same rollback answering with the whole state read back, every variable row, as the API
  does.

Needs PostgreSQL and the benchmark-only dependencies in requirements/bench.txt (make
bench installs them). Figures go to docs/benchmarks-rlm-langgraph.md and
docs/benchmarks.json through tests/bench/report.py.
"""

import statistics
import time

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from frames.models import Session
from frames.rlm import protocol, snapshots
from tests.bench import report
from tests.conftest import IS_POSTGRES

VARIABLES = 1_000
ROUNDS = 30
CONTROL = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE")

pytestmark = [
    pytest.mark.skipif(
        not IS_POSTGRES, reason="LangGraph's checkpointer needs PostgreSQL (set DATABASE_URL)"
    ),
    pytest.mark.django_db(transaction=True),
]


def _p(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[int(0.95 * (len(ordered) - 1))]


def _conninfo() -> str:
    db = connection.settings_dict
    auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
    return f"postgresql://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def _ms(call, *args, **kwargs):
    """Milliseconds ``call(*args, **kwargs)`` took, and what it returned."""
    started = time.perf_counter()
    result = call(*args, **kwargs)
    return (time.perf_counter() - started) * 1000, result


def _queries(call) -> int:
    with CaptureQueriesContext(connection) as captured:
        call()
    return sum(1 for q in captured.captured_queries if not q["sql"].startswith(CONTROL))


def test_bench_rlm_beside_langgraph(api):
    postgres = pytest.importorskip(
        "langgraph.checkpoint.postgres", reason="pip install -r requirements/bench.txt"
    )
    from langgraph.checkpoint.base import empty_checkpoint
    from psycopg import Connection
    from psycopg.rows import dict_row

    value = {"summary": "Some evidence text. " * 8, "score": 0.5}
    variables = {f"v{i:04d}": value for i in range(VARIABLES)}

    session = Session.objects.create(organization=api.organization, identity={"user_name": "Bench"})
    state = protocol.state_initialize(
        organization=api.organization, prompt="bench", session=session
    )
    for name, item in list(variables.items())[: VARIABLES - 1]:  # prompt is the 1,000th
        protocol.variable_write(state=state, name=name, value=item)

    def checkpoint(values: dict, versions: dict):
        saved = empty_checkpoint()
        saved["channel_values"] = values
        saved["channel_versions"] = versions
        return saved

    times: dict[str, list[float]] = {
        key: [] for key in ("save", "put", "put_step", "rollback", "get_tuple", "state_rollback")
    }
    with Connection.connect(
        _conninfo(), autocommit=True, prepare_threshold=0, row_factory=dict_row
    ) as conn:
        saver = postgres.PostgresSaver(conn)
        saver.setup()
        full = {"configurable": {"thread_id": "bench-full", "checkpoint_ns": ""}}
        step = saver.put(
            {"configurable": {"thread_id": "bench-step", "checkpoint_ns": ""}},
            checkpoint(variables, dict.fromkeys(variables, "1")),
            {"source": "input", "step": -1},
            dict.fromkeys(variables, "1"),
        )
        for i in range(ROUNDS + 1):  # the first round warms both sides up and is not kept
            changed = {**variables, "v0000": f"changed {i}"}
            every = {name: str(i + 1) for name in changed}
            one = {**dict.fromkeys(variables, "1"), "v0000": str(i + 2)}
            full_save, step_save = checkpoint(changed, every), checkpoint(changed, one)
            ours_save, taken = _ms(snapshots.checkpoint_create, state=state, name=f"b{i}")
            put, saved = _ms(saver.put, full, full_save, {"step": i}, every)
            put_step, step = _ms(saver.put, step, step_save, {"step": i}, {"v0000": one["v0000"]})
            protocol.variable_write(state=state, name="v0000", value=f"changed {i}")
            rollback, done = _ms(snapshots.rollback, state=state, checkpoint_id=taken.checkpoint_id)
            get_tuple, loaded = _ms(saver.get_tuple, saved)
            protocol.variable_write(state=state, name="v0000", value=f"again {i}")
            state_rollback, view = _ms(
                snapshots.state_rollback, state=state, checkpoint_id=taken.checkpoint_id
            )
            assert done.variable_count == VARIABLES and done.changed == ["v0000"]
            assert len(view.variables) == VARIABLES
            assert len(loaded.checkpoint["channel_values"]) == VARIABLES
            assert saver.get_tuple(step).checkpoint["channel_values"]["v0000"] == f"changed {i}"
            if i:
                for key, ms in zip(
                    times,
                    (ours_save, put, put_step, rollback, get_tuple, state_rollback),
                    strict=True,
                ):
                    times[key].append(ms)

    taken = snapshots.checkpoint_create(state=state, name="counted")
    save_queries = _queries(lambda: snapshots.checkpoint_create(state=state, name="counted 2"))
    protocol.variable_write(state=state, name="v0000", value="counted")
    rollback_queries = _queries(
        lambda: snapshots.rollback(state=state, checkpoint_id=taken.checkpoint_id)
    )

    p = {key: _p(samples) for key, samples in times.items()}
    ratio = {
        "save": p["save"][0] / p["put"][0],
        "save_step": p["save"][0] / p["put_step"][0],
        "rollback": p["rollback"][0] / p["get_tuple"][0],
        "state_rollback": p["state_rollback"][0] / p["get_tuple"][0],
    }

    def row(label: str, ours: str, theirs: str, key: str) -> str:
        (o50, o95), (t50, t95) = p[ours], p[theirs]
        return f"| {label} | {o50:.1f} | {o95:.1f} | {t50:.1f} | {t95:.1f} | {ratio[key]:.2f} |"

    text = "\n".join(
        [
            "# RLM checkpoints beside LangGraph's PostgreSQL checkpointer",
            "",
            "`make bench` (tests/bench/test_bench_rlm_langgraph.py): PostgreSQL, a state of "
            f"{VARIABLES:,} variables of ~200-byte",
            "values on our side, a LangGraph checkpoint of the same values as 1,000 channels "
            "on theirs (`PostgresSaver`",
            "from langgraph-checkpoint-postgres), same database, same process. Each of "
            f"{ROUNDS} rounds (after one warm-up) changes",
            "one variable and times both sides back to back, so they share the machine's load. "
            "Milliseconds; the ratio",
            "is ours over LangGraph's, at the median.",
            "",
            "| operation | ours p50 | ours p95 | LangGraph p50 | LangGraph p95 | ratio (p50) |",
            "| --- | ---: | ---: | ---: | ---: | ---: |",
            row("save: `checkpoint_create` / `put`, every channel new", "save", "put", "save"),
            row(
                "save: `checkpoint_create` / `put`, only the changed channel new",
                "save",
                "put_step",
                "save_step",
            ),
            row("load: `rollback` / `get_tuple`", "rollback", "get_tuple", "rollback"),
            row(
                "load: `state_rollback` (answers with every variable) / `get_tuple`",
                "state_rollback",
                "get_tuple",
                "state_rollback",
            ),
            "",
            "What each side does and returns:",
            "",
            "- `checkpoint_create` stores a position in the state's mutation log (each mutation "
            "already keeps the rows it",
            "  changed as they were), with the completion status and the non-zero access counts, "
            "and appends an event:",
            f"  {save_queries} queries whatever the state's size. It returns the checkpoint row. "
            "`put` with every channel new",
            "  writes all 1,000 values (a first save, or a step that changed everything); with "
            "only the changed channel",
            "  new, one value and the checkpoint, which is what LangGraph writes after a step "
            "that changed one variable.",
            "- `rollback` restores every variable exactly as it was at the checkpoint (values, "
            "types, metadata, access",
            "  counts, completion): it writes back only what changed since, logs the rollback as "
            "a mutation with the",
            f"  pre-images of what it rewrote and appends an event, in {rollback_queries} queries "
            "however many variables changed.",
            "  It returns what it did (the variable count, the checkpoint, the mutation id, the "
            "names rewritten), not the",
            "  variables. `get_tuple` only reads: the checkpoint and its 1,000 channel values, "
            "deserialized.",
            "- `state_rollback` is the same rollback returning the whole state read back in its "
            "transaction (1,000 variable",
            "  rows as model instances, the checkpoints): what `POST /rlm/states/{id}/rollback` "
            "answers with.",
        ]
    )
    print("\n" + text)
    report.write_section("rlm-langgraph", text)
    report.record(
        {
            "rlm_checkpoint_vs_langgraph_put": round(ratio["save"], 3),
            "rlm_rollback_vs_langgraph_get_tuple": round(ratio["rollback"], 3),
            "rlm_checkpoint_vs_langgraph_put_changed_channel": round(ratio["save_step"], 3),
            "rlm_state_rollback_vs_langgraph_get_tuple": round(ratio["state_rollback"], 3),
        }
    )
