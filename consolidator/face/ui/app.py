"""The viewer's URLs: one server-rendered page per GET, one change per POST.

Pages are read first (each store verb in a read transaction of its own) and rendered after,
so no transaction is open while a template renders. Every template is autoescaped: text from
a session, a note or a model reaches the page as text, never as markup, and links are built
here from relative app paths only.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from consolidator.core.config import Settings
from consolidator.core.errors import ConsolidatorError
from consolidator.db.store import Store
from consolidator.face.ui import actions, overview, pages
from consolidator.face.ui.guard import CSRF_FIELD, Guard, GuardMiddleware

HERE: Final = Path(__file__).resolve().parent
CONFIRMED_FIELD: Final = "confirmed"
NAVIGATION: Final = (
    ("/", "Projects"),
    ("/review", "Review"),
    ("/history", "History"),
    ("/search", "Search"),
    ("/status", "Status"),
)


def href(*parts: object, **query: object) -> str:
    """A relative app URL: each part quoted as one path segment, then the query."""
    path = "/" + "/".join(quote(str(part), safe="") for part in parts)
    given = [(k, str(v)) for k, v in query.items() if v not in (None, "")]
    if not given:
        return path
    return path + "?" + "&".join(f"{quote(k)}={quote(v, safe='')}" for k, v in given)


def template_environment() -> Environment:
    environment = Environment(
        loader=FileSystemLoader(HERE / "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.globals.update(href=href, navigation=NAVIGATION, csrf_field=CSRF_FIELD)
    return environment


@dataclass(frozen=True)
class Viewer:
    store: Store
    settings: Settings
    guard: Guard
    templates: Environment
    decoded: overview.DecodedMemory

    def page(self, request: Request, name: str, status: int = 200, **values: Any) -> Response:
        html = self.templates.get_template(name).render(
            path=request.url.path,
            csrf=self.guard.csrf_token,
            read_only=self.guard.read_only,
            database=self.settings.db_url_for_display,
            **values,
        )
        return HTMLResponse(html, status_code=status)


def _viewer(request: Request) -> Viewer:
    viewer: Viewer = request.app.state.viewer
    return viewer


def projects_page(request: Request) -> Response:
    viewer = _viewer(request)
    return viewer.page(
        request,
        "projects.html",
        data=overview.projects(viewer.store, viewer.settings, viewer.decoded),
    )


def project_page(request: Request) -> Response:
    viewer = _viewer(request)
    block_id = request.path_params["block_id"]
    found = overview.project(viewer.store, viewer.settings, viewer.decoded, block_id)
    if found is None:
        return viewer.page(request, "missing.html", 404, what=f"project block {block_id}")
    return viewer.page(request, "project.html", data=found)


def session_page(request: Request) -> Response:
    viewer = _viewer(request)
    thread_id = request.path_params["thread_id"]
    found = pages.session(viewer.store, viewer.settings, viewer.decoded, thread_id)
    if found is None:
        return viewer.page(request, "missing.html", 404, what=f"session {thread_id}")
    return viewer.page(request, "session.html", data=found)


def review_page(request: Request) -> Response:
    viewer = _viewer(request)
    return viewer.page(request, "review.html", data=pages.review(viewer.store, viewer.settings))


def history_page(request: Request) -> Response:
    viewer = _viewer(request)
    return viewer.page(request, "history.html", versions=pages.history(viewer.store))


def search_page(request: Request) -> Response:
    viewer = _viewer(request)
    query = request.query_params.get("q", "")
    cwd = request.query_params.get("cwd") or None
    found = pages.search(viewer.store, viewer.settings, viewer.decoded, query, cwd)
    return viewer.page(request, "search.html", data=found)


def status_page(request: Request) -> Response:
    viewer = _viewer(request)
    return viewer.page(request, "status.html", data=pages.status(viewer.store, viewer.settings))


Change = Callable[[Viewer, Mapping[str, Any], Mapping[str, str]], actions.Done]


def posting(change: Change, confirm: str | None = None) -> Callable[[Request], Awaitable[Response]]:
    """A POST endpoint: the CSRF token checked, confirmation asked for when `confirm` says
    what is about to happen, then `change` made off the event loop and its outcome shown."""

    async def endpoint(request: Request) -> Response:
        viewer = _viewer(request)
        form = {k: v for k, v in (await request.form()).items() if isinstance(v, str)}
        if not viewer.guard.csrf_matches(form.get(CSRF_FIELD)):
            return PlainTextResponse("the form's CSRF token is missing or wrong\n", 403)
        if confirm is not None and form.get(CONFIRMED_FIELD) != "yes":
            return viewer.page(request, "confirm.html", question=confirm, action=request.url.path)
        try:
            done = await run_in_threadpool(change, viewer, request.path_params, form)
        except ConsolidatorError as exc:
            return viewer.page(request, "done.html", 409, message=str(exc), failed=True)
        return viewer.page(request, "done.html", message=done.message, done=done, failed=False)

    return endpoint


def _reason(form: Mapping[str, str]) -> str | None:
    return form.get("reason", "").strip() or None


def routes() -> list[BaseRoute]:
    p = posting
    return [
        Route("/", projects_page),
        Route("/project/{block_id}", project_page),
        Route("/session/{thread_id}", session_page),
        Route("/review", review_page),
        Route("/history", history_page),
        Route("/search", search_page),
        Route("/status", status_page),
        Route(
            "/session/{thread_id}/forget",
            p(
                lambda v, a, f: actions.forget(v.store, v.settings, a["thread_id"]),
                "Forget this session everywhere, with every entry only it supports?",
            ),
            methods=["POST"],
        ),
        Route(
            "/review/version/{pending_id:int}/approve",
            p(lambda v, a, f: actions.approve_version(v.store, v.settings, a["pending_id"])),
            methods=["POST"],
        ),
        Route(
            "/review/version/{pending_id:int}/reject",
            p(lambda v, a, f: actions.reject_version(v.store, a["pending_id"], _reason(f))),
            methods=["POST"],
        ),
        Route(
            "/review/note/{note_id}/approve",
            p(lambda v, a, f: actions.approve_note(v.settings, a["note_id"])),
            methods=["POST"],
        ),
        Route(
            "/review/note/{note_id}/reject",
            p(lambda v, a, f: actions.reject_note(v.store, a["note_id"])),
            methods=["POST"],
        ),
        Route(
            "/review/skill/{name}/approve",
            p(lambda v, a, f: actions.decide_skill(v.store, v.settings, a["name"], True)),
            methods=["POST"],
        ),
        Route(
            "/review/skill/{name}/reject",
            p(lambda v, a, f: actions.decide_skill(v.store, v.settings, a["name"], False)),
            methods=["POST"],
        ),
        Route(
            "/history/{version:int}/rollback",
            p(
                lambda v, a, f: actions.rollback(v.store, v.settings, a["version"]),
                "Make this version current again (as a new version)?",
            ),
            methods=["POST"],
        ),
        Route(
            "/clear-all",
            p(
                lambda v, a, f: actions.clear_all(v.store, v.settings),
                "Erase all memory? Sessions still on disk are read again by the next run.",
            ),
            methods=["POST"],
        ),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]


def build_app(store: Store, settings: Settings, guard: Guard) -> Starlette:
    app = Starlette(routes=routes(), middleware=[Middleware(GuardMiddleware, guard=guard)])
    app.state.viewer = Viewer(
        store, settings, guard, template_environment(), overview.DecodedMemory()
    )
    return app
