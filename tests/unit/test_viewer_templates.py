"""The viewer's templates never mark text as safe HTML, and its links stay relative app paths
whatever a session names its ids."""

from __future__ import annotations

import re

from consolidator.face.ui.app import HERE, href, template_environment

TEMPLATES = sorted((HERE / "templates").glob("*.html"))
UNESCAPED = re.compile(r"\|\s*safe\b|autoescape\s+false|Markup\(", re.IGNORECASE)


def test_no_template_turns_escaping_off() -> None:
    assert TEMPLATES
    found = [p.name for p in TEMPLATES if UNESCAPED.search(p.read_text(encoding="utf-8"))]
    assert found == []
    assert template_environment().autoescape is True


def test_links_quote_each_segment_as_one_relative_path_segment() -> None:
    assert href("session", "019a-ok") == "/session/019a-ok"
    assert href("session", "//evil.example/x") == "/session/%2F%2Fevil.example%2Fx"
    assert href("session", 'a"><script>', "forget") == "/session/a%22%3E%3Cscript%3E/forget"
    assert href("search", q="a b&c=d", cwd=None) == "/search?q=a%20b%26c%3Dd"
    assert href("session", "javascript:alert(1)").startswith("/session/javascript%3Aalert")


def test_a_template_renders_session_text_escaped() -> None:
    page = template_environment().from_string("<p>{{ text }}</p>").render(text="<b onclick=x>")
    assert page == "<p>&lt;b onclick=x&gt;</p>"
