"""The curation UI in a real headless browser: Debian's Chromium, driven by Playwright (never a
downloaded browser), against `skillbase ui` started as a subprocess with a token. Every page
renders without a console error and the task page draws its three plots; a draft approved
through the review queue shows up as approved in `skillbase skills list`.

Screenshots of each page go to $SKILLBASE_UI_SCREENSHOTS when set (docs/screenshots is made
that way), else to the test's tmp directory.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from .conftest import ROOT, server_env
from .servers import free_port

TOKEN = "browser-test-token-0123456789"
CHROMIUM = os.environ.get("SKILLBASE_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")

playwright_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install playwright)")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no Chromium binary (apt-get install chromium, "
                                                          "or set SKILLBASE_CHROMIUM)")


@pytest.fixture(scope="module")
def ui_url(ui_home):
    """`skillbase ui` on a loopback port, with a token, over the shared store."""
    port = free_port()
    env = server_env(ui_home, SKILLBASE_TOKEN=TOKEN)
    proc = subprocess.Popen([sys.executable, "-m", "skillbase.console", "ui", "--port", str(port)], env=env,
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}/ui"
    deadline = time.monotonic() + 120
    try:
        while True:
            try:
                if httpx.get(f"{base}/", headers={"authorization": f"Bearer {TOKEN}"}).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"`skillbase ui` did not start: {proc.stderr.read() if proc.poll() is not None else ''}")
            time.sleep(0.2)
        yield base
    finally:
        proc.terminate()
        proc.wait(20)


@pytest.fixture(scope="module")
def page(ui_url):
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        context = browser.new_context(viewport={"width": 1360, "height": 900})
        pg = context.new_page()
        pg.problems = []
        pg.on("console", lambda m: m.type == "error" and pg.problems.append(f"console: {m.text}"))
        pg.on("pageerror", lambda e: pg.problems.append(f"page error: {e}"))
        # A browser sends no bearer token: it is sent to the login page, which trades the token (and a
        # curator's name) for a session cookie.
        pg.goto(ui_url + "/review", wait_until="networkidle")
        assert "/ui/login" in pg.url
        pg.fill("input[name=token]", TOKEN)
        pg.fill("input[name=curator]", "Browser Curator")
        pg.locator("button", has_text="log in").click()
        pg.wait_for_url("**/ui/review")
        cookie = next(c for c in context.cookies() if c["name"] == "skillbase_session")
        assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
        assert pg.problems == [], pg.problems
        yield pg
        browser.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    out = os.environ.get("SKILLBASE_UI_SCREENSHOTS")
    path = Path(out) if out else tmp_path_factory.mktemp("screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path


def test_every_page_renders_without_console_errors(page, ui_url, ui_sb, shots):
    child = next(a for a in ui_sb.attempt_history("row_softmax") if a.parent_id)
    pages = {"tasks": "/tasks", "task": "/tasks/row_softmax", "attempt": f"/attempts/{child.id}",
             "skills": "/skills", "skill": "/skills/online-softmax-one-pass", "review": "/review",
             "search": "/search?q=rows+too+wide+for+registers&task=row_softmax"}
    for name, path in pages.items():
        page.problems.clear()
        # The first recall loads the embedding model and indexes: slow on a busy CI machine.
        response = page.goto(ui_url + path, wait_until="networkidle", timeout=180_000)
        assert response.status == 200, (name, response.status)
        if name == "task":
            for plot in ("plot-lineage", "plot-speedup", "plot-roofline"):
                page.wait_for_selector(f"#{plot} .main-svg", timeout=20_000)
            assert page.locator("#plot-lineage .scatterlayer .point").count() == len(ui_sb.attempt_history("row_softmax"))
            # axis titles drawn (plotly.js drops a title given as a bare string) and nodes labelled
            assert page.locator("#plot-speedup .g-xtitle text").text_content().startswith("attempt")
            assert page.locator("#plot-roofline .g-ytitle text").text_content() == "achieved TFLOP/s"
            ticks = page.locator("#plot-speedup .xtick text").all_text_contents()
            assert ticks and all(t.replace("−", "-").lstrip("-").isdigit() for t in ticks), ticks
            labels = page.locator("#plot-lineage .textpoint text").all_text_contents()
            assert any(label.endswith("x") for label in labels), labels
        page.screenshot(path=str(shots / f"{name}.jpg"), full_page=True, type="jpeg", quality=70)
        assert page.problems == [], (name, page.problems)


def test_a_click_on_a_lineage_node_opens_the_attempt(page, ui_url):
    page.goto(ui_url + "/tasks/row_softmax", wait_until="networkidle")
    page.wait_for_selector("#plot-lineage .scatterlayer .point")
    page.locator("#plot-lineage .scatterlayer .point").last.click(force=True)
    page.wait_for_url("**/ui/attempts/att_*", timeout=10_000)
    assert page.locator("h1").inner_text().startswith("att_")


def test_a_draft_approved_in_the_browser_is_approved_for_the_cli(page, ui_url, ui_home, ui_sb):
    page.problems.clear()
    page.goto(ui_url + "/review", wait_until="networkidle")
    form = page.locator("#draft-ui-browser-approve form").filter(has=page.locator("button", has_text="approve"))
    form.locator("input[name=reason]").fill("lint clean; measured on row_softmax")
    form.locator("button").click()
    page.wait_for_url("**/ui/review?done=*")
    assert "approved ui-browser-approve" in page.locator(".flash").inner_text()
    assert page.locator("#draft-ui-browser-approve").count() == 0 and page.problems == []
    out = subprocess.run([sys.executable, "-m", "skillbase.console", "skills", "list", "--json"],
                         env=server_env(ui_home), cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    listed = {s["name"]: s for s in json.loads(out.stdout)}
    assert listed["ui-browser-approve"]["status"] == "approved"
