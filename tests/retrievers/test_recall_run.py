"""``recall(run=...)``: only one suite run's attempts and the lessons about them."""

from __future__ import annotations

from conftest import open_store
from retriever_factories import lesson, lineage, task_info


def test_recall_keeps_only_the_attempts_of_one_run_and_their_lessons(tmp_path, embedder):
    from skillbase.retrievers import Retriever

    store = open_store(tmp_path / "home", embedder)
    runs = {"run-a": lineage(task_info("softmax_a", "softmax"), [(["online-softmax"], 0.7, "correct")], prefix="a"),
            "run-b": lineage(task_info("softmax_b", "softmax"), [(["online-softmax"], 0.8, "correct")], prefix="b")}
    store.record_attempts([a.model_copy(update={"run": run}) for run, atts in runs.items() for a in atts])
    a_after, b_after = runs["run-a"][1].id, runs["run-b"][1].id
    store.record_experiences([
        lesson("exp_a", "Online softmax read each row once.", techniques=["online-softmax"], family="softmax"
               ).model_copy(update={"after_attempt": a_after}),
        lesson("exp_b", "Online softmax read each row once here too.", techniques=["online-softmax"],
               family="softmax").model_copy(update={"after_attempt": b_after})])
    r = Retriever(store, store.settings)
    try:
        both = r.recall(text="softmax rows read once", kinds=("attempt", "experience"), k=10)
        assert {i.id for i in both.items} >= {a_after, b_after, "exp_a", "exp_b"}
        only_a = r.recall(text="softmax rows read once", k=10, run="run-a")
        ids = {i.id for i in only_a.items}
        assert a_after in ids and "exp_a" in ids
        assert not ids & ({a.id for a in runs["run-b"]} | {"exp_b"})
        assert all(i.kind in ("attempt", "experience") for i in only_a.items)
        assert {a.id for a in store.list_attempts(run="run-b")} == {a.id for a in runs["run-b"]}
        none = r.recall(text="softmax rows read once", k=5, run="no-such-run")
        assert not none.items and any("no attempts of run" in n for n in none.notes)
    finally:
        r.close()
        store.close()
