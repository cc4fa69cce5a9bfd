"""Which requests may reach the viewer: the one person who holds the printed URL, from the
viewer's own pages.

- The server listens on loopback only, and a request must name the viewer's own host and port
  (`Host`), so a web page cannot reach it through a name it rebinds to 127.0.0.1.
- The URL printed at start carries a random token (as Jupyter's does); the first visit trades
  it for a cookie, and every later request must bring the cookie.
- A change is a POST that comes from the viewer's own origin (`Origin`, else `Referer`) and
  carries the page's CSRF token; in read-only mode every POST is refused.
- Every response forbids inline scripts, other origins and framing (Content-Security-Policy),
  a second line of defence behind the templates' escaping.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from http.cookies import CookieError, SimpleCookie
from typing import Any, Final
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

LOOPBACK: Final = "127.0.0.1"
TOKEN_PARAMETER: Final = "token"
CSRF_FIELD: Final = "csrf"
_SAFE_METHODS: Final = frozenset({"GET", "HEAD"})
SECURITY_HEADERS: Final[tuple[tuple[bytes, bytes], ...]] = (
    (
        b"content-security-policy",
        b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        b"form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    (b"x-frame-options", b"DENY"),
    (b"cache-control", b"no-store"),
)


def new_token() -> str:
    return secrets.token_urlsafe(32)


@dataclass(frozen=True)
class Guard:
    """The viewer's secret and where it listens; `read_only` refuses every change."""

    token: str
    port: int
    read_only: bool = False

    @property
    def cookie_name(self) -> str:
        """Named for the port: cookies ignore ports, and two viewers may run side by side."""
        return f"consolidator_ui_{self.port}"

    @property
    def csrf_token(self) -> str:
        """Derived from the secret, so a page can carry it and no other site can know it."""
        return hmac.new(self.token.encode(), b"csrf", hashlib.sha256).hexdigest()

    @property
    def origins(self) -> frozenset[str]:
        return frozenset({f"http://{LOOPBACK}:{self.port}", f"http://localhost:{self.port}"})

    @property
    def hosts(self) -> frozenset[str]:
        return frozenset({f"{LOOPBACK}:{self.port}", f"localhost:{self.port}"})

    def url(self) -> str:
        """The URL to open, token included."""
        return f"http://{LOOPBACK}:{self.port}/?{urlencode({TOKEN_PARAMETER: self.token})}"

    def csrf_matches(self, value: object) -> bool:
        return isinstance(value, str) and hmac.compare_digest(value, self.csrf_token)

    def refusal(self, scope: Scope) -> tuple[int, str] | None:
        """Why this request may not reach the app (status, reason), or None when it may."""
        headers = _headers(scope)
        if headers.get("host") not in self.hosts:
            return 400, "this viewer answers only at its own address"
        if scope["method"] not in _SAFE_METHODS | {"POST"}:
            return 405, "only GET and POST"
        if not self._cookie_matches(headers.get("cookie", "")):
            return 403, "open the URL `consolidator ui` printed (it carries the access token)"
        if scope["method"] in _SAFE_METHODS:
            return None
        if self.read_only:
            return 403, "this viewer runs read-only (--read-only): nothing can be changed"
        if _origin_of(headers) not in self.origins:
            return 403, "a change must come from the viewer's own pages"
        return None

    def _cookie_matches(self, header: str) -> bool:
        cookie = SimpleCookie()
        try:
            cookie.load(header)
        except CookieError:
            return False
        morsel = cookie.get(self.cookie_name)
        return morsel is not None and hmac.compare_digest(morsel.value, self.token)

    def token_in(self, scope: Scope) -> bool:
        given = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        value = given.get(TOKEN_PARAMETER)
        return value is not None and hmac.compare_digest(value, self.token)


def _headers(scope: Scope) -> dict[str, str]:
    return {
        name.decode("latin-1").lower(): value.decode("latin-1")
        for name, value in scope.get("headers", [])
    }


def _origin_of(headers: dict[str, str]) -> str | None:
    """The origin a POST came from: its `Origin`, else the origin of its `Referer`."""
    origin = headers.get("origin")
    if origin and origin != "null":
        return origin
    referer = urlsplit(headers.get("referer", ""))
    if referer.scheme and referer.netloc:
        return f"{referer.scheme}://{referer.netloc}"
    return None


class GuardMiddleware:
    """Applies `Guard` to every request, trades the URL's token for a cookie and adds the
    security headers to every response."""

    def __init__(self, app: ASGIApp, guard: Guard) -> None:
        self.app = app
        self.guard = guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        guard = self.guard
        if (
            scope["method"] in _SAFE_METHODS
            and _headers(scope).get("host") in guard.hosts
            and guard.token_in(scope)
        ):
            await _send_cookie(scope, send, guard)
            return
        refused = guard.refusal(scope)
        if refused is not None:
            await _send_plain(send, *refused)
            return

        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
            await send(message)

        await self.app(scope, receive, secured)


async def _send_cookie(scope: Scope, send: Send, guard: Guard) -> None:
    """Set the cookie and send the browser to the same page without the token in its URL."""
    query = [
        (k, v)
        for k, v in parse_qsl(scope.get("query_string", b"").decode("latin-1"))
        if k != TOKEN_PARAMETER
    ]
    # One leading slash: `//host` would send the browser to another site.
    path = "/" + str(scope.get("path", "/")).lstrip("/")
    target = quote(path) + (f"?{urlencode(query)}" if query else "")
    cookie = f"{guard.cookie_name}={guard.token}; HttpOnly; SameSite=Strict; Path=/"
    await send(
        {
            "type": "http.response.start",
            "status": 303,
            "headers": [
                (b"location", target.encode("latin-1")),
                (b"set-cookie", cookie.encode("latin-1")),
                *SECURITY_HEADERS,
            ],
        }
    )
    await send({"type": "http.response.body", "body": b""})


async def _send_plain(send: Send, status: int, reason: str) -> None:
    body = f"{reason}\n".encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
                *SECURITY_HEADERS,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
