"""The Store: ledger first, then the chroma index and the graph; search,
rebuilds, broken indexes, bad input. Runs on the embedded chroma and on a
real chroma server."""

import math
import shutil
import threading
import time
import warnings

import pytest
from filelock import FileLock
from pydantic import ValidationError

from skillbase.memory.documents import experience_doc
from skillbase.memory.filters import matches
from skillbase.memory.store import Store
from skillbase.memory import vectors
from skillbase.memory.vectors import MemoryIndexWarning
from memory_factories import MATMUL_SRC, attempt, lesson, report
from skillbase.errors import ConfigError, InvalidInput, LimitExceeded, StoreError, UnknownTechnique
from skillbase.models import Feedback, Skill, TaskInfo, Tolerance


def _task() -> TaskInfo:
    return TaskInfo(name="row_softmax", path="/tasks/row_softmax/task.py", family="softmax", dtype="fp32",
                    regime="large", bytes_moved=2 * 4 * 4096 * 8192, flops=5 * 4096 * 8192,
                    tolerance=Tolerance(atol=1e-5, rtol=1e-5))


def test_record_benchmark_then_search(open_store, make_settings):
    store = open_store(make_settings())
    root = store.record_benchmark(report(ms=1.0), source=attempt(0).source, task=_task(), session="s1", agent="a")
    assert root.median_ms == 1.0 and root.speedup_vs_eager == 1.0 and root.bottleneck == "memory"
    assert root.hardware == "sm_90:NVIDIA H100 80GB HBM3" and store.get_task("row_softmax").info == _task()
    kid = store.record_attempt(attempt(1, parent=root.id, techniques=("online normalizer",), ms=0.5))
    mm = store.record_attempt(attempt(2, base=MATMUL_SRC, task="gemm", signature="matmul:fp16:large",
                                      techniques=("tl.dot", "smem blocking"), bound="compute"))
    store.record_experience(lesson("Keep a running max and a rescaled sum so the row is read once",
                                   before=root.id, after=kid.id, gain=2.0))
    store.put_skill(Skill(name="online-softmax-one-pass", description="Softmax in one pass; use when rows are re-read.",
                          techniques=["online-softmax"], status="approved"), author="curator", reason="seed")

    hits = store.search("attempts", "tiled matrix multiplication with tl.dot and a K loop", k=3)
    assert hits[0].id == mm.id and hits[0].metadata["techniques"] == ["tensor-cores", "smem-tiling"]
    soft = store.search("attempts", "tiled matrix multiplication with tl.dot", k=5, where={"family": "softmax"})
    assert {h.id for h in soft} == {root.id, kid.id}
    assert all(0 <= h.distance <= 2 and math.isclose(h.score, 1 - h.distance) for h in soft)
    tech = store.search("attempts", "softmax", k=5, where={"techniques": {"$contains": "online-softmax"}})
    assert [h.id for h in tech] == [kid.id]
    exp = store.search("experiences", "read the softmax row a single time", k=1)
    assert exp[0].metadata["gain"] == 2.0 and "running max" in exp[0].document
    for where in (None, {"family": "softmax"}):  # metadata only: same hits, no texts
        full = store.search("attempts", "softmax rows", k=3, where=where)
        lean = store.search("attempts", "softmax rows", k=3, where=where, documents=False)
        assert [(h.id, h.metadata) for h in lean] == [(h.id, h.metadata) for h in full]
        assert all(h.document for h in full) and not any(h.document for h in lean)
    assert store.search("skills", "one pass softmax", k=1, where={"status": "approved"})[0].id == "online-softmax-one-pass"
    stats = store.stats()
    assert stats.index_lag == 0 and stats.index_counts == {"experiences": 1, "skills": 1, "attempts": 3}
    assert stats.counts["attempts"] == 3 and stats.disk_bytes["ledger"] > 0


def test_search_rejects_bad_queries(open_store, make_settings):
    store = open_store(make_settings())
    with pytest.raises(InvalidInput, match="unknown collection"):
        store.search("people", "x")
    with pytest.raises(InvalidInput, match="empty"):
        store.search("skills", "   ")
    with pytest.raises(InvalidInput, match="invalid where"):
        store.search("skills", "x", where={"family": {"$regex": 3}})
    with pytest.raises(InvalidInput, match="k must"):
        store.search("skills", "x", k=0)
    assert store.search("attempts", "anything") == []


def test_bad_records_never_reach_the_store(open_store, make_settings):
    store = open_store(make_settings())
    big = attempt(0).model_copy(update={"source": "x" * 300_000})
    with pytest.raises(LimitExceeded, match="limit is 256000 bytes"):
        store.record_attempt(big)
    with pytest.raises(UnknownTechnique, match="did you mean"):
        store.record_attempt(attempt(1, techniques=("vectorisation",)))
    assert store.stats().counts["attempts"] == 0 and store.search("attempts", "softmax") == []


def test_filter_semantics_agree_with_chroma(open_store, embedded_settings):
    # The index keeps metadata in its mirror, not in chroma: the same records go into a scratch chroma
    # collection with their metadata, and chroma's own filter is the judge of `matches` (Python), of
    # `to_sql` (the mirror's SQLite) and of the index's filtered queries.
    store = open_store(embedded_settings())
    atts = [attempt(i, techniques=(("online-softmax",), ("tensor-cores", "smem-tiling"), ())[i % 3],
                    ms=(0.2, 0.5, None)[i % 3], verdict=("correct", "correct", "incorrect")[i % 3],
                    bound=("memory", "compute")[i % 2]) for i in range(30)]
    store.record_attempts(atts)
    store.sync()
    filters = [
        {"verdict": "correct"}, {"verdict": {"$ne": "correct"}}, {"speedup": {"$gte": 3.0}},
        {"speedup": {"$lt": 3}}, {"techniques": {"$contains": "tensor-cores"}},
        {"techniques": {"$not_contains": "online-softmax"}}, {"bottleneck": {"$in": ["compute", "launch"]}},
        {"bottleneck": {"$nin": ["compute"]}}, {"median_ms": {"$lte": 0.2}},
        {"$and": [{"verdict": "correct"}, {"bottleneck": "memory"}]},
        {"$or": [{"speedup": {"$gt": 4}}, {"techniques": {"$contains": "smem-tiling"}}]},
        {"has_parent": False}, {"has_parent": {"$ne": True}}, {"family": "matmul"}, {"created": {"$gt": 0}},
        {"speedup": {"$in": [1.0, 2.0, 3.0]}}, {"no such key": {"$ne": "x"}}, {"no such key": "x"},
    ]
    q = store.embedder.embed_one("softmax kernel")
    with store.vectors.session():
        store.vectors.ready()
        index, mirror = store.vectors._cols["attempts"], store.vectors._mirror
        lean = index.get(include=["metadatas", "documents", "embeddings"])
        assert lean["metadatas"] == [None] * 30 and lean["documents"] == [None] * 30  # vectors only
        metas = mirror.get("attempts", lean["ids"])
        judge = store.vectors._client.get_or_create_collection("judge", metadata={"hnsw:space": "cosine"},
                                                               embedding_function=None)
        judge.add(ids=lean["ids"], embeddings=lean["embeddings"], metadatas=[metas[i] for i in lean["ids"]])
        for where in filters:
            expected = set(judge.get(where=where)["ids"])
            assert {i for i, m in metas.items() if matches(where, m)} == expected, where
            assert set(mirror.select("attempts", where)) == expected, where
            hits = store.vectors.query("attempts", q, 5, where)
            assert [h.id for h in hits] == judge.query(query_embeddings=[q], n_results=5,
                                                       where=where)["ids"][0][: len(hits)], where


def test_sparse_filters_search_every_match_unless_told_not_to(open_store, embedded_settings, monkeypatch):
    from skillbase.memory import vectors as memory_vectors

    store = open_store(embedded_settings())
    # 2 correct attempts among 20; the overfetch steps shrunk to 3 then 6 ids
    recorded = store.record_attempts([attempt(i, verdict="correct" if i in (4, 17) else "incorrect",
                                              ms=0.3 if i in (4, 17) else None) for i in range(20)])
    correct = {recorded[4].id, recorded[17].id}
    store.sync()  # indexing follows writes in the background; this test reads chroma directly
    monkeypatch.setattr(memory_vectors, "OVERFETCH", (3, 6))
    with store.vectors.session():
        store.vectors.ready()
        e = store.embedder.embed_one("softmax kernel")
        col = store.vectors._cols["attempts"]

        def nearest(n):
            return col.query(query_embeddings=[e], n_results=n, include=["distances"])["ids"][0]

        full = store.vectors.query("attempts", e, 2, {"verdict": "correct"})
        assert {h.id for h in full} == correct  # every match, selected in the mirror, searched by chroma
        assert [h.id for h in full] == [i for i in nearest(20) if i in correct]
        assert all(h.document.startswith(h.metadata["task"]) for h in full)  # texts from the mirror
        assert store.vectors.query("attempts", e, 2, {"verdict": "no such verdict"}) == []
        lean = store.vectors.query("attempts", e, 2, {"verdict": "correct"}, exhaustive=False)
        assert [h.id for h in lean] == [i for i in nearest(6) if i in correct]  # only what the 6 nearest hold
        assert len(lean) < len(full)
        assert [h.id for h in store.vectors.query("attempts", e, 4, None, documents=False)] == nearest(4)


def test_indexing_failure_never_loses_an_attempt(make_settings, open_store, tmp_path):
    broken = make_settings(embedding_model=str(tmp_path / "no-such-model"))
    store = Store.open(broken)
    a = store.record_attempt(attempt(0))  # answered once committed: indexing follows in the background
    assert store.get_attempt(a.id) == a
    with pytest.raises(StoreError, match="cannot load the embedding model"):
        store.search("attempts", "softmax")
    assert store.stats().index_lag > 0
    with pytest.warns(MemoryIndexWarning, match="catch up later"):
        store._follower.wait(lambda: False, 60)  # the follower's next round fails the same way and says so
    store.close()
    with pytest.warns(MemoryIndexWarning, match="embedding model"):
        healed = open_store(make_settings())  # same home, working model: catches up on open
    assert healed.stats().index_lag == 0
    assert [h.id for h in healed.search("attempts", "softmax row kernel")] == [a.id]


def test_a_change_of_embedding_precision_indexes_the_store_again(embedded_settings, open_store):
    """int8 and fp32 vectors never share an index: the index records which model's vectors it holds
    and is built again from the ledger when the settings ask for the other, losing nothing."""
    from skillbase.memory.embeddings import Embedder

    settings = embedded_settings()
    store = open_store(settings)  # int8, the default (the session's embedder)
    kept = [store.record_attempt(attempt(i)).id for i in range(3)]
    assert store.stats().embedding_model == "all-MiniLM-L6-v2@int8"
    store.close()
    fp32 = embedded_settings(embedding_precision="fp32")
    with pytest.raises(ConfigError, match="the settings ask for 'all-MiniLM-L6-v2'"):
        Store.open(fp32, embedder=Embedder())  # an int8 embedder for a store that asks for fp32
    with pytest.warns(MemoryIndexWarning, match="built with embedding model 'all-MiniLM-L6-v2@int8'"):
        floats = Store.open(fp32, embedder=Embedder(precision="fp32"))
    try:
        assert floats.stats().embedding_model == "all-MiniLM-L6-v2" and floats.stats().index_lag == 0
        assert sorted(h.id for h in floats.search("attempts", "softmax row kernel", k=10)) == sorted(kept)
    finally:
        floats.close()


def test_a_write_never_waits_for_the_index_lock(embedded_settings, open_store):
    settings = embedded_settings()
    store = open_store(settings)
    first = store.record_attempt(attempt(0))
    done: list = []
    with FileLock(str(settings.home / "index.lock")):  # as another process mid catch-up holds it
        writer = threading.Thread(target=lambda: done.append(store.record_attempt(attempt(1, parent=first.id))))
        writer.start()
        writer.join(60)
        assert not writer.is_alive() and done, "the write waited for the index lock"
        assert store.vectors.peek_seq() < store.ledger.max_seq(), "the write left the index to whoever holds the lock"
    assert store.get_attempt(done[0].id) == done[0]
    # Another caller's write (the writer thread's) reaches this caller's search within a
    # second of the lock's release: the follower indexes it, or the search waits once it is 1 s old.
    deadline = time.monotonic() + 1.5
    while {h.id for h in store.search("attempts", "softmax row kernel", k=5)} != {first.id, done[0].id}:
        assert time.monotonic() < deadline, "another caller's write never reached the index"
        time.sleep(0.05)
    while store.stats().index_lag:  # found from the fresh tail, or indexed already; indexed within the bound
        assert time.monotonic() < deadline, "the follower never indexed the write"
        time.sleep(0.05)


def test_deleting_chroma_dir_rebuilds_it(embedded_settings, open_store):
    settings = embedded_settings()
    store = open_store(settings)
    ids = [a.id for a in store.record_attempts([attempt(i) for i in range(5)])]
    store.record_experience(lesson("row softmax wants one pass"))
    store.close()
    shutil.rmtree(settings.chroma_dir)
    with warnings.catch_warnings():
        warnings.simplefilter("error", MemoryIndexWarning)  # a missing index is rebuilt silently
        store = open_store(settings)
    assert store.stats().index_counts == {"experiences": 1, "skills": 0, "attempts": 5}
    assert {h.id for h in store.search("attempts", "softmax", k=10)} == set(ids)
    assert store.reindex() == 6


def test_reindex_replaces_the_collections(open_store, make_settings):
    store = open_store(make_settings())
    store.record_attempts([attempt(i) for i in range(4)])
    assert store.reindex() == 4
    assert store.stats().index_counts["attempts"] == 4 and len(store.search("attempts", "softmax", k=10)) == 4


def test_collections_get_a_denser_graph_and_an_older_store_keeps_its_own_until_reindexed(
        open_store, make_settings, monkeypatch):
    # With 32 links a node built from 200 candidates (chroma's defaults: 16 and 100) chroma's graph leaves
    # near-duplicate records out of every search's reach far less often (vectors.COLLECTION_METADATA).
    # chroma keeps a collection's graph settings from its creation: an older store opens as it is, and
    # `reindex` makes its collections again with the denser graph.
    def graphs(store) -> set[tuple[int, int]]:
        store.search("attempts", "softmax", k=1)  # the index open
        return {(col.configuration["hnsw"]["max_neighbors"], col.configuration["hnsw"]["ef_construction"])
                for col in store.vectors._cols.values()}

    fresh = open_store(make_settings("fresh"))
    assert graphs(fresh) == {(32, 200)}
    fresh.close()

    settings = make_settings("older")
    denser = vectors.COLLECTION_METADATA
    monkeypatch.setattr(vectors, "COLLECTION_METADATA", {"hnsw:space": "cosine"})  # what older releases made
    store = open_store(settings)
    ids = {a.id for a in store.record_attempts([attempt(i) for i in range(4)])}
    store.sync()
    assert graphs(store) == {(16, 100)}
    store.close()
    monkeypatch.setattr(vectors, "COLLECTION_METADATA", denser)
    store = open_store(settings)
    assert graphs(store) == {(16, 100)}
    assert {h.id for h in store.search("attempts", "softmax", k=10)} == ids
    stats = store.stats()  # what `skillbase memory stats` says of it
    assert stats.index_graphs["attempts"] == {"links": 16, "candidates": 100}
    assert stats.index_sparser == ["attempts", "experiences", "skills"]
    assert store.reindex() == 4
    assert graphs(store) == {(32, 200)}
    assert {h.id for h in store.search("attempts", "softmax", k=10)} == ids
    stats = store.stats()
    assert stats.index_graphs["attempts"] == {"links": 32, "candidates": 200} and stats.index_sparser == []


def test_an_index_of_the_older_layout_is_rebuilt_once(embedded_settings, open_store):
    import sqlite3

    settings = embedded_settings()
    store = open_store(settings)
    ids = {a.id for a in store.record_attempts([attempt(i) for i in range(6)])}
    store.sync()
    store.close()
    # What an older release left: no layout in the bookkeeping, no texts beside the metadata.
    with sqlite3.connect(settings.chroma_dir / "skillbase-index.sqlite3") as old:
        old.execute("DELETE FROM state WHERE key='format'")
        old.execute("DROP TABLE docs")
    with pytest.warns(MemoryIndexWarning, match="older release"):
        store = open_store(settings)
        hits = store.search("attempts", "softmax", k=10)
    assert {h.id for h in hits} == ids and all(h.document for h in hits)
    assert not list(settings.home.glob("chroma.broken-*")), "an outdated layout is not damage: nothing kept aside"
    store.close()
    with warnings.catch_warnings():
        warnings.simplefilter("error", MemoryIndexWarning)  # once
        store = open_store(settings)
        assert {h.id for h in store.search("attempts", "softmax", k=10)} == ids


@pytest.mark.parametrize("damage", ["garbage", "truncated", "bookkeeping"])
def test_corrupted_chroma_dir_is_rebuilt_with_a_warning(embedded_settings, open_store, damage):
    settings = embedded_settings()
    store = open_store(settings)
    ids = {a.id for a in store.record_attempts([attempt(i) for i in range(40)])}
    store.close()
    db = settings.chroma_dir / "chroma.sqlite3"
    if damage == "garbage":
        db.write_bytes(b"\x00garbage" * 4096)
    elif damage == "truncated":  # a copy cut short, as a full disk leaves it
        db.write_bytes(db.read_bytes()[: db.stat().st_size // 3])
    else:
        (settings.chroma_dir / "skillbase-index.sqlite3").write_bytes(b"not sqlite" * 100)
    with pytest.warns(MemoryIndexWarning, match="rebuilt from the ledger"):
        store = open_store(settings)
        found = {h.id for h in store.search("attempts", "softmax", k=50)}
    assert found == ids
    assert list(settings.home.glob("chroma.broken-*")), "the damaged directory is kept aside for inspection"


def test_a_writer_dead_mid_write_is_verified_and_caught_up(embedded_settings, open_store):
    settings = embedded_settings()
    store = open_store(settings)
    first = store.record_attempts([attempt(i) for i in range(3)])
    with store.vectors.session():
        store.vectors.ready()
        store.vectors.begin_write()  # the writer dies right here: chroma marked dirty, seq not advanced
    late = store.ledger.record_attempts([attempt(9)])  # committed to the ledger, never indexed
    store.close()
    with warnings.catch_warnings():
        warnings.simplefilter("error", MemoryIndexWarning)  # chroma reads back fine: no rebuild
        store = open_store(settings)
    with store.vectors.session():
        assert store.vectors.ready()["dirty"] == "0"
    assert store.stats().index_lag == 0
    assert {h.id for h in store.search("attempts", "softmax", k=10)} == {a.id for a in first + late}


def test_graph_learns_values_lineages_and_transitions(open_store, embedded_settings):
    store = open_store(embedded_settings())
    # A lesson about a task class arrives before any attempt of that class.
    store.record_experience(lesson("curated: fuse max and sum", after=None, gain=1.4))
    root = store.record_attempt(attempt(0, ms=1.0))
    fast = store.record_attempt(attempt(1, parent=root.id, techniques=("online-softmax",), ms=0.5))
    faster = store.record_attempt(attempt(2, parent=fast.id, techniques=("online-softmax", "num_warps"), ms=0.4))
    slow = store.record_attempt(attempt(3, parent=root.id, techniques=("vectorization",), ms=1.25))
    broken = store.record_attempt(attempt(4, parent=root.id, techniques=("smem tiling",), verdict="incorrect", ms=None))
    store.record_attempt(attempt(5, task="other_softmax", signature="softmax:fp16:small"))
    exp = store.record_experience(lesson("one pass", before=root.id, after=fast.id, gain=2.0))
    store.put_skill(Skill(name="one-pass", description="d; use when x.", techniques=["online-softmax"]), author="a", reason="r")
    store.record_feedback(Feedback(item_kind="skill", item_id="one-pass", used=True, attempt_id=faster.id, improved=True))

    g = store.graph
    values = {v.technique: v for v in g.technique_values(task_class="softmax:fp32:large", bottleneck="memory", arch="sm_90")}
    assert set(values) == {"online-softmax", "num-warps-tuning", "vectorized-access", "smem-tiling"}
    # the measured step (2.0x) and the curated lesson without an attempt (1.4x)
    assert values["online-softmax"].tries == 2
    assert math.isclose(values["online-softmax"].expected_gain, math.sqrt(2.0 * 1.4))
    assert math.isclose(values["num-warps-tuning"].expected_gain, 1.25)
    assert values["vectorized-access"].successes == 0 and values["vectorized-access"].expected_gain < 1
    assert (values["smem-tiling"].tries, values["smem-tiling"].timed, values["smem-tiling"].score) == (1, 0, -1.0)
    ranked = g.technique_values(family="softmax")
    assert ranked[0].technique == "online-softmax" and ranked[-1].technique == "smem-tiling"
    assert g.technique_values(task_class="softmax:fp32:large", arch="sm_80") == []

    after = g.transitions_from("online-softmax")
    assert [(t.technique, round(t.expected_gain, 3)) for t in after] == [("num-warps-tuning", 1.25)]
    best = g.best_lineages(family="softmax", k=2)
    assert best[0].attempt_id == faster.id
    assert [s.attempt_id for s in best[0].steps] == [root.id, fast.id, faster.id]
    assert [s.gain for s in best[0].steps][1:] == pytest.approx([2.0, 1.25])
    assert [s.techniques for s in best[0].steps][1:] == [["online-softmax"], ["num-warps-tuning"]]
    assert [e.id for e in g.experiences_for_technique("online-softmax")][0] == exp.id
    assert [s.name for s in g.skills_for_technique("online-softmax")] == ["one-pass"]
    assert g.similar_tasks("row_softmax") == [("other_softmax", 0.5)]
    assert g.feedback("skill", "one-pass") == {"n": 1, "used": 1, "improved": 1}
    counts = g.counts()
    assert counts["attempt"] == 6 and counts["edge:derived-from"] == 4 and counts["experience"] == 2


def test_technique_values_are_kept_until_a_value_changes(open_store, embedded_settings):
    store = open_store(embedded_settings())
    root = store.record_attempt(attempt(0, ms=1.0))
    store.record_attempt(attempt(1, parent=root.id, techniques=("online-softmax",), ms=0.5))
    g = store.graph
    first = g.technique_values(family="softmax")
    assert [(v.technique, v.tries) for v in first] == [("online-softmax", 1)]
    with pytest.raises(ValidationError):
        first[0].tries = 5  # shared between callers: frozen
    # A lesson without techniques changes no value: the same answer, not recomputed.
    store.record_experience(lesson("no technique named", techniques=(), gain=None))
    again = store.graph.technique_values(family="softmax")
    assert again == first and again[0] is first[0]
    # Each kind of record that counts a value makes the next answer new.
    store.record_attempt(attempt(2, parent=root.id, techniques=("online-softmax",), ms=0.8))
    assert [(v.technique, v.tries) for v in store.graph.technique_values(family="softmax")] == [("online-softmax", 2)]
    store.record_experience(lesson("curated: fuse max and sum", after=None, gain=1.4))
    assert store.graph.technique_values(family="softmax")[0].tries == 3


def test_graph_snapshot_round_trip_and_refusal(embedded_settings, open_store):
    settings = embedded_settings()
    store = open_store(settings)
    root = store.record_attempt(attempt(0, ms=1.0))
    store.record_attempt(attempt(1, parent=root.id, techniques=("online-softmax",), ms=0.5))
    before = store.graph.technique_values(family="softmax")
    counts = store.graph.counts()
    store.close()
    assert settings.graph_path.exists()
    store = open_store(settings)
    assert store.stats().snapshot_seq == store.seq
    assert store.graph.technique_values(family="softmax") == before and store.graph.counts() == counts
    store.close()
    other = embedded_settings("other-home")
    shutil.copy(settings.graph_path, other.graph_path.parent.mkdir(parents=True) or other.graph_path)
    s2 = open_store(other)
    with pytest.warns(MemoryIndexWarning, match="another store"):
        assert s2.graph.counts()["technique"] >= 40 and "attempt" not in s2.graph.counts()


def test_technique_lessons_by_family_stay_ordered_as_lessons_arrive(embedded_settings, open_store):
    settings = embedded_settings()
    store = open_store(settings)
    store.graph  # loaded before the writes; every access catches it up with the ledger
    a = store.record_experience(lesson("softmax a", techniques=("cache-hints",), gain=1.2))
    b = store.record_experience(lesson("norm b", techniques=("cache-hints", "online-softmax"), gain=1.5,
                                       family="norm", signature="norm:fp32:large"))
    assert [e.id for e in store.graph.experiences_for_technique("cache-hints")] == [b.id, a.id]
    assert [e.id for e in store.graph.experiences_for_technique("cache-hints", family="softmax")] == [a.id]
    assert store.graph.experiences_for_technique("cache-hints", family="matmul") == []
    # lessons recorded after the first lookup land in the index, in order
    c = store.record_experience(lesson("softmax c", techniques=("cache-hints",), gain=2.0))
    d = store.record_experience(lesson("softmax d (no gain)", techniques=("cache-hints",), gain=None))
    assert [e.id for e in store.graph.experiences_for_technique("cache-hints", family="softmax")] == [c.id, a.id, d.id]
    assert [e.id for e in store.graph.experiences_for_technique("cache-hints", k=2)] == [c.id, b.id]
    assert [e.id for e in store.graph.experiences_for_technique("online-softmax", family="norm")] == [b.id]
    store.close()
    store = open_store(settings)  # from the snapshot: the index is rebuilt on first use
    assert [e.id for e in store.graph.experiences_for_technique("cache-hints")] == [c.id, b.id, a.id, d.id]
    store.close()


def test_a_pinned_seq_holds_for_its_thread_until_it_writes(open_store, embedded_settings):
    store = open_store(embedded_settings())
    store.record_attempt(attempt(0, ms=1.0))
    start = store.seq
    with store.ledger.pinned_seq() as pinned:
        assert pinned == start
        writer = threading.Thread(target=lambda: store.record_attempt(attempt(1, ms=0.9)))
        writer.start()
        writer.join()
        assert store.seq == start  # this thread's view: one seq for the whole block
        assert store.ledger.committed_seq() > start  # the other thread's write is committed
        seen = {}
        reader = threading.Thread(target=lambda: seen.update(seq=store.seq))
        reader.start()
        reader.join()
        assert seen["seq"] == store.ledger.committed_seq()  # a pin is its own thread's only
        with store.ledger.pinned_seq() as inner:
            assert inner == start  # nested: the outer block's seq
        store.record_attempt(attempt(2, ms=0.8))  # a write ends the pin: its own change is seen
        assert store.seq == store.ledger.committed_seq() == start + 2


def test_index_mirror_keeps_decoded_metadata_and_answers_only_while_nothing_was_written(tmp_path):
    from skillbase.memory.vectors import Mirror

    m = Mirror(tmp_path / "mirror.sqlite3")
    m.put("skills", ["a", "b"], [{"v": 1}, {"v": 2}], ["text a", "text b"])
    assert m.get("skills", ["a", "b", "zz"]) == {"a": {"v": 1}, "b": {"v": 2}}
    assert m.documents("skills", ["b", "zz"]) == {"b": "text b"}
    first = m.get("skills", ["a"])["a"]
    assert m.get("skills", ["a"])["a"] is first  # decoded once, then kept
    m.put("skills", ["a"], [{"v": 3}], [""])
    assert m.get("skills", ["a"]) == {"a": {"v": 3}}
    m.delete("skills", ["b"])
    assert m.get("skills", ["b"]) == {}

    # A read that raced a write keeps nothing: the write commits between the SELECT and the
    # moment the decoded rows would be kept.
    real_read = m._read

    def racing_read(sql, params=()):
        rows = real_read(sql, params)
        if "FROM meta" in sql:
            m.put("skills", ["c"], [{"v": "new"}], [""])
        return rows

    m.put("skills", ["c"], [{"v": "old"}], [""])
    m._metas.clear()
    m._read = racing_read
    assert m.get("skills", ["c"]) == {"c": {"v": "old"}}  # what the SELECT saw
    m._read = real_read
    assert m.get("skills", ["c"]) == {"c": {"v": "new"}}  # not the stale row

    # Kept query answers: valid until their own collection is written.
    key = ("skills", b"vec", 5, None, False, False)
    writes = m.stamp("skills")
    m.keep_answer(key, writes, ["hit"])
    assert m.answer(key) == ["hit"]
    m.put("experiences", ["e"], [{"v": 1}], [""])
    assert m.answer(key) == ["hit"]  # another collection's write changes nothing here
    m.put("skills", ["d"], [{"v": 4}], [""])
    assert m.answer(key) is None
    m.keep_answer(key, writes, ["stale"])  # computed before that write: not kept
    assert m.answer(key) is None
    m.keep_answer(key, m.stamp("skills"), ["fresh"])
    never_written = ("attempts", b"vec", 5, None, False, False)
    before_forget = m.stamp("attempts")
    m.forget()  # another process wrote
    assert m.answer(key) is None and m._metas == {}
    m.keep_answer(never_written, before_forget, ["stale"])  # read before the forget: not kept either
    assert m.answer(never_written) is None
    m.close()


def test_search_answers_again_from_memory_until_its_collection_changes(open_store, embedded_settings):
    store = open_store(embedded_settings())
    store.record_experience(lesson("splitting rows across two programs halved the time"))
    text = "rows too wide for registers"
    first = store.search("experiences", text, k=3, documents=False)
    calls = []
    col = store.vectors._cols["experiences"]
    real = col.query

    def counting(*a, **kw):
        calls.append(1)
        return real(*a, **kw)

    col.query = counting
    try:
        again = store.search("experiences", text, k=3, documents=False)
        assert [h.id for h in again] == [h.id for h in first] and calls == []  # answered from memory
        again[0].metadata["mutated"] = True  # callers get copies
        assert "mutated" not in store.search("experiences", text, k=3, documents=False)[0].metadata
        new = store.record_experience(lesson("rows wider than the register file: split each row in two"))
        found = store.search("experiences", text, k=3, documents=False)
        if store.vectors.peek_seq() < store.ledger.max_seq():  # not indexed yet: the kept answer and the fresh tail
            assert calls == [] and new.id in [h.id for h in found]
        store.sync()
        found = store.search("experiences", text, k=3, documents=False)
        assert calls and new.id in [h.id for h in found]  # the collection changed: chroma asked again
    finally:
        col.query = real


def test_fresh_writes_are_searched_from_memory_as_the_index_will_answer(open_store, embedded_settings):
    # This process's writes not yet indexed answer searches from memory (exact cosine, the same
    # filter semantics), merged with the index's hits: the answers equal the index's once it has them.
    settings = embedded_settings()
    store = open_store(settings)
    notes = ["rows of 4k columns", "one warp per row", "vectorized loads of four floats", "rows split over two programs",
             "a running max kept in registers", "the sum rescaled as the max grows"]
    older = [store.record_attempt(attempt(i, techniques=("online softmax",) if i % 2 else (), notes=notes[i]))
             for i in range(4)]
    store.record_experience(lesson("Indexed already: a two pass softmax reads each row twice"))
    store.sync()
    queries = [("attempts", "softmax row kernel", 3, None),
               ("attempts", "softmax row kernel", 10, {"techniques": {"$contains": "online-softmax"}}),
               ("attempts", "tiled matrix multiplication", 2, {"family": "matmul"}),
               ("experiences", "one pass over each softmax row", 5, None),
               ("experiences", "one pass over each softmax row", 5, {"family": "reduction"})]
    with FileLock(str(settings.home / "index.lock")):  # nothing more gets indexed meanwhile
        fresh = [store.record_attempt(attempt(10 + i, parent=older[0].id, techniques=("online softmax",),
                                              notes=notes[4 + i])) for i in range(2)]
        fresh.append(store.record_attempt(attempt(20, base=MATMUL_SRC, task="gemm", signature="matmul:fp16:large")))
        exp = store.record_experience(lesson("A running max and rescaled sum read each softmax row once"))
        red = store.record_experience(lesson("Reduce each row in registers", family="reduction",
                                             signature="reduction:fp32:large"))
        assert store.vectors.peek_seq() < store.ledger.max_seq()
        early = [store.search(c, q, k=k, where=w) for c, q, k, w in queries]
        lean = store.search("attempts", "softmax row kernel", k=3, documents=False)
    new_ids = {a.id for a in fresh} | {exp.id, red.id}
    assert new_ids <= {h.id for hits in early for h in hits}  # each found before it was indexed
    assert early[2][0].id == fresh[2].id and [h.id for h in early[4]] == [red.id]
    assert [h.id for h in lean] == [h.id for h in early[0]] and not any(h.document for h in lean)
    store.sync()
    assert store.vectors.peek_seq() == store.ledger.max_seq()
    late = [store.search(c, q, k=k, where=w) for c, q, k, w in queries]
    for before, after in zip(early, late):
        assert [h.id for h in before] == [h.id for h in after]
        assert [h.metadata for h in before] == [h.metadata for h in after]
        assert [h.document for h in before] == [h.document for h in after]
        assert [h.distance for h in before] == pytest.approx([h.distance for h in after], abs=1e-4)


SPILL_QUERY = "rows that spill registers are split over two programs"


def _indexed_store(open_store, embedded_settings):
    """A store whose index holds its one lesson: (settings, store)."""
    settings = embedded_settings()
    store = open_store(settings)
    store.record_experience(lesson("Indexed already: a two pass softmax reads each row twice"))
    store.sync()
    return settings, store


def _search_from_another_caller(store) -> list[str]:
    """Lesson ids a search for SPILL_QUERY finds from a thread with no writes of its own."""
    found: list[list[str]] = []
    other = threading.Thread(target=lambda: found.append(
        [h.id for h in store.search("experiences", SPILL_QUERY, k=5)]))
    other.start()
    other.join(30)
    assert found, "the search did not answer"
    return found[0]


def test_a_search_beside_a_commit_still_finds_every_fresh_write(open_store, embedded_settings):
    # A search from another caller that lands between a write's ledger commit and the write's
    # return must still answer for every pending write from memory: the committing write's
    # document is known before its commit.
    settings, store = _indexed_store(open_store, embedded_settings)
    found: list[list[str]] = []
    with FileLock(str(settings.home / "index.lock")):  # nothing more gets indexed meanwhile
        first = store.record_experience(lesson("Rows that spill registers: split each row over two programs"))
        real = store.ledger.record_experiences

        def committing(exps):
            out = real(exps)  # durable: every search of the process sees its change from here on
            found.append(_search_from_another_caller(store))
            return out

        store.ledger.record_experiences = committing
        try:
            store.record_experience(lesson("Vectorized loads of four floats halve the instructions"))
        finally:
            del store.ledger.record_experiences
    assert found and first.id in found[0]


def test_a_catch_up_beside_a_write_keeps_its_document_for_the_fresh_tail(open_store, embedded_settings):
    # The follower finding the index caught up drops the kept documents of indexed writes. A write
    # that has kept its document but not committed yet must keep it: once its change lands, a search
    # of another caller answers for it from memory. Dropped, every pending write was missing from
    # other callers' searches until the follower indexed them (one probe lesson 1.9 s late at 16
    # clients); the old code dropped it here.
    settings, store = _indexed_store(open_store, embedded_settings)
    real = store.ledger.record_experiences

    def caught_up_first(exps):
        assert store.vectors.peek_seq() == store.ledger.max_seq()
        store.sync()  # the follower's round between this write's kept document and its commit
        return real(exps)

    with FileLock(str(settings.home / "index.lock")):  # then nothing more gets indexed
        store.ledger.record_experiences = caught_up_first
        try:
            written = store.record_experience(lesson("Rows that spill registers: split each row over two programs"))
        finally:
            del store.ledger.record_experiences
        assert store.vectors.peek_seq() < store.ledger.max_seq()
        assert written.id in _search_from_another_caller(store)


def test_a_rederived_task_is_searched_under_its_new_class(open_store, embedded_settings):
    # A write's kept document (what the indexer and fresh searches use instead of reading it back)
    # names the task's class when it was written; moving the task to another class must not index
    # or answer that stale copy.
    settings = embedded_settings()
    store = open_store(settings)
    store.record_task(_task())
    store.record_experience(lesson("an indexed lesson so the index exists"))
    store.sync()
    text = "Split each row over two programs once it spills out of registers"
    lock = FileLock(str(settings.home / "index.lock"))
    lock.acquire()  # nothing is indexed: the lesson stays a kept document
    try:
        exp = store.record_experience(lesson(text).model_copy(update={"task": "row_softmax"}))
        moved = _task().model_copy(update={"family": "reduction"})
        seq = store.ledger.max_seq()
        rederive = threading.Thread(target=store.rederive_task, args=(moved,))
        rederive.start()
        deadline = time.monotonic() + 10
        while store.ledger.max_seq() == seq:  # its commit is in; its catch-up waits for the lock
            assert time.monotonic() < deadline, "the task was never moved"
            time.sleep(0.01)
    finally:
        lock.release()
    rederive.join(60)
    hits = store.search("experiences", text, k=3, where={"family": "reduction"})
    assert [h.id for h in hits] == [exp.id] and hits[0].metadata["family"] == "reduction"
    assert not store.search("experiences", text, k=3, where={"$and": [{"family": "softmax"}, {"task": "row_softmax"}]})


def _two_servers_of_one_store(open_store, embedded_settings, monkeypatch):
    """Two stores over one home in this process, as two server processes would hold it (each its own
    kept documents and embedder memory; one cache file, one index), whose followers never start a
    round on their own: the test runs their rounds."""
    import skillbase.memory.store as store_module

    monkeypatch.setattr(store_module, "FOLLOW_GATHER_S", 600.0)
    settings, first = _indexed_store(open_store, embedded_settings)
    return first, open_store(settings)


def test_two_processes_embed_each_others_lessons_once(open_store, embedded_settings, monkeypatch):
    # Every follower embedded every pending write of the store, its process's or not, before trying
    # the index lock: with two server processes each lesson went through the model twice (a server's
    # follower at 2.7 ms of CPU a call against 0.3). Each now embeds its own and leaves the other's
    # to its writer, whose vectors the shared cache file then hands to whoever indexes.
    from skillbase.memory.follower import AGAIN_LATER

    a, b = _two_servers_of_one_store(open_store, embedded_settings, monkeypatch)
    mine = a.record_experience(lesson("Server A: unroll the K loop twice to hide the load latency"))
    theirs = b.record_experience(lesson("Server B: stage the bias in shared memory once per block"))
    computed = a.embedder.computed  # the two stores share the model: texts it embedded, both counted
    assert a._follow() == AGAIN_LATER, "A's round should leave B's lesson to B"
    assert a.embedder.computed == computed + 1 and a.vectors.peek_seq() < a.ledger.max_seq()
    assert b._follow() is False  # A's lesson is in the cache file now: B embeds its own and indexes both
    assert a.embedder.computed == computed + 2, "a lesson went through the model twice"
    assert b.vectors.peek_seq() == b.ledger.max_seq()
    assert {h.id for h in a.search("experiences", "unroll the K loop; stage the bias", k=5)} >= {mine.id, theirs.id}


def test_a_writer_that_never_embeds_is_not_waited_for_long(open_store, embedded_settings, monkeypatch):
    # The other process's writer may be gone (killed after its commit) or far behind: after
    # WRITER_GRACE_S the follower embeds its records itself; a round a reader waits for never leaves them.
    import skillbase.memory.store as store_module
    from skillbase.memory.follower import AGAIN_LATER

    a, b = _two_servers_of_one_store(open_store, embedded_settings, monkeypatch)
    monkeypatch.setattr(store_module, "WRITER_GRACE_S", 0.2)
    gone = b.record_experience(lesson("Server B, killed after this commit: pad rows to a multiple of 16"))
    assert a._follow() == AGAIN_LATER
    time.sleep(0.25)
    assert a._follow() is False and a.vectors.peek_seq() == a.ledger.max_seq()
    late = b.record_experience(lesson("Server B again: fuse the scale into the epilogue"))
    a._follower.round_urgent = True  # as when a search waits for this round
    try:
        assert a._follow() is False and a.vectors.peek_seq() == a.ledger.max_seq()
    finally:
        a._follower.round_urgent = False
    found = {h.id for h in a.search("experiences", "pad rows to a multiple of 16; fuse the scale", k=5)}
    assert {gone.id, late.id} <= found


def test_a_search_answers_another_processes_pending_lessons_from_the_shared_cache(
        open_store, embedded_settings, monkeypatch):
    # Two server processes over one store write between each other's writes all the time. A search
    # gave up its fresh tail at the first write of another process and waited for the index: every
    # recall after its caller's own lesson waited for a catch-up (2 servers: recall p50 250 ms against
    # 155). Now another process's pending lesson is left out while young and not embedded yet, and
    # answered from the shared cache file once its writer has embedded it; the model never runs for it here.
    a, b = _two_servers_of_one_store(open_store, embedded_settings, monkeypatch)
    with FileLock(str(a.settings.home / "index.lock")):  # nothing gets indexed meanwhile
        answers: list = []

        def write_then_search():  # one caller of server A: its own write, then its search
            mine = a.record_experience(lesson("Server A: unroll the K loop twice to hide the load latency"))
            answers.append((mine.id, {h.id for h in a.search("experiences", "unroll the K loop", k=5)}))

        theirs = b.record_experience(lesson("Server B: unroll the N loop and keep the tile in registers"))
        caller = threading.Thread(target=write_then_search)
        caller.start()
        caller.join(5)
        assert answers, "the search waited for the index behind another process's pending write"
        mine, found = answers[0]
        assert mine in found and theirs.id not in found  # B's lesson: young, not embedded by B yet
        computed = a.embedder.computed
        # B's follower round embeds its lesson into the cache file, then waits for the index lock.
        rounds: list = []
        other = threading.Thread(target=lambda: rounds.append(b._follow()))
        other.start()
        deadline = time.monotonic() + 30
        while a.embedder.computed == computed:
            assert time.monotonic() < deadline, "B's follower never embedded its lesson"
            time.sleep(0.01)
        assert b.vectors.peek_seq() < b.ledger.max_seq()
        found = {h.id for h in a.search("experiences", "unroll the N loop and keep the tile in registers", k=5)}
        assert theirs.id in found and a.embedder.computed == computed + 2  # + the query, not B's lesson again
    other.join(30)
    assert rounds == [False] and b.vectors.peek_seq() == b.ledger.max_seq()


def _two_stores_on_a_chroma_server(open_store, tmp_path, chroma_server, monkeypatch):
    """Two stores over one home and one chroma server, as two server processes would hold it, whose
    followers never start a round on their own; the first's one lesson indexed and both stores'
    indexes open: (settings, a, b, that lesson)."""
    import skillbase.memory.store as store_module
    from skillbase.config import Settings

    monkeypatch.setattr(store_module, "FOLLOW_GATHER_S", 600.0)  # the test runs the indexing
    settings = Settings.from_env(env={}, home=tmp_path / "home", chroma_url=chroma_server)
    a, b = open_store(settings), open_store(settings)
    first = a.record_experience(lesson("Server A: a first lesson, so the index exists"))
    a._sync_index()
    a.search("experiences", "a first lesson", k=1)
    b.search("experiences", "a first lesson", k=1)
    return settings, a, b, first


@pytest.mark.chroma_server
def test_on_a_chroma_server_a_search_after_another_processes_write_takes_no_index_lock(
        open_store, tmp_path, chroma_server, monkeypatch):
    # A search that found the index written by another process took the index lock to drop its kept
    # answers and counts, and waited behind whatever write held the lock next. A chroma server is one
    # view for every client: after another process's finished write nothing needs the lock.
    settings, a, b, _ = _two_stores_on_a_chroma_server(open_store, tmp_path, chroma_server, monkeypatch)
    theirs = b.record_experience(lesson("Server B: stage the bias in shared memory once per block"))
    b._sync_index()
    assert a.vectors.peek_seq() == a.ledger.max_seq()  # indexed, by the other store
    with FileLock(str(settings.home / "index.lock")):  # as another process writing holds it
        found: list = []
        search = threading.Thread(target=lambda: found.append(
            {h.id for h in a.search("experiences", "stage the bias in shared memory", k=3)}))
        search.start()
        search.join(5)
        assert found, "the search waited for the index lock after another process's write"
        assert theirs.id in found[0]


@pytest.mark.chroma_server
def test_on_a_chroma_server_a_search_reads_beside_another_processes_write_in_progress(
        open_store, tmp_path, chroma_server, monkeypatch):
    # A search that met another process's write in progress (the index dirty under that writer's
    # generation) waited for the index lock behind the writer's whole batch: about one search in twenty
    # at two server processes, 100-240 ms each. It now reads beside the
    # write; what the half-written batch put in chroma but not yet in the mirror is not answered, and
    # nothing kept from before a write outlives it. A writer that died mid-write (dirty, lock free)
    # still sends the search the locked way, which checks that the index reads back.
    import skillbase.memory.store as store_module

    settings, a, b, first = _two_stores_on_a_chroma_server(open_store, tmp_path, chroma_server, monkeypatch)
    query = "keep the accumulator in registers across the K loop"
    vec = a.embedder.embed_one(query, max_tokens=store_module.TEXT_MAX_TOKENS)
    meta = a.vectors._mirror.get("experiences", [first.id])[first.id]
    probes: list = []
    monkeypatch.setattr(a.vectors, "_probe", lambda: probes.append(1))

    def search_now() -> set[str]:
        out: list = []
        t = threading.Thread(target=lambda: out.append({h.id for h in a.search("experiences", query, k=3)}))
        t.start()
        t.join(5)
        assert out, "the search waited for the index lock behind another process's write in progress"
        return out[0]

    with FileLock(str(settings.home / "index.lock")):  # B writing: it holds the lock throughout
        b.vectors._mirror.set_state(gen="write-1", dirty=1)
        b.vectors._cols["experiences"].upsert(ids=["half-written"], embeddings=[vec])  # in chroma, not the mirror yet
        assert search_now() == {first.id}
        # Write 1 ends and write 2 begins before A looks again: write 1's record is whole now.
        b.vectors._mirror.put("experiences", ["half-written"], [meta], ["keep the accumulator in registers"])
        b.vectors._mirror.set_state(gen="write-2", dirty=1)
        assert search_now() == {first.id, "half-written"}  # not the answer kept during write 1
    assert not probes
    # B died mid-write 2: the index is dirty and nobody holds its lock.
    assert search_now() == {first.id, "half-written"}
    assert probes, "a dirty index left by a dead writer was read without checking it"


class _Unreaching:
    """A chroma collection whose nearest-neighbour search never returns the ids in ``hidden`` (as chroma's
    HNSW graph does with a record it left without a way in), and records what it deletes."""

    def __init__(self, real, hidden: set[str], calls: list):
        self.real, self.hidden, self.calls = real, hidden, calls

    def __getattr__(self, name):
        return getattr(self.real, name)

    def query(self, **kw):
        return self.hide(self.real.query(**kw))

    def hide(self, got):
        for key in ("ids", "distances"):
            if got.get(key) is not None:
                got[key] = [[x for i, x in zip(ids, row) if i not in self.hidden]
                            for ids, row in zip(got["ids"], got[key])]
        return got

    def delete(self, **kw):
        self.calls.append(("delete", kw["ids"]))
        return self.real.delete(**kw)


def _store_with_an_index(open_store, settings):
    """A store whose vector index exists and holds one lesson."""
    store = open_store(settings)
    store.record_experience(lesson("a first lesson so the index exists"))
    store.search("experiences", "a first lesson", k=1)
    store._sync_index()
    return store


def test_a_record_chromas_search_does_not_reach_is_answered_from_the_mirror(open_store, make_settings, caplog):
    # Chroma's HNSW graph can leave a record no search reaches, even by its own vector (seen embedded and on
    # a chroma server; a server's record written again was found, an embedded one was not). Each write
    # checks its records are found; those that stay unreached are kept, with their vectors, in the mirror,
    # and every query adds them by exact cosine, in this process and any other over the store.
    settings = make_settings()
    store = _store_with_an_index(open_store, settings)
    hidden: set[str] = set()
    calls: list = []
    store.vectors._cols["experiences"] = _Unreaching(store.vectors._cols["experiences"], hidden, calls)

    def write(text):
        exp = lesson(text)
        hidden.add(exp.id)  # no search reaches it, from its first write on
        with caplog.at_level("DEBUG", logger="skillbase.memory"):
            out = store.record_experience(exp)
            store._sync_index()  # the index catches up: the write, and its check
        return out

    exp = write("Vectorize the loads four floats at a time on the row kernel")
    assert "does not reach 1 record(s) of experiences" in caplog.text
    # handled by the mirror, so a debug line only: a newcomer read the warning as corruption
    assert all(r.levelname == "DEBUG" for r in caplog.records if "does not reach" in r.getMessage())
    # On a chroma server it was written again twice first; embedded, writing again did not help.
    assert calls == ([("delete", [exp.id])] * 2 if store.vectors.mode == "server" else []), calls
    assert store.stats().index_unreached == {"experiences": 1}

    def ids(s, text, **kw):
        return [h.id for h in s.search("experiences", text, k=3, **kw)]

    assert exp.id in ids(store, "vectorize the loads four floats")
    assert exp.id not in ids(store, "vectorize the loads four floats", where={"task": "no-such-task"})
    other = open_store(settings)  # another process over the store, whose chroma does not reach it either
    with other.vectors.session():
        other.vectors.ready()
    other.vectors._cols["experiences"] = _Unreaching(other.vectors._cols["experiences"], hidden, calls)
    assert exp.id in ids(other, "vectorize the loads four floats")
    # Written again (a reindex, a restored record) and found this time: no longer kept apart.
    hidden.clear()
    doc = experience_doc(exp)
    with store.vectors.session():
        store.vectors.upsert([doc], store.embedder.embed([doc.text], max_tokens=doc.max_tokens))
    assert store.stats().index_unreached == {}
    assert exp.id in ids(store, "vectorize the loads four floats")


def _hide_from_every_search(monkeypatch) -> set[str]:
    """Ids that no chroma collection's nearest-neighbour search returns from now on, in every client
    (``_Unreaching`` for collections opened later too)."""
    from chromadb.api.models.Collection import Collection

    hidden: set[str] = set()
    real = Collection.query

    def query(self, *args, **kw):
        return _Unreaching(None, hidden, []).hide(real(self, *args, **kw))

    monkeypatch.setattr(Collection, "query", query)
    return hidden


def test_a_record_that_loses_its_way_in_later_is_found_by_a_later_writes_sweep(open_store, make_settings,
                                                                               monkeypatch):
    # A record found when written can lose its way in later (later inserts rewrite the HNSW graph's links):
    # writes look again for a few older records of their collection (at most once a second, here at every
    # write), from a cursor that goes round the collection in id order and is shared through the mirror by
    # every process over the store.
    monkeypatch.setattr(vectors, "SWEEP_BATCH", 2)
    monkeypatch.setattr(vectors, "SWEEP_EVERY_S", 0.0)
    settings = make_settings()
    store = _store_with_an_index(open_store, settings)
    texts = {store.record_experience(lesson(text)).id: text
             for text in (f"lesson number {n} on tiling the {w} loop"
                          for n, w in enumerate(["row", "column", "batch", "head", "block"]))}
    store._sync_index()
    hidden = _hide_from_every_search(monkeypatch)  # each process reopens its client after the other's writes
    other = open_store(settings)  # another process over the store; it writes too
    lost = sorted(texts)[-1]  # the last of the six in id order; later records come after it
    hidden.add(lost)
    store.vectors._mirror.set_state(**{"sweep.experiences": ""})  # the next sweep starts at the first record
    caught_after = None
    for n in range(6):  # two looked for again a write: the 5th and 6th at the third
        writer = (store, other)[n % 2]
        writer.record_experience(lesson(f"a later lesson, number {n}, on shared memory banks"))
        writer._sync_index()
        if store.stats().index_unreached and caught_after is None:
            caught_after = n + 1
    assert caught_after == 3, caught_after  # a few records a write, taking up where the other process stopped
    assert store.stats().index_unreached == {"experiences": 1}
    for s in (store, other):
        assert lost in {h.id for h in s.search("experiences", texts[lost], k=3)}


def test_memory_check_looks_for_every_record(open_store, make_settings, monkeypatch):
    monkeypatch.setattr(vectors, "SWEEP_BATCH", 0)  # writes look for no older record: only the check does
    store = _store_with_an_index(open_store, make_settings())
    old = [store.record_experience(lesson(f"lesson number {n} on unrolling the {w} loop"))
           for n, w in enumerate(["row", "column", "batch"])]
    store._sync_index()
    _hide_from_every_search(monkeypatch).add(old[1].id)
    store.record_experience(lesson("a later write, which looks for no older record"))
    store._sync_index()
    assert store.stats().index_unreached == {}  # lost its way after its write: nobody knows yet
    assert old[1].id not in {h.id for h in store.search("experiences", "lesson number 1 on unrolling the column loop", k=3)}
    first = store.check_index()
    assert first.looked_for["experiences"] == 5 and first.newly_unreached == {"experiences": 1}, first
    assert first.unreached == {"experiences": 1}
    assert old[1].id in {h.id for h in store.search("experiences", "lesson number 1 on unrolling the column loop", k=3)}
    gen = store.vectors._mirror.state()["gen"]
    again = store.check_index()  # the record kept apart is not looked for again
    assert again.looked_for["experiences"] == 4 and again.newly_unreached == {}, again
    # Finding nothing, it wrote nothing: other processes over the store keep their clients and answers.
    assert store.vectors._mirror.state()["gen"] == gen


def test_reindex_ends_by_looking_for_every_record(open_store, make_settings, monkeypatch):
    # A rebuild writes the whole ledger in batches; a record of an early batch can lose its way in during
    # the later ones. The rebuild ends with a full check.
    from skillbase.memory import indexer

    monkeypatch.setattr(vectors, "SWEEP_BATCH", 0)
    store = _store_with_an_index(open_store, make_settings())
    exp = store.record_experience(lesson("Keep the running max in a register across the row"))
    store._sync_index()
    hidden = _hide_from_every_search(monkeypatch)
    real = indexer.catch_up

    def catch_up_then_lose_one(*args, **kw):
        n = real(*args, **kw)
        hidden.add(exp.id)  # found when the rebuild wrote it, lost by the end of the rebuild
        return n

    monkeypatch.setattr(indexer, "catch_up", catch_up_then_lose_one)
    store.reindex()
    assert store.stats().index_unreached == {"experiences": 1}
    assert exp.id in {h.id for h in store.search("experiences", "keep the running max in a register", k=3)}


@pytest.mark.chroma_server
def test_a_record_the_chroma_server_leaves_out_of_its_search_is_written_again(
        open_store, tmp_path, chroma_server, caplog):
    # The chroma server was seen keeping a lesson just written (returned by id, with its vector) out of
    # every nearest-neighbour search, about one start in five of two workers. Each write now checks that
    # the search finds its records by their own vectors and writes any it does not again; there, that
    # made it found.
    from skillbase.config import Settings

    store = _store_with_an_index(open_store, Settings.from_env(env={}, home=tmp_path / "home", chroma_url=chroma_server))
    hidden: set[str] = set()
    calls: list = []

    class FoundOnceWrittenAgain(_Unreaching):
        def delete(self, **kw):
            hidden.difference_update(kw["ids"])
            return super().delete(**kw)

    store.vectors._cols["experiences"] = FoundOnceWrittenAgain(store.vectors._cols["experiences"], hidden, calls)
    exp = lesson("Vectorize the loads four floats at a time on the row kernel")
    hidden.add(exp.id)
    with caplog.at_level("DEBUG", logger="skillbase.memory"):
        store.record_experience(exp)
        store._sync_index()  # the index catches up: the write, and its check
    assert calls == [("delete", [exp.id])], calls
    assert "out of its search; writing them again" in caplog.text and "does not reach" not in caplog.text
    assert store.stats().index_unreached == {}
    assert exp.id in {h.id for h in store.search("experiences", "vectorize the loads four floats", k=3)}


def test_records_of_one_text_stored_again_and_again_are_not_taken_for_unreached(open_store, make_settings, caplog):
    # Records whose documents are the same text have the same vector: a record's four nearest may be
    # four of its twins at distance 0, which is not chroma leaving it out.
    store = open_store(make_settings())
    with caplog.at_level("DEBUG", logger="skillbase.memory"):
        for _ in range(8):
            store.record_experience(lesson("Stage the tile through shared memory with cp.async"))
        store._sync_index()  # one batch: each record's four nearest are four of the eight
    assert "does not reach" not in caplog.text and "out of its search" not in caplog.text
    assert store.stats().index_unreached == {}
