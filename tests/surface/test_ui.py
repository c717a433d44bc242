"""The curation UI over a real seeded store, through a real HTTP client: every page as HTML
and as JSON from the same handler, the figures' contents, pagination, curation actions
through the same operations as the CLI, and reads that do not wait for a writer."""

from __future__ import annotations

import re
import threading
import time

import plotly.graph_objects as go
import pytest
from starlette.testclient import TestClient

from skillbase.ui import plots, standalone_app
from skillbase.ui.pages import paginate

BASE = "http://127.0.0.1:8766"


@pytest.fixture(scope="module")
def client(ui_sb):
    app = standalone_app(ui_sb, host="127.0.0.1", port=8766, token=None)
    with TestClient(app, base_url=BASE) as c:
        yield c


def _first_child(ui_sb, task: str):
    return next(a for a in ui_sb.attempt_history(task) if a.parent_id)


def test_every_page_renders_as_html_and_as_the_same_data_in_json(client, ui_sb):
    child = _first_child(ui_sb, "row_softmax")
    urls = ["/ui/", "/ui/tasks", "/ui/tasks?family=softmax&sort=eager", "/ui/tasks/row_softmax",
            f"/ui/attempts/{child.id}", "/ui/skills", "/ui/skills?status=draft", "/ui/skills/online-softmax-one-pass",
            "/ui/review", "/ui/search", "/ui/search?q=rows+too+wide+for+registers", "/ui/search?task=row_softmax"]
    for url in urls:
        html = client.get(url)
        assert html.status_code == 200, (url, html.text[:500])
        assert html.headers["content-type"].startswith("text/html")
        assert "script-src 'self'" in html.headers["content-security-policy"]
        as_json = client.get(url, headers={"accept": "application/json"})
        same = client.get(url + ("&" if "?" in url else "?") + "format=json")
        assert as_json.status_code == same.status_code == 200, url
        assert as_json.headers["content-type"] == "application/json"
        if "search?" not in url:  # recall latency differs between calls
            assert as_json.json() == same.json(), url
    assert client.get("/", follow_redirects=False).headers["location"] == "/ui/"


def _tasks_with_attempts(ui_sb) -> int:
    """Counted from the ledger's task records, independently of the UI's aggregates."""
    return sum(1 for t in ui_sb.memory.list_tasks() if ui_sb.attempt_history(t.name, limit=1))


def test_the_tasks_list_shows_each_tasks_best_figures_and_filters(client, ui_sb):
    data = client.get("/ui/tasks?format=json").json()
    rows = {r["task"]: r for r in data["tasks"]}
    for number in range(2, data["page"]["pages"] + 1):
        rows.update({r["task"]: r for r in client.get(f"/ui/tasks?format=json&page={number}").json()["tasks"]})
    total = _tasks_with_attempts(ui_sb)
    assert total > 15  # the built-in tasks and the KernelBench campaign's
    assert len(rows) == data["page"]["total"] == total
    history = ui_sb.attempt_history("row_softmax")
    correct = [a for a in history if a.verdict == "correct"]
    r = rows["row_softmax"]
    assert r["attempts"] == len(history) and r["correct"] == len(correct)
    assert r["best_vs_eager"] == pytest.approx(max(a.speedup_vs_eager for a in correct))
    assert r["best_vs_compile"] == pytest.approx(max(a.speedup_vs_compile for a in correct))
    assert r["best_pct_sol"] == pytest.approx(max(a.pct_sol for a in correct))
    assert "softmax" in data["facets"]["families"] and data["facets"]["hardware"]
    soft = client.get("/ui/tasks?family=softmax&format=json").json()["tasks"]
    assert soft and {t["family"] for t in soft} == {"softmax"}
    gpu = data["facets"]["hardware"][0]
    assert client.get("/ui/tasks", params={"gpu": gpu, "format": "json"}).json()["page"]["total"] == total
    assert client.get("/ui/tasks?gpu=no-such-gpu&format=json").json()["tasks"] == []
    assert client.get("/ui/tasks?run=no-such-run&format=json").json()["tasks"] == []
    html = client.get("/ui/tasks?family=softmax").text
    assert "row_softmax" in html and "matmul_bias_gelu" not in html


def test_lists_page_through_the_ledger(ui_sb):
    view = ui_sb.views
    first, total = view.task_rows(sort="name", offset=0, limit=4)
    second, _ = view.task_rows(sort="name", offset=4, limit=4)
    assert total == _tasks_with_attempts(ui_sb) and len(first) == len(second) == 4
    assert [r["task"] for r in first + second] == sorted(r["task"] for r in first + second)
    pages = -(-total // 4)
    rows, page = paginate(lambda o, n: view.task_rows(sort="name", offset=o, limit=n), "999", 4)
    assert page == {"number": pages, "size": 4, "total": total, "pages": pages} and len(rows) == total - 4 * (pages - 1)
    newest, n = view.attempt_rows(task="row_softmax", offset=0, limit=2)
    older, _ = view.attempt_rows(task="row_softmax", offset=2, limit=2)
    assert n == 5 and not {r["id"] for r in newest} & {r["id"] for r in older}


def test_a_task_page_draws_its_lineage_speedups_and_roofline(client, ui_sb):
    data = client.get("/ui/tasks/row_softmax?format=json").json()
    history = ui_sb.attempt_history("row_softmax")
    assert [r["id"] for r in data["lineage"]] == [a.id for a in history]  # oldest first
    assert data["lessons"] and all(e["task"] == "row_softmax" for e in data["lessons"])
    url = "/ui/attempts/{id}"
    fig = plots.lineage(data["lineage"], url)
    nodes = [t for t in fig["data"] if t.get("mode") == "markers+text"]
    assert sum(len(t["x"]) for t in nodes) == len(history)
    # every node printed with its id's tail (and speedup when timed), not only on hover
    printed = [label for t in nodes for label in t["text"]]
    assert sorted(p.split()[0] for p in printed) == sorted(a.id[-4:] for a in history)
    assert any(p.endswith("x") for p in printed) and fig["layout"]["height"] <= 460
    assert {t["name"] for t in nodes} == {a.verdict for a in history}
    assert all(t["marker"]["color"] == plots.VERDICT_COLORS[t["name"]] for t in nodes)
    labels = next(t for t in fig["data"] if t.get("mode") == "text")["text"]
    child = _first_child(ui_sb, "row_softmax")
    parent = next(a for a in history if a.id == child.parent_id)
    added = [t for t in child.techniques if t not in parent.techniques] or child.techniques
    assert ", ".join(added) in labels and len(labels) == sum(1 for a in history if a.parent_id)
    roof = plots.roofline(data["lineage"], url)
    timed = [a for a in history if a.median_ms]
    assert sum(len(t["x"]) for t in roof["data"] if t.get("mode") == "markers") == len(timed)
    speed = plots.speedup_over_attempts(data["lineage"], url)
    best = next(t for t in speed["data"] if t["name"] == "best so far")
    assert best["y"][-1] == pytest.approx(max(a.speedup_vs_eager for a in timed if a.verdict == "correct"))
    for figure in (fig, roof, speed):  # plotly's own schema validation: a misspelt property raises
        go.Figure(figure)
    for figure in (roof, speed):  # titles as plotly.js 2+ reads them: a bare string is silently dropped
        assert all(figure["layout"][axis]["title"]["text"] for axis in ("xaxis", "yaxis"))
    assert speed["layout"]["xaxis"]["tickformat"] == "d"  # attempts tick as whole numbers
    html = client.get("/ui/tasks/row_softmax").text
    for part in ('data-figure="plot-lineage"', 'data-figure="plot-speedup"', 'data-figure="plot-roofline"',
                 "/ui/assets/plotly.min.js", child.id):
        assert part in html
    js = client.get("/ui/assets/plotly.min.js")
    assert js.status_code == 200 and len(js.content) > 1_000_000 and b"plotly" in js.content[:2000].lower()


def test_an_attempt_page_has_its_report_and_the_diff_against_its_parent(client, ui_sb):
    child = ui_sb.get_attempt(_first_child(ui_sb, "row_softmax").id)
    data = client.get(f"/ui/attempts/{child.id}?format=json").json()
    assert data["attempt"]["id"] == child.id and data["parent"]["id"] == child.parent_id
    kinds = {line["kind"] for line in data["diff"]}
    assert {"add", "del", "hunk"} <= kinds
    html = client.get(f"/ui/attempts/{child.id}").text
    assert "Diff against its parent" in html and "interquartile range" in html and "% of speed of light" in html
    missing = client.get("/ui/attempts/att_nope")
    assert missing.status_code == 404 and "no attempt" in missing.text
    assert client.get("/ui/attempts/att_nope?format=json").json()["error"] == "NotFound"


def test_a_skill_page_renders_its_markdown_evidence_and_history(client, ui_sb):
    data = client.get("/ui/skills/online-softmax-one-pass?format=json").json()
    skill = ui_sb.get_skill("online-softmax-one-pass")
    assert data["skill"]["version"] == skill.version and data["markdown"] == ui_sb.skill_markdown(skill.name)
    assert data["gains"]["evidence"] == len(skill.evidence)
    html = client.get("/ui/skills/online-softmax-one-pass").text
    assert '<article class="markdown"><h2>' in html
    for aid in data["linked_attempts"]:
        assert f'href="{BASE}/ui/attempts/{aid}"' in html
    rows = client.get("/ui/skills?format=json").json()["skills"]
    row = next(r for r in rows if r["name"] == skill.name)
    assert row["evidence"] == len(skill.evidence) and row["best_gain"] == max(
        (e.gain for e in skill.evidence if e.gain), default=None)


def test_curation_from_the_ui_needs_a_reason_and_uses_the_cli_operations(client, ui_sb):
    form = client.get("/ui/skills/ui-http-approve").text  # the page sets this browser's CSRF cookie
    csrf = client.cookies["skillbase_csrf"]
    assert f'name="csrf" value="{csrf}"' in form
    stale = client.post("/ui/skills/ui-http-approve/approve", data={"reason": "ok", "csrf": "forged"})
    assert stale.status_code == 403 and ui_sb.get_skill("ui-http-approve").status == "draft"
    refused = client.post("/ui/skills/ui-http-approve/approve", data={"reason": "  ", "csrf": csrf})
    assert refused.status_code == 400 and "needs a reason" in refused.text
    assert ui_sb.get_skill("ui-http-approve").status == "draft"
    review = client.get("/ui/review?format=json").json()["drafts"]
    assert {"ui-http-approve", "ui-http-reject"} <= {d["name"] for d in review}
    assert all(d["lint_passed"] for d in review if d["name"].startswith("ui-"))
    done = client.post("/ui/skills/ui-http-approve/approve", follow_redirects=False,
                       data={"reason": "measured on row_softmax", "back": "review", "curator": "ana", "csrf": csrf})
    assert done.status_code == 303 and done.headers["location"].startswith(f"{BASE}/ui/review?done=approved")
    approved = ui_sb.get_skill("ui-http-approve")
    history = ui_sb.skill_history("ui-http-approve")
    assert approved.status == "approved" and (history[-1].author, history[-1].reason) == (
        "ana", "measured on row_softmax")
    client.post("/ui/skills/ui-http-reject/reject", data={"reason": "duplicates online-softmax-one-pass", "csrf": csrf})
    rejected = ui_sb.skill_history("ui-http-reject")[-1]
    assert (rejected.status, rejected.reason) == ("deprecated", "rejected: duplicates online-softmax-one-pass")
    back = client.post("/ui/skills/ui-http-approve/rollback",
                       data={"version": "1", "reason": "approved too early", "csrf": csrf},
                       headers={"accept": "application/json"}).json()
    assert back["version"] == 3 and ui_sb.get_skill("ui-http-approve").status == "draft"
    assert client.post("/ui/skills/ui-http-approve/rename", data={"reason": "x", "csrf": csrf}).status_code == 404
    page = client.get("/ui/skills/ui-http-approve").text
    assert "rollback to version 1: approved too early" in page and 'class="d-add"' in page


def test_reads_do_not_wait_for_a_writer_holding_the_ledger(client, ui_sb):
    """A write transaction held open (as while a benchmark's attempt is being recorded) holds the
    Store's connection lock; the pages read on their own connections and answer meanwhile."""
    held, release = threading.Event(), threading.Event()

    def writer():
        with ui_sb.memory.ledger.write():
            held.set()
            release.wait(30)

    t = threading.Thread(target=writer)
    t.start()
    try:
        assert held.wait(10)
        start = time.monotonic()
        for url in ("/ui/tasks?format=json", "/ui/tasks/row_softmax?format=json"):
            assert client.get(url).status_code == 200
        assert time.monotonic() - start < 5
    finally:
        release.set()
        t.join()


def test_times_numbers_and_spreads_read_as_people_write_them():
    from skillbase.ui.app import duration, number, percent_of_sol, relative

    assert [duration(v) for v in (0.00425, 0.812, 1.2345, 28.07, 4200.0, None)] == \
        ["4.25 µs", "812 µs", "1.234 ms", "28.07 ms", "4.2 s", "—"]
    assert number(5.960464477539063e-08) == "5.96e-08" and number(0.0123456) == "0.01235" and number(1234.5) == "1,234"
    assert number(3) == "3" and number(None) == "—"
    assert relative(0.00042) == "0.042%" and relative(0.012) == "1.2%"  # never "±0.0%"
    assert percent_of_sol(87.4) == "87%" and 'title="above the measured bandwidth roof' in percent_of_sol(104.2)


def test_error_pages_have_plain_titles_and_unknown_pages_get_the_site_page(client):
    missing = client.get("/ui/attempts/att_nope")
    assert missing.status_code == 404 and "<h1>Not found</h1>" in missing.text and "NotFound" not in missing.text
    nowhere = client.get("/ui/no/such/page")
    assert nowhere.status_code == 404 and "<h1>Not found</h1>" in nowhere.text and '/ui/tasks">' in nowhere.text
    assert client.get("/ui/no/such/page", headers={"accept": "application/json"}).json()["error"] == "NotFound"
    bad = client.get("/ui/tasks?page=two")
    assert bad.status_code == 400 and "<h1>Not a valid request</h1>" in bad.text


def test_the_home_page_sums_up_the_store_and_its_columns_sort(client, ui_sb):
    data = client.get("/ui/?format=json").json()
    s = data["summary"]
    assert s["tasks"] == len(ui_sb.views.task_rows(limit=10_000)[0]) and s["attempts"] >= s["correct"] > 0
    assert s["drafts"] == len(ui_sb.list_skills("draft")) and len(s["recent"]) == 5 and s["best"]
    html = client.get("/ui/").text
    assert "waiting for review" in html and s["recent"][0]["id"] in html
    by_name = [t["task"] for t in client.get("/ui/tasks?sort=name&format=json").json()["tasks"]]
    backwards = [t["task"] for t in client.get("/ui/tasks?sort=name&order=desc&format=json").json()["tasks"]]
    every = sorted(r["task"] for r in ui_sb.views.task_rows(limit=10_000)[0])
    assert by_name == every[:len(by_name)] and backwards == every[::-1][:len(backwards)]
    assert 'href="/ui/tasks?sort=name&amp;order=desc"' in client.get("/ui/tasks?sort=name").text  # click again: flip


def test_the_review_queue_shows_the_text_near_duplicates_and_holds_approval_while_lint_fails(client, ui_sb):
    from skillbase.models import Skill

    from .conftest import draft

    bad = Skill(name="ui-lint-fails", description="Too short.", techniques=["online-softmax"], body="no sections")
    for skill in (bad, draft("ui-review-twin-a"), draft("ui-review-twin-b")):
        ui_sb.propose_skill(skill, agent="test-agent")
    html = client.get("/ui/review").text
    drafts = {d["name"]: d for d in client.get("/ui/review?format=json").json()["drafts"]}
    assert not drafts["ui-lint-fails"]["lint_passed"]
    article = html.split('id="draft-ui-lint-fails"')[1].split("</article>")[0]
    assert "<button disabled" in article and "lint fails" in article
    one = html.split('id="draft-ui-review-twin-a"')[1].split("</article>")[0]
    assert "<details class=\"body\">" in one and "Keep the row in registers" in one
    # the twins differ by their names only: each is flagged as looking like the other
    assert "ui-review-twin-b" in [n["name"] for n in drafts["ui-review-twin-a"]["near_duplicates"]]
    assert "looks like" in one and "ui-review-twin-b" in one


TIME = re.compile(r"(\d[\d,]*(?:\.\d+)?) (µs|ms)\b")


def _timed_over_the_roof(ui_sb):
    """A correct attempt timed at 1 ms or more that reads above 100% of speed of light (the
    seeded KernelBench campaign has several)."""
    rows, _ = ui_sb.views.task_rows(sort="sol", limit=10)
    for row in rows:
        for summary in ui_sb.attempt_history(row["task"]):
            a = ui_sb.get_attempt(summary.id)
            r = a.bench_report
            if r and r.verdict == "correct" and r.timing and r.timing.median_ms >= 1 and r.roofline \
                    and (r.roofline.pct_sol or 0) > 100:
                return a
    pytest.fail("no correct attempt of 1 ms or more above 100% of speed of light in the seeded store")


def test_an_attempt_report_prints_times_as_its_tables_do_and_marks_sol_above_100(client, ui_sb):
    from skillbase.ui.app import duration

    a = _timed_over_the_roof(ui_sb)
    html = client.get(f"/ui/attempts/{a.id}").text
    report = html.split("<h2>Report</h2>")[1].split("<h2>Diff against its parent</h2>")[0].split("<h2>Source")[0]
    headline = report.split("</p>")[0]
    # the stored message says "median 4260.99 µs" for the agent; the page says what its table says
    assert f"median {duration(a.bench_report.timing.median_ms)}" in headline
    assert 'class="over" title="above the measured bandwidth roof' in headline
    for value, unit in TIME.findall(report):  # one rule everywhere: µs below a millisecond, ms above
        v = float(value.replace(",", ""))
        assert v < 999.5 if unit == "µs" else v >= 0.9995, (value, unit)


def test_an_attempt_page_prints_no_raw_float_and_no_unmeasured_interval(client, ui_sb):
    from skillbase.models import CompileReport, new_id

    a = _timed_over_the_roof(ui_sb)
    r = a.bench_report
    odd = a.model_copy(update={
        "id": new_id("att"),
        "compile_report": CompileReport(ok=True, language="triton", arch="sm_90", duration_s=3.2417502403259277),
        # identical order statistics around the median: no interval was measured
        "bench_report": r.model_copy(update={"timing": r.timing.model_copy(update={"ci_rel": 0.0})})})
    ui_sb.memory.record_attempt(odd)
    html = client.get(f"/ui/attempts/{odd.id}").text
    assert "3.2417502403259277" not in html and "duration_s&#34;: 3.242" in html
    assert "95% CI of the median" not in html and "±0" not in html and "±—" not in html


def test_tiny_times_and_spreads_keep_their_digits():
    from skillbase.ui.app import duration, readable, relative, times_in_text

    assert duration(0.0000004) == "0.0004 µs" and duration(0.00042) == "0.42 µs"  # not "0.00 µs"
    assert duration(0.9999) == "0.9999 ms" and duration(1_234_567.0) == "1,235 s"  # not "1e+03 µs", "1.23e+03 s"
    assert relative(1e-7) == "<0.01%" and relative(0.0) == "0%"  # not "1e-05%"
    # the toolchain's text, as the tables print times
    assert times_in_text("median 3294.66 µs >= floor 2892.60 µs") == "median 3.295 ms >= floor 2.893 ms"
    assert times_in_text("IQR 812.25-815.5 µs; predicted 3.0-3.2 ms, 0.34 ms") == \
        "IQR 812–816 µs; predicted 3–3.2 ms, 340 µs"
    assert times_in_text("sm_90, 64 x 81, 1.5x") == "sm_90, 64 x 81, 1.5x"
    assert readable({"s": 3.2417502403259277, "xs": [5.960464477539063e-08, 2], "ok": True}) == {
        "s": 3.242, "xs": [5.96e-08, 2], "ok": True}


def test_an_action_address_visited_and_a_failing_page_get_the_site_error_page(client, monkeypatch):
    visit = client.get("/ui/skills/online-softmax-one-pass/approve")
    assert visit.status_code == 405 and visit.headers["allow"] == "POST"
    assert "<h1>Not a page to open</h1>" in visit.text and '/ui/tasks">' in visit.text
    assert client.get("/ui/skills/online-softmax-one-pass/approve?format=json").json()["error"] == "InvalidInput"

    def broken(*args, **kwargs):
        raise RuntimeError("a bug on the skills page")

    monkeypatch.setattr("skillbase.ui.pages.skills", broken)
    failed = client.get("/ui/skills")
    assert failed.status_code == 500 and "<h1>Something went wrong</h1>" in failed.text
    assert '/ui/review">' in failed.text and "a bug on the skills page" not in failed.text  # the log has it
    assert set(client.get("/ui/skills?format=json").json()) == {"error", "message", "hint"}
