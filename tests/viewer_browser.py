"""The viewer's end-to-end helpers: a consolidated home on either database, the viewer served
from a thread of the test process, and the distribution's Chromium driven by Playwright.

The browser is never downloaded: Playwright launches /usr/bin/chromium (Debian's package,
which `.ci/run` installs). Where it or Playwright is missing the test is skipped with the
reason, except under CI=true, where that fails.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from consolidator.core.config import Settings, build_settings
from consolidator.face.ui.guard import Guard
from consolidator.face.ui.serve import running
from tests.hostile import EXAMPLES, Cli

if TYPE_CHECKING:
    from playwright.sync_api import APIResponse, Browser, Page

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
BILLING_CWD = "/home/dev/projects/billing-api"
# Markup a session or a note may carry: each would run script if a page rendered it as HTML.
HOSTILE = (
    '<script>alert("planted-script")</script> '
    '<img src=x onerror=alert("planted-onerror")> '
    '<a href="#" onclick="alert(1)">x</a> '
    '[read the docs](javascript:alert("planted-link"))'
)


def unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"the viewer's browser tests need Chromium under CI=true: {reason}")
    pytest.skip(f"browser unavailable ({reason}); CI=true makes this a failure")


@contextmanager
def chromium() -> Iterator[Browser]:
    """Debian's Chromium, headless, with no network of its own beyond the page's requests."""
    if not CHROMIUM.exists():
        unavailable(f"{CHROMIUM} is missing (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        unavailable(f"playwright is not installed ({exc})")
    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=str(CHROMIUM), args=list(CHROMIUM_ARGS))
        try:
            yield browser
        finally:
            browser.close()


def viewer_settings(cli: Cli, **extra: str) -> Settings:
    """The settings `cli` runs with, as the viewer reads them."""
    explicit: dict[str, Any] = {
        "home": str(cli.home),
        "db": cli.db_url,
        "sessions": [str(cli.sessions)],
        "backend": "extractive",
        "source_id": "test-host",
        "min_idle_seconds": "0",
        "max_age_days": "0",
        "phase2_cooldown_seconds": "0",
        **extra,
    }
    return build_settings(explicit, environ={})


def consolidated(cli: Cli, *run_options: str) -> Cli:
    """The example sessions copied into `cli`'s sessions folder and consolidated (`run` with
    `run_options`)."""
    for rollout in EXAMPLES.rglob("*.jsonl"):
        target = cli.sessions / rollout.relative_to(EXAMPLES)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(rollout, target)
    cli("run", *run_options)
    return cli


@dataclass
class Opened:
    """A browser page signed in to a running viewer."""

    page: Page
    guard: Guard
    dialogs: list[str]
    console: list[str]
    accept_confirm: bool = True

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.guard.port}"

    def answer(self, dialog: Any) -> None:
        """Record a dialog; answer the viewer's own confirmations as told, dismiss others."""
        self.dialogs.append(dialog.message)
        if dialog.type == "confirm" and self.accept_confirm:
            dialog.accept()
        else:
            dialog.dismiss()

    def post(self, path: str, form: dict[str, str], *, origin: str | None = None) -> APIResponse:
        """A POST with this browser context's cookie, from the viewer's origin unless told."""
        return self.page.request.post(
            self.base + path, form=form, headers={"Origin": origin or self.base}
        )

    def goto(self, path: str) -> int:
        response = self.page.goto(self.base + path)
        assert response is not None
        return response.status


@contextmanager
def signed_in(browser: Browser, settings: Settings, *, read_only: bool = False) -> Iterator[Opened]:
    """The viewer served for `settings`, and a fresh browser context that opened its URL
    (trading the token for the cookie); every dialog and console message is recorded."""
    with running(settings, read_only=read_only) as guard:
        context = browser.new_context()
        try:
            page = context.new_page()
            opened = Opened(page, guard, [], [])
            page.on("dialog", opened.answer)
            page.on("console", lambda message: opened.console.append(message.text))
            response = page.goto(guard.url())
            assert response is not None and response.status == 200
            assert guard.token not in page.url
            yield opened
        finally:
            context.close()
