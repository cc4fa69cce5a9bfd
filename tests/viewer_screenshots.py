"""Screenshots of the viewer's main pages for docs/viewer.md, taken on the README's demo home
(the example sessions, consolidated offline, the last one under review) with a note an agent
left waiting for approval.

    .venv/bin/python -m tests.viewer_screenshots docs/images
"""

from __future__ import annotations

import shutil
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


def run(home: Path, sessions: Path, *options: str) -> None:
    flags = ["--min-idle-seconds", "0", "--max-age-days", "0", "--phase2-cooldown-seconds", "0"]
    try:
        main(["run", "--quiet", "--sessions", str(sessions), "--home", str(home), *flags, *options])
    except SystemExit as exc:
        if exc.code:
            raise


def demo_home(home: Path, sessions: Path) -> None:
    """The demo home, its last session consolidated under review so that one version waits."""
    shutil.copytree(EXAMPLES, sessions)
    last = sorted(sessions.rglob("*.jsonl"))[-1]
    held_back = last.rename(last.with_suffix(".later"))
    run(home, sessions)
    held_back.rename(last)
    run(home, sessions, "--review", "on")


def take(target: Path) -> list[Path]:
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        home, sessions = Path(scratch) / "state", Path(scratch) / "sessions"
        demo_home(home, sessions)
        settings = build_settings(
            {
                "home": str(home),
                "sessions": [str(sessions)],
                "backend": "extractive",
                "review": "on",
            },
            environ={},
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
