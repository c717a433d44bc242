"""LedgerView: the paginated, aggregated reads of the curation UI, on their own read-only
connections. A real ledger; no embedding model needed."""

import pytest

from skillbase import seeds
from skillbase.errors import NotFound
from skillbase.memory.ledger import Ledger
from skillbase.memory.techniques import load_seed_techniques
from skillbase.memory.views import LedgerView
from memory_factories import attempt, lesson


@pytest.fixture
def ledger(tmp_path):
    led = Ledger.open(tmp_path / "ledger.sqlite3", max_text_bytes=20_000,
                      seed_techniques=load_seed_techniques(seeds.TECHNIQUES_FILE))
    yield led
    led.close()


def test_task_rows_aggregate_and_follow_new_attempts(ledger):
    root = attempt(0, ms=1.0)
    child = attempt(1, parent=root.id, techniques=("online softmax",), ms=0.5)
    broken = attempt(2, parent=child.id, ms=None, verdict="incorrect")
    ledger.record_attempts([root, child, broken])
    view = LedgerView(ledger.path)
    (row,), total = view.task_rows()
    assert total == 1 and (row["task"], row["family"], row["attempts"], row["correct"]) == ("row_softmax", "softmax", 3, 2)
    assert row["best_vs_eager"] == pytest.approx(2.0)  # eager 1.0 ms over the 0.5 ms child
    faster = attempt(3, parent=child.id, ms=0.25)
    other = attempt(4, task="matmul", signature="matmul:fp16:large", ms=0.8)
    ledger.record_attempts([faster, other])
    rows, total = view.task_rows(sort="name")
    assert total == 2 and [r["task"] for r in rows] == ["matmul", "row_softmax"]
    assert rows[1]["attempts"] == 4 and rows[1]["best_vs_eager"] == pytest.approx(4.0)
    assert [r["task"] for r in view.task_rows(family="matmul")[0]] == ["matmul"]
    assert view.task_rows(hardware="nope")[0] == [] and view.task_rows(run="nope")[0] == []
    ledger.record_attempts([attempt(5, ms=0.2).model_copy(update={"run": "kb-run-1"})])
    (in_run,), _ = view.task_rows(run="kb-run-1")
    assert (in_run["task"], in_run["attempts"], in_run["best_vs_eager"]) == ("row_softmax", 1, pytest.approx(5.0))
    assert view.facets()["runs"] == ["kb-run-1"]
    assert view.facets()["hardware"] == [root.hardware]
    view.close()


def test_attempt_pages_lineage_rows_and_lessons(ledger):
    chain = [attempt(0, ms=1.0)]
    for n in range(1, 7):
        chain.append(attempt(n, parent=chain[-1].id, techniques=("online softmax",), ms=1.0 / (n + 1)))
    ledger.record_attempts(chain)
    ledger.record_experiences([lesson("One pass is enough.", before=chain[0].id, after=chain[1].id)])
    view = LedgerView(ledger.path)
    first, total = view.attempt_rows(task="row_softmax", offset=0, limit=4)
    rest, _ = view.attempt_rows(task="row_softmax", offset=4, limit=4)
    assert total == 7 and [r["id"] for r in first + rest] == [a.id for a in reversed(chain)]
    assert first[0]["techniques"] == ["online-softmax"]
    drawn = view.newest_attempt_rows(task="row_softmax", limit=3)
    assert [r["id"] for r in drawn] == [a.id for a in chain[-3:]] and drawn[0]["bytes_moved"] > 0
    assert view.best_attempt_row(task="row_softmax")["id"] == chain[-1].id
    assert view.known_attempts([chain[0].id, "att_missing"]) == {chain[0].id}
    with pytest.raises(NotFound):
        view.task_row("no_such_task")
    view.close()
