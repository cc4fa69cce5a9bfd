"""Screenshots of the viewer's main pages for docs/viewer.md, taken on the README's demo home
(the example sessions, consolidated offline) with a note an agent left waiting for approval.

    .venv/bin/python -m tests.viewer_screenshots docs/images
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from consolidator.core.config import build_settings
from consolidator.db import opened_store
from consolidator.face.cli import main
from consolidator.face.ui.overview import DecodedMemory, load_memory
from consolidator.face.ui.serve import running
from consolidator.phases.add_note import add_note
from tests.hostile import BILLING_ID, EXAMPLES
from tests.viewer_browser import BILLING_CWD, chromium

NOTE = (
    "The billing-api fixtures are regenerated with scripts/make_fixtures.py after a schema change"
)


def demo_home(home: Path) -> None:
    try:
        main(
            [
                "run",
                "--quiet",
                "--sessions",
                str(EXAMPLES),
                "--home",
                str(home),
                "--min-idle-seconds",
                "0",
                "--max-age-days",
                "0",
            ]
        )
    except SystemExit as exc:
        if exc.code:
            raise


def take(target: Path) -> list[Path]:
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        home = Path(scratch) / "state"
        demo_home(home)
        settings = build_settings(
            {"home": str(home), "sessions": [str(EXAMPLES)], "backend": "extractive"}, environ={}
        )
        add_note(settings, NOTE, cwd=BILLING_CWD, origin="mcp", hold=True)
        with opened_store(settings) as store:
            memory = load_memory(store, DecodedMemory()).memory
        billing = next(b.block_id for b in memory.blocks if b.applies_to_cwd == BILLING_CWD)
        shots = {
            "viewer-projects.png": "/",
            "viewer-project.png": f"/project/{billing}",
            "viewer-session.png": f"/session/{BILLING_ID}",
            "viewer-review.png": "/review",
            "viewer-search.png": "/search?q=python",
            "viewer-status.png": "/status",
        }
        taken = []
        with chromium() as browser, running(settings) as guard:
            page = browser.new_page(viewport={"width": 1280, "height": 860})
            page.goto(guard.url())
            for name, path in shots.items():
                page.goto(f"http://127.0.0.1:{guard.port}{path}")
                if path == "/":
                    page.locator("details.injected").first.evaluate("d => d.open = true")
                page.screenshot(path=str(target / name), full_page=False)
                taken.append(target / name)
    return taken


if __name__ == "__main__":
    for shot in take(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/images")):
        print(shot)
