"""`consolidator ui` in a real browser (Debian's Chromium through Playwright), on SQLite and
PostgreSQL: every page opens and shows what the commands say, an approved note reaches the
next run's memory, a forgotten session leaves the project page and `context`, a request
without the cookie or the CSRF token is refused, and hostile session text runs no script.

One browser per module (per test worker); each test opens its own context and pages.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from playwright.sync_api import expect

from consolidator.db import opened_store
from consolidator.phases.add_note import add_note
from tests.hostile import BILLING, BILLING_ID, BILLING_QUOTE, Cli, clone_rollout, make_cli
from tests.viewer_browser import (
    BILLING_CWD,
    HOSTILE,
    chromium,
    consolidated,
    signed_in,
    viewer_settings,
)

if TYPE_CHECKING:
    from playwright.sync_api import Browser

pytestmark = pytest.mark.slow

NOTE = (
    "The billing-api fixtures are regenerated with scripts/make_fixtures.py after a schema change"
)
NOTE_WORDS = "regenerated with scripts/make_fixtures.py"
PAGES = ("/", "/review", "/history", "/search", "/status")


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as launched:
        yield launched


@pytest.fixture(params=["sqlite", "postgresql"])
def cli(request: pytest.FixtureRequest, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Cli:
    return make_cli(request, tmp_path, capsys)


def block_of(cli: Cli, folder: str) -> str:
    memory = json.loads(cli("show", "--json").out)["memory"]
    return next(b["block_id"] for b in memory["blocks"] if b["applies_to_cwd"] == folder)


def context_at(cli: Cli, folder: str) -> str:
    return cli("context", "--cwd", folder).out


def test_every_page_opens_and_shows_what_the_commands_say(browser: Browser, cli: Cli) -> None:
    consolidated(cli)
    block_id = block_of(cli, BILLING_CWD)
    with signed_in(browser, viewer_settings(cli)) as opened:
        page = opened.page
        for path in PAGES:
            assert opened.goto(path) == 200, path
            assert page.locator("h1").count() == 1, path

        opened.goto("/")
        shown = page.locator(f"#context-{block_id} pre.context").text_content()
        assert shown == context_at(cli, BILLING_CWD)
        assert BILLING_QUOTE in (shown or "")

        page.locator(f"a[href='/project/{block_id}']").first.click()
        expect(page).to_have_url(re.compile(f"/project/{block_id}$"))
        assert BILLING_QUOTE in page.locator("ul.entries").first.inner_text()
        assert "the user said" in page.inner_text("main")
        page.locator(f"a.session[href='/session/{BILLING_ID}']").first.click()
        expect(page).to_have_url(re.compile(f"/session/{BILLING_ID}$"))
        assert "in_memory" in page.inner_text("p.state")
        assert BILLING_QUOTE in page.inner_text("main")

        opened.goto("/search")
        page.fill("input[name=q]", "python")
        page.select_option("select[name=cwd]", BILLING_CWD)
        page.click("form.search button")
        expect(page).to_have_url(re.compile(r"/search\?q=python&"))
        expect(page.locator("ol.hits li")).not_to_have_count(0)
        expect(page.locator("ol.hits mark")).not_to_have_count(0)

        opened.goto("/history")
        assert page.locator("tbody tr").count() >= 1
        assert not opened.dialogs


def test_an_approved_note_is_in_the_next_runs_memory(browser: Browser, cli: Cli) -> None:
    consolidated(cli)
    settings = viewer_settings(cli)
    held = add_note(settings, NOTE, cwd=BILLING_CWD, origin="mcp", hold=True)
    assert held.status == "pending"
    with signed_in(browser, settings) as opened:
        page = opened.page
        opened.goto("/review")
        note = page.locator("article.note", has_text=held.note_id)
        assert NOTE_WORDS in note.inner_text()
        note.get_by_role("button", name="Approve note").click()
        assert "approved" in page.inner_text("#outcome")
        opened.goto("/review")
        assert page.locator("article.note").count() == 0

    assert NOTE_WORDS not in context_at(cli, BILLING_CWD)
    cli("run")
    assert NOTE_WORDS in context_at(cli, BILLING_CWD)


def test_a_pending_version_is_reviewed_as_a_diff_and_approved(browser: Browser, cli: Cli) -> None:
    consolidated(cli, "--review", "on")
    assert BILLING_QUOTE not in context_at(cli, BILLING_CWD)
    with signed_in(browser, viewer_settings(cli, review="on")) as opened:
        page = opened.page
        opened.goto("/review")
        pending = page.locator("article.pending").first
        assert BILLING_QUOTE in " ".join(pending.locator("ul.diff li.added").all_inner_texts())
        assert pending.locator(f"a.session[href='/session/{BILLING_ID}']").count() >= 1
        pending.get_by_role("button", name="Approve").click()
        assert "approved and published" in page.inner_text("#outcome")
        opened.goto("/history")
        assert page.locator("tbody tr").count() == 1
    assert BILLING_QUOTE in context_at(cli, BILLING_CWD)


def test_a_forgotten_session_leaves_the_project_page_and_context(
    browser: Browser, cli: Cli
) -> None:
    consolidated(cli)
    block_id = block_of(cli, BILLING_CWD)
    assert BILLING_QUOTE in context_at(cli, BILLING_CWD)
    with signed_in(browser, viewer_settings(cli)) as opened:
        page = opened.page
        opened.goto(f"/project/{block_id}")
        assert BILLING_QUOTE in page.inner_text("main")

        opened.goto(f"/session/{BILLING_ID}")
        page.get_by_role("button", name="Forget this session").click()
        assert "forgotten" in page.inner_text("#outcome")
        assert any(BILLING_ID in message for message in opened.dialogs)

        opened.goto(f"/project/{block_id}")
        assert BILLING_QUOTE not in page.inner_text("main")
        opened.goto("/")
        assert BILLING_QUOTE not in page.inner_text("main")
        assert BILLING_QUOTE not in context_at(cli, BILLING_CWD)

        # Rolling back to the version before the forget keeps the session forgotten.
        opened.goto("/history")
        before = page.locator("tbody tr").count()
        page.locator("tbody tr").last.get_by_role("button", name="Roll back to this").click()
        assert "restored as version" in page.inner_text("#outcome")
        opened.goto("/history")
        assert page.locator("tbody tr").count() == before + 1
    assert BILLING_QUOTE not in context_at(cli, BILLING_CWD)


def test_a_forget_that_is_not_confirmed_changes_nothing(browser: Browser, cli: Cli) -> None:
    consolidated(cli)
    with signed_in(browser, viewer_settings(cli)) as opened:
        opened.accept_confirm = False
        opened.goto(f"/session/{BILLING_ID}")
        opened.page.get_by_role("button", name="Forget this session").click()
        opened.page.wait_for_load_state("networkidle")
        assert opened.page.url.endswith(f"/session/{BILLING_ID}")
        assert opened.page.locator("#outcome").count() == 0
        assert any(BILLING_ID in message for message in opened.dialogs)

        without_script = opened.post(
            f"/session/{BILLING_ID}/forget", {"csrf": opened.guard.csrf_token}
        )
        assert without_script.status == 200
        assert "Yes, go ahead" in without_script.text()
    assert BILLING_QUOTE in context_at(cli, BILLING_CWD)


def test_requests_without_the_cookie_or_the_csrf_token_are_refused(
    browser: Browser, cli: Cli
) -> None:
    consolidated(cli)
    settings = viewer_settings(cli)
    with signed_in(browser, settings) as opened:
        forget = f"/session/{BILLING_ID}/forget"
        assert opened.post(forget, {"confirmed": "yes"}).status == 403
        wrong = {"csrf": "0" * 64, "confirmed": "yes"}
        assert opened.post(forget, wrong).status == 403
        elsewhere = {"csrf": opened.guard.csrf_token, "confirmed": "yes"}
        assert opened.post(forget, elsewhere, origin="http://evil.example").status == 403

        stranger = browser.new_context()
        try:
            response = stranger.new_page().goto(opened.base + "/")
            assert response is not None and response.status == 403
            wrong = stranger.new_page().goto(opened.base + "/?token=not-the-token")
            assert wrong is not None and wrong.status == 403
        finally:
            stranger.close()
    assert BILLING_QUOTE in context_at(cli, BILLING_CWD)

    with signed_in(browser, settings, read_only=True) as reading:
        reading.goto(f"/session/{BILLING_ID}")
        assert reading.page.get_by_role("button", name="Forget this session").count() == 0
        allowed = {"csrf": reading.guard.csrf_token, "confirmed": "yes"}
        assert reading.post(f"/session/{BILLING_ID}/forget", allowed).status == 403
    assert BILLING_QUOTE in context_at(cli, BILLING_CWD)


HOSTILE_ID = "019aaaaa-0000-7000-8000-00000000beef"
HOSTILE_CWD = "/home/dev/projects/hostile-app"
ONLY_OUR_SCRIPT = """() => ({
    scripts: [...document.scripts].map(s => s.getAttribute('src')),
    handlers: [...document.querySelectorAll('*')].flatMap(
        e => [...e.attributes].map(a => a.name).filter(n => n.startsWith('on'))),
    links: [...document.querySelectorAll('a[href]')].map(a => a.getAttribute('href'))
        .filter(h => !h.startsWith('/')),
})"""


def test_hostile_session_text_is_shown_as_text_and_runs_nothing(browser: Browser, cli: Cli) -> None:
    hostile_said = f"{BILLING_QUOTE} {HOSTILE}"
    clone_rollout(
        cli.sessions / "hostile" / f"rollout-2026-11-20T10-00-00-{HOSTILE_ID}.jsonl",
        source=BILLING,
        session_id=HOSTILE_ID,
        cwd=HOSTILE_CWD,
        replace=[(BILLING_QUOTE, hostile_said)],
    )
    consolidated(cli)
    settings = viewer_settings(cli)
    with opened_store(settings) as store:
        store.held_notes.hold_note("note-hostile", HOSTILE, HOSTILE_CWD, "mcp")
        store.quarantine.quarantine_input(reason=HOSTILE, text=HOSTILE, thread_id=HOSTILE_ID)
    blocks = json.loads(cli("show", "--json").out)["memory"]["blocks"]
    paths = [
        *PAGES,
        "/search?q=planted",
        f"/session/{HOSTILE_ID}",
        *(f"/project/{block['block_id']}" for block in blocks),
    ]
    with signed_in(browser, settings) as opened:
        page = opened.page
        shown = ""
        for path in paths:
            assert opened.goto(path) in (200, 404), path
            page.wait_for_load_state("load")
            found = page.evaluate(ONLY_OUR_SCRIPT)
            assert found == {"scripts": ["/static/viewer.js"], "handlers": [], "links": []}, path
            shown += page.inner_text("body")
        assert not opened.dialogs, opened.dialogs
        assert not [m for m in opened.console if "planted" in m]
        assert '<script>alert("planted-script")</script>' in shown
        assert re.search(r"onerror=alert\(\"planted-onerror\"\)", shown)
        assert "javascript:alert" in shown
