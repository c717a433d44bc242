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


CLOSE_WHILE_READING = r"""
import sys, threading, time
sys.path.insert(0, sys.argv[2])
from pathlib import Path
from skillbase import seeds
from skillbase.memory.ledger import Ledger
from skillbase.memory.techniques import load_seed_techniques
from skillbase.memory.views import LedgerView
from memory_factories import attempt

led = Ledger.open(Path(sys.argv[1]) / "ledger.sqlite3", max_text_bytes=20_000,
                  seed_techniques=load_seed_techniques(seeds.TECHNIQUES_FILE))
led.record_attempts([attempt(i, ms=1.0 + i % 7) for i in range(1500)]
                    + [attempt(1500 + i, task="matmul", signature="matmul:fp16:large", ms=0.8) for i in range(500)])
view = LedgerView(led.path)
stop, reads = threading.Event(), [0]

def reader():
    while not stop.is_set():
        view.facets()
        view.attempt_rows(task="row_softmax", limit=500)
        reads[0] += 1

threads = [threading.Thread(target=reader) for _ in range(4)]
for t in threads:
    t.start()
closes, end = 0, time.monotonic() + 3.0
while time.monotonic() < end:
    view.close()  # as a server shutting down while the UI's warm-up reads
    closes += 1
    time.sleep(0.001)
stop.set()
for t in threads:
    t.join()
view.close()
led.close()
print(reads[0], closes)
"""


def test_closing_while_other_threads_read_waits_for_them(tmp_path):
    """A read on a connection that another thread closes crashed the whole process (SIGSEGV in
    SQLite: a server refused at start-up closed the store under the UI's warm-up thread). close()
    now waits for the reads in flight; run in a process of its own so a crash fails this test only."""
    import subprocess
    import sys
    from pathlib import Path

    here = Path(__file__).resolve().parent
    proc = subprocess.run([sys.executable, "-c", CLOSE_WHILE_READING, str(tmp_path), str(here)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    reads, closes = map(int, proc.stdout.split())
    assert reads > 10 and closes > 10  # both sides really ran, interleaved
