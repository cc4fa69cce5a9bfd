"""Who may reach `consolidator ui`, over plain HTTP on both databases: only the holder of the
printed URL's token (as a cookie), at the viewer's own host, and for a change only a POST from
the viewer's origin with the page's CSRF token; read-only refuses every change. Pages render
while another process holds SQLite's write lock, so rendering never needs it."""

from __future__ import annotations

import http.client
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import pytest

from consolidator.core.config import Settings, build_settings
from consolidator.db import opened_store
from consolidator.face.ui.guard import Guard
from consolidator.face.ui.pages import highlighted
from consolidator.face.ui.serve import running

PAGES = ("/", "/review", "/history", "/search?q=python", "/status", "/session/none")


@pytest.fixture
def settings(migrated_url: str, tmp_path: Path) -> Settings:
    return build_settings(
        {"home": str(tmp_path / "home"), "db": migrated_url, "backend": "extractive"}, environ={}
    )


@pytest.fixture
def guard(settings: Settings) -> Iterator[Guard]:
    with running(settings) as served:
        yield served


def request(
    guard: Guard,
    method: str,
    path: str,
    *,
    cookie: bool = True,
    headers: dict[str, str] | None = None,
    form: dict[str, str] | None = None,
) -> http.client.HTTPResponse:
    connection = http.client.HTTPConnection("127.0.0.1", guard.port, timeout=30)
    sent = {"Host": f"127.0.0.1:{guard.port}", **(headers or {})}
    if cookie:
        sent["Cookie"] = f"{guard.cookie_name}={guard.token}"
    body = None
    if form is not None:
        body = urlencode(form)
        sent["Content-Type"] = "application/x-www-form-urlencoded"
    connection.request(method, path, body=body, headers=sent)
    response = connection.getresponse()
    response.read()
    connection.close()
    return response


def test_only_the_printed_token_opens_the_viewer(guard: Guard) -> None:
    assert request(guard, "GET", "/", cookie=False).status == 403
    assert request(guard, "GET", "/?token=guessed", cookie=False).status == 403
    assert request(guard, "GET", "/static/viewer.js", cookie=False).status == 403

    first = request(guard, "GET", guard.url().split(f":{guard.port}", 1)[1], cookie=False)
    assert first.status == 303
    assert first.getheader("location") == "/"
    cookie = first.getheader("set-cookie") or ""
    assert cookie.startswith(f"{guard.cookie_name}={guard.token};")
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie

    elsewhere = request(guard, "GET", f"//evil.example/?token={guard.token}", cookie=False)
    assert elsewhere.status == 303
    assert elsewhere.getheader("location") == "/evil.example/"

    page = request(guard, "GET", "/")
    assert page.status == 200
    assert "script-src 'self'" in (page.getheader("content-security-policy") or "")
    assert page.getheader("x-frame-options") == "DENY"


def test_another_host_name_is_refused(guard: Guard) -> None:
    rebound = {"Host": f"attacker.example:{guard.port}"}
    assert request(guard, "GET", "/", headers=rebound).status == 400


def test_a_change_needs_the_csrf_token_and_the_viewers_origin(guard: Guard) -> None:
    path = "/review/note/note-missing/reject"
    origin = {"Origin": f"http://127.0.0.1:{guard.port}"}
    token = {"csrf": guard.csrf_token}
    assert request(guard, "POST", path, headers=origin, form={}).status == 403
    assert request(guard, "POST", path, headers=origin, form={"csrf": "x" * 64}).status == 403
    assert request(guard, "POST", path, form=token).status == 403
    foreign = {"Origin": "http://evil.example"}
    assert request(guard, "POST", path, headers=foreign, form=token).status == 403
    foreign_referer = {"Referer": "http://evil.example/page"}
    assert request(guard, "POST", path, headers=foreign_referer, form=token).status == 403
    assert request(guard, "POST", path, cookie=False, headers=origin, form=token).status == 403

    # Let through: the change itself answers that there is no such note.
    assert request(guard, "POST", path, headers=origin, form=token).status == 409
    referer = {"Referer": f"http://localhost:{guard.port}/review"}
    assert request(guard, "POST", path, headers=referer, form=token).status == 409
    assert request(guard, "PUT", path, headers=origin, form=token).status == 405


def test_clear_all_asks_first_and_clears_once_confirmed(guard: Guard, settings: Settings) -> None:
    with opened_store(settings) as store:
        store.held_notes.hold_note("note-kept", "a note to keep", None, "mcp")
    origin = {"Origin": f"http://127.0.0.1:{guard.port}"}
    asked = request(guard, "POST", "/clear-all", headers=origin, form={"csrf": guard.csrf_token})
    assert asked.status == 200
    with opened_store(settings) as store:
        assert [n.note_id for n in store.held_notes.held_notes()] == ["note-kept"]

    confirmed = {"csrf": guard.csrf_token, "confirmed": "yes"}
    assert request(guard, "POST", "/clear-all", headers=origin, form=confirmed).status == 200
    with opened_store(settings) as store:
        assert store.held_notes.held_notes() == []


def test_read_only_refuses_every_change(settings: Settings) -> None:
    with running(settings, read_only=True) as guard:
        origin = {"Origin": f"http://127.0.0.1:{guard.port}"}
        token = {"csrf": guard.csrf_token}
        for path in ("/review/note/note-x/reject", "/clear-all", "/history/1/rollback"):
            assert request(guard, "POST", path, headers=origin, form=token).status == 403
        assert request(guard, "GET", "/").status == 200


def test_pages_render_while_another_process_holds_the_write_lock(
    settings: Settings, guard: Guard
) -> None:
    if not settings.db_url.startswith("sqlite"):
        pytest.skip("SQLite's one writer lock; PostgreSQL readers never wait for writers")
    writer = sqlite3.connect(settings.db_url.removeprefix("sqlite:///"), timeout=0)
    try:
        writer.execute("BEGIN IMMEDIATE")
        for path in PAGES:
            assert request(guard, "GET", path).status in (200, 404), path
    finally:
        writer.rollback()
        writer.close()


def test_a_snippet_is_split_into_text_and_matches() -> None:
    assert highlighted("run [make] then [make test] ...") == (
        ("run ", False),
        ("make", True),
        (" then ", False),
        ("make test", True),
        (" ...", False),
    )
    assert highlighted("<b>[x]</b>") == (("<b>", False), ("x", True), ("</b>", False))
