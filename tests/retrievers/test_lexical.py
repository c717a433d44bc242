"""The BM25 index: identifiers kept whole, kept up with the ledger, cached on disk."""

from __future__ import annotations

from retriever_factories import lesson
from skillbase.retrievers.lexical import LexicalRetriever
from skillbase.retrievers.tokens import tokenize


def test_tokenizer_keeps_identifiers_whole_and_split():
    toks = tokenize("raise num_stages, use tl.dot and __shfl_xor_sync with cp.async")
    for whole in ("num_stages", "tl.dot", "__shfl_xor_sync", "cp.async"):
        assert whole in toks, toks
    assert "stages" in toks or "stage" in toks
    assert "dot" in toks


def test_index_follows_the_ledger_and_survives_a_restart(tmp_path, embedder):
    from conftest import open_store

    store = open_store(tmp_path / "home", embedder)
    try:
        store.record_experience(lesson("exp_l_1", "Row softmax: one program per row kept the row in registers.",
                                       techniques=["one-pass-row-reduction"], family="softmax"))
        lex = LexicalRetriever(store, store.settings.cache_dir)
        q = tokenize("evict_last eviction hint")
        assert lex.search(q, "experience", 5) == []
        store.record_experience(lesson("exp_l_2", "An evict_last hint on the weights kept them in L2 across rows.",
                                       techniques=["cache-hints"], family="softmax"))
        assert [i for i, *_ in lex.search(q, "experience", 5)] == ["exp_l_2"]  # caught up without a rebuild call
        lex.close()
        again = LexicalRetriever(store, store.settings.cache_dir)  # a new process would read the cache
        assert [i for i, *_ in again.search(q, "experience", 5)] == ["exp_l_2"]
        assert again.seq == store.seq
        again.close()
    finally:
        store.close()


def test_technique_lessons_follow_new_lessons(tmp_path, embedder):
    from conftest import open_store

    from skillbase.retrievers.catalog import Catalog
    from skillbase.retrievers.graph import GraphRetriever

    store = open_store(tmp_path / "home", embedder)
    try:
        store.record_experience(lesson("exp_g_1", "Eviction hints kept the weights in L2.", techniques=["cache-hints"],
                                       family="softmax", gain=1.1))
        graph = GraphRetriever(store, Catalog(store))
        assert [r.id for r in graph.experience_refs("cache-hints", "softmax")] == ["exp_g_1"]
        store.record_experience(lesson("exp_g_2", "evict_first on the streamed input paid more.",
                                       techniques=["cache-hints"], family="softmax", gain=1.3))
        assert [r.id for r in graph.experience_refs("cache-hints", "softmax")] == ["exp_g_2", "exp_g_1"]
    finally:
        store.close()


def _scan(idx, qtok, where):
    """BM25 of every delta record, one by one: what the delta's postings must reproduce."""
    import math
    from collections import Counter

    from skillbase.memory.filters import matches
    from skillbase.retrievers.lexical import B, K1

    n_docs = max(idx.size, 1)
    avgdl = idx.main.avgdl if idx.main else sum(len(d.tokens) for d in idx.delta.values()) / len(idx.delta)
    out = []
    for doc in idx.delta.values():
        if where is not None and not matches(where, doc.meta):
            continue
        tf, s = Counter(doc.tokens), 0.0
        for t in qtok:
            if tf.get(t):
                idf = (idx.main.idf.get(t) if idx.main else None) or math.log(1 + (n_docs - 1 + 0.5) / 1.5)
                s += idf * tf[t] / (K1 * ((1 - B) + B * len(doc.tokens) / max(avgdl, 1e-9)) + tf[t])
        if s > 0:
            out.append((doc.id, s, doc.meta))
    return out


def test_delta_postings_score_as_a_scan_of_every_record():
    import random

    from skillbase.retrievers.lexical import CollectionIndex, Doc, build_segment

    rng = random.Random(7)
    words = [f"w{i}" for i in range(40)]

    def doc(i):
        return Doc(f"d{i}", [rng.choice(words) for _ in range(rng.randint(1, 12))], {"family": rng.choice("ab")})

    for main in (None, build_segment([doc(i) for i in range(30)], seq=30)):
        idx = CollectionIndex("experiences")
        idx.main = main
        for step in range(400):
            i = rng.randrange(60)
            if rng.random() < 0.2:
                idx.remove(f"d{i}")
            else:
                idx.put(doc(i))  # a record written again replaces its postings
            if step % 20 == 0 and idx.delta:
                q = list(dict.fromkeys(rng.choice(words) for _ in range(4)))
                for where in (None, {"family": "a"}):
                    assert idx._search_delta(q, where) == _scan(idx, q, where)
        idx.clear_delta()
        assert idx._search_delta(["w1"], None) == [] and not idx._postings and idx._total_length == 0


def test_a_pinned_seq_behind_the_index_neither_refreshes_nor_rebuilds_it(tmp_path, embedder):
    """A recall pins the ledger's seq when it starts; another thread may then write and catch the
    lexical index up past it. The pinned reader must take the index as it is: reading the lag as
    a ledger restored from an older copy emptied and rewrote the token table on every such recall
    (two seconds a recall under load)."""
    import threading

    from conftest import open_store

    store = open_store(tmp_path / "home", embedder)
    lex = LexicalRetriever(store, store.settings.cache_dir)
    try:
        store.record_experience(lesson("exp_p_1", "Vectorized loads of 16 bytes reached the memory roof.",
                                       techniques=["vectorized-access"], family="elementwise"))
        q = tokenize("bank conflicts padding")
        with store.ledger.pinned_seq() as pinned:
            def other_caller():
                store.record_experience(lesson("exp_p_2", "Padding the tile by one column ended the bank conflicts.",
                                               techniques=["cache-hints"], family="transpose"))
                lex.refresh()

            t = threading.Thread(target=other_caller)
            t.start()
            t.join()
            assert store.seq == pinned < store.ledger.committed_seq() == lex.seq
            rows = lex._db.execute("SELECT rowid, id FROM docs ORDER BY rowid").fetchall()
            writes = []
            real_write = lex._write_docs
            lex._write_docs = lambda changes: (writes.append(len(changes)), real_write(changes))
            assert [i for i, *_ in lex.search(q, "experience", 5)] == ["exp_p_2"]
            assert writes == [] and lex.seq == store.ledger.committed_seq()
            assert lex._db.execute("SELECT rowid, id FROM docs ORDER BY rowid").fetchall() == rows
        assert store.seq == store.ledger.committed_seq()  # the pin ends with its block
    finally:
        lex.close()
        store.close()


def test_a_search_never_waits_for_another_processes_hold_on_the_token_table(tmp_path, embedder):
    """Several server processes over one store find new changes at nearly every search; each took the
    token table's file lock to write them there first, and queued on it (a polled lock): the lexical
    step was the largest part of recall's slowest 5 % with eight processes.
    A search now reads the changes from the ledger; the table is written when an index is rebuilt."""
    import threading

    from filelock import FileLock

    from conftest import open_store

    store = open_store(tmp_path / "home", embedder)
    lex = LexicalRetriever(store, store.settings.cache_dir)
    try:
        lex.refresh()
        with FileLock(str(lex.dir / "lexical.lock")):  # another process rebuilding, say
            store.record_experience(lesson("exp_l_1", "Padding the tile by one column ended the bank conflicts.",
                                           techniques=["cache-hints"], family="transpose"))
            found: list = []
            t = threading.Thread(target=lambda: found.append(lex.search(tokenize("bank conflicts"), "experience", 5)))
            t.start()
            t.join(5)
            assert found, "the search waited for the token table's lock"
            assert [i for i, *_ in found[0]] == ["exp_l_1"]
    finally:
        lex.close()
        store.close()


def test_bm25s_is_imported_without_starting_jax(tmp_path):
    """Where JAX is installed, importing bm25s ran a JAX operation (its optional top-k backend), which
    starts JAX on the default device: on a GPU machine each server process took most of the GPU's
    memory, and eight workers ran it out (recalls failed). A JAX stand-in on
    the path records being imported; the lexical index must build and search without it."""
    import subprocess
    import sys

    fake = tmp_path / "site" / "jax"
    fake.mkdir(parents=True)
    marker = tmp_path / "jax-imported"
    (fake / "__init__.py").write_text(f"open({str(marker)!r}, 'w').write('imported')\n")
    (fake / "lax.py").write_text("def top_k(x, k):\n    raise RuntimeError('a JAX operation ran')\n")
    code = (
        "import sys\n"
        "from skillbase.retrievers.lexical import build_segment, Doc\n"
        "seg = build_segment([Doc('a', ['bank', 'conflicts'], {}), Doc('b', ['vectorized'], {})], 1)\n"
        "import bm25s.selection\n"
        "assert not bm25s.selection.JAX_IS_AVAILABLE and 'jax' not in sys.modules\n"
        "import jax  # the stand-in stays importable for the caller's own use\n"
    )
    env = {**__import__("os").environ, "PYTHONPATH": f"{tmp_path / 'site'}"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert marker.read_text() == "imported"  # by the caller's own `import jax`, after bm25s


def test_building_an_index_prints_nothing_under_an_applications_logging():
    """bm25s sets its own logger to DEBUG when imported: an application with a root handler (here
    ``basicConfig`` at WARNING, as the MCP SDK's server sets up) printed "DEBUG:bm25s:Building index
    from tokens" for every index built. A fresh process, so that skillbase imports bm25s first."""
    import subprocess
    import sys

    code = (
        "import logging\n"
        "logging.basicConfig(level=logging.WARNING)\n"
        "from skillbase.retrievers.lexical import build_segment, Doc\n"
        "build_segment([Doc('a', ['bank', 'conflicts'], {}), Doc('b', ['vectorized'], {})], 1)\n"
        "logging.getLogger('bm25s').warning('a warning still shows')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stderr.strip().splitlines() == ["WARNING:bm25s:a warning still shows"], out.stderr[-2000:]
