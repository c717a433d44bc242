"""Many callers on one store at once (a team server's tool calls): embeddings batched across
callers, writes committed together without loss or duplication, a lesson written by one
caller found by another's search at once (this process's writes not yet indexed answer from
memory), and searches that never wait for indexing."""

from __future__ import annotations

import contextvars
import threading
import time

import numpy as np
import pytest
from filelock import FileLock

from memory_factories import lesson
from skillbase.errors import InvalidInput
from skillbase.memory.batching import Batcher
from skillbase.memory.documents import experience_doc

pytestmark = pytest.mark.usefixtures("embedded_settings")


def _together(n: int, fn) -> list:
    """Run fn(i) in n threads released at once; returns results in order (re-raises the first error)."""
    out: list = [None] * n
    errors: list = []
    gate = threading.Barrier(n)

    def run(i):
        gate.wait()
        try:
            out[i] = fn(i)
        except BaseException as e:  # reported below, with the thread's index
            errors.append((i, e))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    if errors:
        raise errors[0][1]
    return out


def test_a_batcher_serves_concurrent_callers_with_fewer_calls():
    calls: list[list[int]] = []

    def slow_square(items):
        calls.append(list(items))
        time.sleep(0.05)  # long enough for the other threads to queue behind the first call
        return [x * x for x in items]

    b = Batcher(slow_square)
    got = _together(12, lambda i: b.submit([i, i + 100]))
    assert got == [[i * i, (i + 100) ** 2] for i in range(12)]
    assert len(calls) < 12 and b.stats.shared_calls >= 1 and b.stats.items == 24
    assert sorted(x for c in calls for x in c) == sorted([*range(12), *range(100, 112)])


def test_a_failing_batch_fails_each_caller_and_the_next_batch_runs():
    b = Batcher(lambda items: 1 / 0 if 0 in items else items)
    with pytest.raises(ZeroDivisionError):
        b.submit([0])
    assert b.submit([3, 4]) == [3, 4]


def test_concurrent_embeddings_share_model_calls_and_match_one_by_one(embedder):
    texts = [f"lesson {i}: rows of {256 * (i + 1)} floats fit in registers up to a point" for i in range(12)]
    expected = np.stack([embedder._m._encode([t], None)[0] for t in texts])
    before = embedder.batch_stats.calls
    got = _together(len(texts), lambda i: embedder._m.encode([texts[i]], None)[0])
    assert embedder.batch_stats.calls - before < len(texts), "every caller ran the model alone"
    np.testing.assert_allclose(np.stack(got), expected, atol=2e-5)


def test_the_same_text_asked_at_once_is_computed_once(embedder):
    # Searches that meet the same fresh lessons ask for their vectors together (no cache has them
    # yet): the model computes each distinct text once, in that batch or for the batches just after.
    texts = [f"fresh lesson {i}: keep the running max in a register across the row" for i in range(4)]
    model = embedder._m
    before = model.computed
    got = _together(12, lambda i: model.encode(texts, 128))  # 48 asks, 4 texts
    assert model.computed - before == len(texts)
    for vecs in got:
        np.testing.assert_array_equal(vecs, got[0])
    again = model.encode(texts[:2] + ["one new text about vectorized loads"], 128)
    assert model.computed - before == len(texts) + 1  # what the last batches computed is reused
    np.testing.assert_array_equal(again[:2], got[0][:2])


def test_concurrent_writers_lose_nothing_and_duplicate_nothing(embedded_settings, open_store):
    store = open_store(embedded_settings())
    group = store.ledger._group.stats
    calls_before = group.calls
    written = _together(16, lambda w: [store.record_experience(lesson(f"writer {w} lesson {i}")).id for i in range(4)])
    ids = [i for per in written for i in per]
    assert len(set(ids)) == 64
    stored = store.list_experiences(limit=1000)
    texts = [e.lesson for e in stored if e.lesson.startswith("writer ")]
    assert len(texts) == 64 and len(set(texts)) == 64
    assert {e.id for e in stored} >= set(ids)
    assert group.calls - calls_before < 64, "each write committed alone: no group commit"


def test_a_bad_write_in_a_group_commit_fails_alone(embedded_settings, open_store):
    store = open_store(embedded_settings())
    first = store.record_experience(lesson("the original text"))
    clash = first.model_copy(update={"lesson": "other text under the same id"})

    def write(i):
        if i == 0:
            with pytest.raises(InvalidInput, match="already recorded with different content"):
                store.record_experience(clash)
            return None
        return store.record_experience(lesson(f"good lesson {i}")).id

    ids = [i for i in _together(8, write) if i]
    assert len(store.ledger.get_experiences(ids)) == 7
    assert store.get_experience(first.id).lesson == "the original text"


def test_another_callers_lesson_is_found_at_once_and_searches_do_not_wait(embedded_settings, open_store):
    settings = embedded_settings()
    store = open_store(settings)
    store.record_experience(lesson("a first lesson so the index exists"))
    store.search("experiences", "first lesson", k=1)
    text = "Splitting each row over two programs halved the time once rows spilled out of registers"
    writer, reader = contextvars.Context(), contextvars.Context()  # two tool calls of a server
    with FileLock(str(settings.home / "index.lock")):  # indexing is stuck, as behind another process
        exp = writer.run(store.record_experience, lesson(text))
        got: list = []
        search = threading.Thread(target=lambda: got.append(reader.run(store.search, "experiences", text, k=3)))
        search.start()
        search.join(1.0)
        assert got, "a search waited for the index lock"
        assert store.vectors.peek_seq() < store.ledger.max_seq()  # not indexed: the lock is held
        hit = next(h for h in got[0] if h.id == exp.id)  # answered from this process's fresh tail
        assert hit.document == experience_doc(exp).text
        assert hit.metadata == experience_doc(exp).metadata
        # The writer's own search never misses its write, whatever the follower is doing.
        own = writer.run(store.record_experience, lesson(text + " (again)"))
        assert own.id in {h.id for h in writer.run(store.search, "experiences", text + " (again)", k=3)}
    written = time.perf_counter()
    while store.vectors.peek_seq() < store.ledger.max_seq():  # the follower indexes them once it can
        assert time.perf_counter() - written < 1.0, "the follower did not index the lessons within 1 s"
        time.sleep(0.02)
    after = [h for h in reader.run(store.search, "experiences", text, k=3) if h.id == exp.id]
    assert len(after) == 1 and after[0].distance == pytest.approx(hit.distance, abs=1e-4)  # as the index has it


def test_which_attempts_exist_is_answered_from_ids_alone(embedded_settings, open_store):
    # recall checks every skill's evidence ids on each call: an index lookup, never a read of the attempts
    from memory_factories import attempt

    store = open_store(embedded_settings())
    held = [a.id for a in store.record_attempts([attempt(i) for i in range(3)])]
    missing = [f"att_{i:012x}_00000000" for i in range(700)]  # past one 500-id chunk
    ids = [held[0], *missing[:350], held[1], held[1], *missing[350:], held[2]]
    assert store.ledger.existing_attempt_ids(ids) == set(held)
    assert store.ledger.existing_attempt_ids(missing) == set()
    assert store.ledger.existing_attempt_ids([]) == set()
    assert {a.id for a in store.ledger.get_attempts(ids)} == store.ledger.existing_attempt_ids(ids)


def test_the_follower_gathers_writes_and_starts_at_once_for_a_waiting_reader():
    from skillbase.memory.follower import Follower

    rounds: list[float] = []
    backlog = {"n": 0}

    def sync():
        rounds.append(time.perf_counter())
        if backlog["n"]:
            backlog["n"] -= 1
            return True
        return False

    f = Follower(sync, name="test-follower", gather_s=0.3)
    try:
        start = time.perf_counter()
        for _ in range(5):  # writers: one round for all of them, after the gathering time
            f.poke()
        time.sleep(0.1)
        assert rounds == []
        deadline = time.perf_counter() + 5
        while not rounds:
            assert time.perf_counter() < deadline
            time.sleep(0.01)
        assert rounds[0] - start >= 0.29
        time.sleep(0.35)
        assert len(rounds) == 1
        f.poke()  # a writer asks, then a reader waits: the reader's round starts at once
        t0 = time.perf_counter()
        assert f.wait(lambda: len(rounds) == 2, timeout=5)
        assert time.perf_counter() - t0 < 0.2
        backlog["n"] = 2  # a round that leaves work goes round again at once, twice
        t0 = time.perf_counter()
        f.poke(urgent=True)
        while len(rounds) < 5:
            assert time.perf_counter() - t0 < 0.25, "a round that left work waited to gather"
            time.sleep(0.005)
    finally:
        f.close()
    assert len(rounds) == 5


def test_a_round_that_leaves_work_to_another_process_goes_again_after_gathering():
    from skillbase.memory.follower import AGAIN_LATER, Follower

    rounds: list[tuple[float, bool]] = []

    def sync():
        rounds.append((time.perf_counter(), f.round_urgent))
        return AGAIN_LATER if len(rounds) < 3 else False

    f = Follower(sync, name="test-follower", gather_s=0.3)
    try:
        t0 = time.perf_counter()
        f.poke(urgent=True)  # a reader's round: told it is urgent; it leaves work, so two more follow
        deadline = t0 + 5
        while len(rounds) < 3:
            assert time.perf_counter() < deadline, "the round left for later never came"
            time.sleep(0.01)
        time.sleep(0.4)
    finally:
        f.close()
    assert [u for _, u in rounds] == [True, False, False] and len(rounds) == 3
    gaps = [b - a for (a, _), (b, _) in zip(rounds, rounds[1:])]
    assert all(g >= 0.29 for g in gaps), f"rounds left for later went again without gathering: {gaps}"


def test_the_follower_is_woken_only_when_a_poke_changes_what_it_waits_for():
    from skillbase.memory.follower import Follower

    rounds: list[float] = []
    f = Follower(lambda: rounds.append(time.perf_counter()), name="test-follower", gather_s=0.3)
    wakes = []
    real = f._cv.notify_all
    f._cv.notify_all = lambda: (wakes.append(1), real())[1]
    try:
        f.poke()  # idle: woken to start gathering
        for _ in range(20):  # more writes while it gathers: the same round takes them, nobody woken
            f.poke()
        assert len(wakes) == 1
        deadline = time.perf_counter() + 5
        while not rounds:
            assert time.perf_counter() < deadline
            time.sleep(0.01)
        time.sleep(0.1)
        assert len(rounds) == 1  # one round for all 21
        f.poke()
        f.poke(urgent=True)  # a waiting reader wakes it at once, gathering or not
        assert len(wakes) == 4  # the loop's own notify after its round, the new idle poke, the urgent one
    finally:
        f.close()


def test_callers_writing_and_searching_at_once_each_find_their_own_writes(embedded_settings, open_store):
    # Writes, searches and the follower's gathered upserts all at once: every caller's search finds
    # the lesson it has just written (indexed or still in the fresh tail), no record twice, nearest first.
    store = open_store(embedded_settings())
    store.record_experience(lesson("a first lesson so the index exists"))
    store.sync()

    subjects = ["Softmax rows", "Matrix multiply tiles", "Layer norm reductions", "Convolution windows",
                "Attention scores", "Prefix scans", "Histogram bins", "Transpose blocks"]
    troubles = ["spilled out of registers", "thrashed the L2 cache", "hit shared memory bank conflicts",
                "were bound by memory bandwidth", "lost occupancy to register pressure", "waited on uncoalesced loads"]

    def caller(w):
        ctx, found = contextvars.Context(), []
        for i in range(6):
            text = f"{subjects[w]} {troubles[i]}"
            exp = ctx.run(store.record_experience, lesson(text))
            hits = ctx.run(store.search, "experiences", text, k=5)
            ids = [h.id for h in hits]
            assert exp.id in ids, f"caller {w} step {i} missed its own lesson"
            assert len(ids) == len(set(ids)), "a record came back twice"
            assert [h.distance for h in hits] == sorted(h.distance for h in hits)
            found.append(exp.id)
        return found

    written = [i for ids in _together(8, caller) for i in ids]
    store.sync()
    assert store.vectors.peek_seq() == store.ledger.max_seq()
    assert len(set(written)) == 48 and {e.id for e in store.list_experiences(limit=1000)} >= set(written)
