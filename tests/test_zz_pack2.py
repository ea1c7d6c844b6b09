import time, json
import pytest
from django.db import connection
from frames import services
from frames.context import pack as P, packing, schemas, api as capi
from tests.bench.test_bench_context_pack import HANDLES, QUERY, _add_facts, _handles
pytestmark = pytest.mark.django_db(transaction=True)

def test_pack(api):
    session = services.session_create(organization=api.organization, agent=api.agent,
        identity={"user_name": "B", "authority": "employee"}, environment={"timezone": "UTC"}, title="b")
    root = services.frame_push(session=session, goal="root", budget_total=10**12)
    _handles(session, root, HANDLES)
    _add_facts(api.organization, 0, 10_000, 50_000)
    body = {"budget_tokens": 8_000, "query": QUERY}
    acc = {}
    def wrap(mod, name):
        f = getattr(mod, name)
        def g(*a, **k):
            t = time.perf_counter(); r = f(*a, **k); acc[name] = acc.get(name, 0) + time.perf_counter() - t; return r
        setattr(mod, name, g)
    for mod, name in [(P, "_segments"), (P, "_facts"), (P, "_working_set"), (packing, "pack"), (capi, "context_pack_out"), (capi, "context_pack_assemble"), (P, "frame_ancestry"), (P, "brief_context_text"), (P, "notes_by_handle"), (P, "_resources")]:
        wrap(mod, name)
    one = lambda: api.post(f"/sessions/{session.pk}/context-pack", body)
    for _ in range(5): one()
    acc.clear()
    t=time.perf_counter()
    for _ in range(20): one()
    total = (time.perf_counter()-t)/20*1000
    print("\ntotal ms", round(total,1))
    for k, v in sorted(acc.items(), key=lambda kv: -kv[1]): print(k, round(v/20*1000, 1))
    import cProfile, pstats, io
    captured = {}
    orig = packing.pack.__wrapped__ if hasattr(packing.pack, "__wrapped__") else None
    real = P.packing.pack
    def cap(data):
        captured["d"] = data; return real(data)
    P.packing.pack = cap
    one()
    P.packing.pack = real
    d = captured["d"]
    t = time.perf_counter()
    for _ in range(20): real(d)
    print("pack alone ms", (time.perf_counter()-t)/20*1000)
    pr = cProfile.Profile(); pr.enable()
    for _ in range(20): real(d)
    pr.disable()
    s = io.StringIO(); pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(20); print(s.getvalue()[:5000])
    r = one().json(); print(len(r["dropped"]), len(r["segments"]), len(r["facts"]), len(json.dumps(r)))
