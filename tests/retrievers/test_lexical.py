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
