"""The ledger alone: schema, validation, round trips, techniques, skills,
export/import. No embedding model needed."""

import json
import sqlite3
from datetime import timedelta

import pytest

from skillbase import seeds
from skillbase.memory.jsonl import export_jsonl, import_jsonl
from skillbase.memory.ledger import Ledger
from skillbase.memory.schema import SCHEMA_VERSION, migrate
from skillbase.memory.techniques import load_seed_techniques
from memory_factories import MATMUL_SRC, attempt, lesson
from skillbase.errors import InvalidInput, LimitExceeded, NotFound, SchemaTooNew, StoreError, UnknownTechnique
from skillbase.models import Feedback, Skill, Technique, content_hash, utcnow

SEEDS = load_seed_techniques(seeds.TECHNIQUES_FILE)


@pytest.fixture
def ledger(tmp_path):
    led = Ledger.open(tmp_path / "ledger.sqlite3", max_text_bytes=20_000, seed_techniques=SEEDS)
    yield led
    led.close()


def test_fresh_ledger_is_migrated_and_seeded(ledger):
    assert ledger.schema_version == SCHEMA_VERSION
    assert len(ledger.list_techniques()) == len(SEEDS) >= 40
    mode = ledger._query("PRAGMA journal_mode")[0][0]
    assert mode == "wal"


def test_migration_from_an_older_schema_keeps_data(tmp_path):
    path = tmp_path / "ledger.sqlite3"
    conn = sqlite3.connect(path, isolation_level=None)
    assert migrate(conn, str(path), target=1) == 1
    conn.execute("INSERT INTO outbox(kind, item_id, op, created_at) VALUES ('task', 'x', 'put', '2026-01-01')")
    conn.close()
    led = Ledger.open(path, seed_techniques=SEEDS)
    assert led.schema_version == SCHEMA_VERSION
    assert led.changes_after(0, 1)[0].item_id == "x"
    indexes = {r[0] for r in led._query("SELECT name FROM sqlite_master WHERE type='index'")}
    assert "attempts_parent" in indexes and "profiles_attempt" in indexes
    led.close()


def test_newer_schema_is_refused(tmp_path, ledger):
    ledger._conn.execute("UPDATE meta SET value='99' WHERE key='schema_version'")
    ledger.close()
    with pytest.raises(SchemaTooNew, match="schema version 99"):
        Ledger.open(tmp_path / "ledger.sqlite3")


def test_a_file_that_is_not_sqlite_is_refused(tmp_path):
    path = tmp_path / "ledger.sqlite3"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreError, match="not a SQLite database|cannot open"):
        Ledger.open(path)


def test_attempt_round_trip_is_exact(ledger):
    root = attempt(0)
    child = attempt(1, parent=root.id, techniques=("Online Softmax", "float4"), ms=0.25, session="s1")
    ledger.record_attempts([root, child])
    got = ledger.get_attempt(child.id)
    assert got.techniques == ["online-softmax", "vectorized-access"]
    assert got == child.model_copy(update={"techniques": ["online-softmax", "vectorized-access"]})
    assert got.bench_report == child.bench_report and got.created_at == child.created_at
    assert [a.id for a in ledger.lineage(child.id)] == [root.id, child.id]
    assert [a.id for a in ledger.list_attempts(task="row_softmax")] == [child.id, root.id]
    assert [a.id for a in ledger.list_attempts(session="s1")] == [child.id]
    assert [a.id for a in ledger.list_attempts(technique="online softmax")] == [child.id]
    assert ledger.list_attempts(since=utcnow() + timedelta(hours=1)) == []
    task = ledger.get_task("row_softmax")
    assert (task.family, task.dtype, task.regime) == ("softmax", "fp32", "large")


def test_source_stored_once_per_hash(ledger):
    a, b = attempt(0), attempt(0)  # same source, two benchmarks
    ledger.record_attempts([a, b])
    assert ledger._query("SELECT COUNT(*) FROM sources")[0][0] == 1
    assert ledger.get_attempt(b.id).source == a.source


def test_rerecording_is_idempotent_and_conflicts_are_refused(ledger):
    a = attempt(0)
    ledger.record_attempts([a])
    seq = ledger.max_seq()
    ledger.record_attempts([a])
    assert ledger.max_seq() == seq
    with pytest.raises(InvalidInput, match="different content"):
        ledger.record_attempts([a.model_copy(update={"notes": "changed"})])


def test_technique_aliases_and_unknown_names(ledger):
    assert ledger.canonical_technique("smem tiling") == "smem-tiling"
    assert ledger.canonical_technique("Shared-Memory_Tiling") == "smem-tiling"
    assert ledger.canonical_technique("tl.dot") == "tensor-cores"
    with pytest.raises(UnknownTechnique) as e:
        ledger.canonical_technique("online softmaxx")
    assert "online-softmax" in str(e.value)
    with pytest.raises(UnknownTechnique):
        ledger.record_attempts([attempt(0, techniques=("quantum tunnelling",))])
    assert ledger.list_attempts() == []


def test_add_technique_grows_the_vocabulary(ledger, tmp_path):
    t = Technique(name="warp-reduce-tree", title="t", category="reduction", description="d", aliases=["xor tree"])
    ledger.add_technique(t)
    assert ledger.canonical_technique("XOR-tree") == "warp-reduce-tree"
    with pytest.raises(InvalidInput, match="already names"):
        ledger.add_technique(Technique(name="my-tiling", title="t", category="c", description="d", aliases=["tiling"]))
    other = Ledger.open(tmp_path / "ledger.sqlite3")  # another process's view learns it on a miss
    assert other.canonical_technique("xor tree") == "warp-reduce-tree"
    other.close()


def test_bad_attempts_are_refused_with_clear_errors(ledger):
    big = "x" * 30_000
    with pytest.raises(LimitExceeded, match="30000 bytes; the limit is 20000"):
        ledger.record_attempts([attempt(0).model_copy(update={"source": big, "source_hash": content_hash(big)})])
    with pytest.raises(InvalidInput, match="source_hash"):
        ledger.record_attempts([attempt(0).model_copy(update={"source_hash": "0" * 16})])
    with pytest.raises(InvalidInput, match="family:dtype:regime"):
        ledger.record_attempts([attempt(0).model_copy(update={"task_signature": "softmax-fp32"})])
    with pytest.raises(InvalidInput, match="unknown family"):
        ledger.record_attempts([attempt(0).model_copy(update={"task_signature": "sofmax:fp32:large"})])
    with pytest.raises(InvalidInput, match="parent"):
        ledger.record_attempts([attempt(0, parent="att_missing")])
    with pytest.raises(InvalidInput, match="finite"):
        ledger.record_attempts([attempt(0).model_copy(update={"median_ms": float("nan")})])
    with pytest.raises(NotFound):
        ledger.get_attempt("att_nope")
    assert ledger.counts()["attempts"] == 0


def test_experiences(ledger):
    a, b = attempt(0), attempt(1, ms=0.25)
    ledger.record_attempts([a])
    ledger.record_attempts([b.model_copy(update={"parent_id": a.id})])
    e = ledger.record_experiences([lesson("Fusing max and sum halves traffic", before=a.id, after=b.id)])[0]
    assert e.techniques == ["online-softmax"]
    assert ledger.get_experience(e.id) == e
    assert [x.id for x in ledger.list_experiences(technique="streaming softmax")] == [e.id]
    with pytest.raises(InvalidInput, match="empty lesson"):
        ledger.record_experiences([lesson("   ")])
    with pytest.raises(InvalidInput, match="positive"):
        ledger.record_experiences([lesson("x", gain=-1.0)])


def test_skill_versions_and_history(ledger):
    s = Skill(name="online-softmax-one-pass", description="Single pass softmax; use when rows are read twice.",
              techniques=["online normalizer"])
    v1 = ledger.put_skill(s, author="alice", reason="first draft")
    assert v1.version == 1 and v1.techniques == ["online-softmax"]
    assert ledger.put_skill(s, author="alice", reason="again").version == 1  # same content: no new version
    v2 = ledger.put_skill(s.model_copy(update={"status": "approved"}), author="bob", reason="reviewed")
    assert v2.version == 2
    hist = ledger.skill_history(s.name)
    assert [(h.version, h.status, h.author) for h in hist] == [(1, "draft", "alice"), (2, "approved", "bob")]
    assert ledger.get_skill(s.name, 1).status == "draft" and ledger.get_skill(s.name).version == 2
    assert [x.name for x in ledger.list_skills("approved")] == [s.name] and ledger.list_skills("draft") == []
    with pytest.raises(InvalidInput, match="author and a reason"):
        ledger.put_skill(s, author="", reason="x")
    with pytest.raises(NotFound):
        ledger.get_skill(s.name, 7)


def test_feedback_needs_a_real_item(ledger):
    a = attempt(0)
    ledger.record_attempts([a])
    ledger.record_feedback(Feedback(item_kind="attempt", item_id=a.id, used=True, improved=False))
    ledger.record_feedback(Feedback(item_kind="technique", item_id="smem tiling", used=False))
    assert {f.item_id for f in ledger.list_feedback()} == {a.id, "smem-tiling"}
    with pytest.raises(InvalidInput, match="not in the ledger"):
        ledger.record_feedback(Feedback(item_kind="skill", item_id="no-such-skill"))


def _populate(ledger):
    ledger.add_technique(Technique(name="row-caching", title="Row caching", category="memory-access",
                                   description="d", aliases=["cache the row"]))
    root = attempt(0)
    kids = [attempt(i, parent=root.id, techniques=("cache the row",), ms=0.5 / i) for i in range(1, 4)]
    mm = attempt(9, base=MATMUL_SRC, task="gemm", signature="matmul:fp16:large", techniques=("tl.dot",), bound="compute")
    ledger.record_attempts([root, *kids, mm])
    ledger.record_experiences([lesson("cache the row in registers", techniques=("row-caching",), after=kids[0].id)])
    ledger.put_skill(Skill(name="row-cache", description="Cache rows; use when re-read.", techniques=["row-caching"]),
                     author="a", reason="r")
    ledger.record_feedback(Feedback(item_kind="skill", item_id="row-cache", attempt_id=kids[1].id, improved=True))


def test_export_import_round_trip_is_exact(ledger, tmp_path):
    _populate(ledger)
    first = tmp_path / "a.jsonl"
    n = export_jsonl(ledger, first)
    assert n == sum(1 for _ in open(first)) - 1
    other = Ledger.open(tmp_path / "other.sqlite3", seed_techniques=SEEDS)
    assert import_jsonl(other, first) == n - len(SEEDS)  # the seeds were there already
    second = tmp_path / "b.jsonl"
    export_jsonl(other, second)
    assert first.read_bytes() == second.read_bytes()
    assert import_jsonl(other, first) == 0  # idempotent
    other.close()


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda lines: lines.insert(5, "{not json"), "line 6: not JSON"),
        (lambda lines: lines.insert(5, '{"kind": "spaceship", "record": {}}'), "line 6: unknown kind"),
        (lambda lines: lines.__setitem__(-3, lines[-3].replace('"lesson":"', '"lesson":5,"x":"')), "invalid experience"),
        (lambda lines: lines.__setitem__(-3, lines[-3].replace("row-caching", "warp-teleport")), "unknown technique"),
    ],
)
def test_bad_import_is_refused_with_its_line_and_imports_nothing(ledger, tmp_path, mutate, message):
    _populate(ledger)
    good = tmp_path / "good.jsonl"
    export_jsonl(ledger, good)
    lines = good.read_text().splitlines()
    mutate(lines)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    other = Ledger.open(tmp_path / "other.sqlite3", seed_techniques=SEEDS)
    before = other.counts()
    with pytest.raises(InvalidInput, match=message) as e:
        import_jsonl(other, bad)
    assert "line " in str(e.value)
    assert other.counts() == before
    other.close()


def test_conflicting_import_rolls_back_everything(ledger, tmp_path):
    _populate(ledger)
    path = tmp_path / "x.jsonl"
    export_jsonl(ledger, path)
    other = Ledger.open(tmp_path / "other.sqlite3", seed_techniques=SEEDS)
    lines = path.read_text().splitlines()
    last_attempt = max(i for i, line in enumerate(lines) if line.startswith('{"kind":"attempt"'))
    rec = json.loads(lines[last_attempt])["record"]
    clash = attempt(0).model_copy(update={"id": rec["id"], "notes": "a different record with the same id"})
    other.record_attempts([clash])
    before = other.counts()
    with pytest.raises(InvalidInput, match=f"line {last_attempt + 1}: attempt .* different content"):
        import_jsonl(other, path)
    assert other.counts() == before
    other.close()
