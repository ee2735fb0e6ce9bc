"""The console's login session is opaque: the cookie holds a random token, never the API key; the
session lives in the store, expires, ends at logout and with its key's revocation, and its cookie is
HttpOnly, SameSite and (over https) Secure. Driven through the ASGI app with httpx."""

import asyncio
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from sqlalchemy import select, update

from envloop.console import api_and_console
from envloop.services.context import Context
from envloop.services.keys import create_key, list_keys, revoke_key
from envloop.store.tables import ConsoleSession

pytestmark = pytest.mark.parametrize("store_url", ["sqlite", "postgresql"], indirect=True)


class Browser:
    """A browser on the console: keeps cookies, follows no redirect."""

    def __init__(self, ctx: Context, scheme: str = "http") -> None:
        self.client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=api_and_console(ctx)), base_url=f"{scheme}://console.test"
        )

    def get(self, path: str) -> httpx.Response:
        return asyncio.run(self.client.get(path))

    def post(self, path: str, data: dict[str, str]) -> httpx.Response:
        return asyncio.run(self.client.post(path, data=data))

    def log_in(self, key: str) -> httpx.Response:
        form = self.get("/login?next=/").text
        token = re.search(r'name="login_token" value="([^"]+)"', form)
        assert token is not None
        return self.post("/login", {"key": key, "login_token": token.group(1), "next": "/"})


@pytest.fixture
def key(ctx: Context) -> Iterator[str]:
    yield create_key(ctx, "console").key


def test_the_cookie_holds_an_opaque_token_never_the_key(ctx: Context, key: str) -> None:
    browser = Browser(ctx)
    answer = browser.log_in(key)
    assert answer.status_code == 303
    header = answer.headers["set-cookie"]
    cookie = browser.client.cookies["envloop_session"]
    assert key not in header and key not in cookie and cookie.startswith("els_")
    assert "HttpOnly" in header and "SameSite=lax" in header and "Secure" not in header
    assert browser.get("/").status_code == 200
    with ctx.store.read() as session:
        stored = session.scalars(select(ConsoleSession.token_hash)).all()
    assert len(stored) == 1 and cookie not in stored[0]  # only its hash is kept


def test_over_https_the_session_cookie_is_secure(ctx: Context, key: str) -> None:
    answer = Browser(ctx, "https").log_in(key)
    assert answer.status_code == 303 and "Secure" in answer.headers["set-cookie"]


def test_revoking_the_key_ends_its_sessions(ctx: Context, key: str) -> None:
    browser = Browser(ctx)
    browser.log_in(key)
    assert browser.get("/").status_code == 200
    [view] = list_keys(ctx)
    revoke_key(ctx, view.id)
    answer = browser.get("/")
    assert answer.status_code == 303 and answer.headers["location"].startswith("/login?next=")


def test_logging_out_ends_the_session_on_the_server_too(ctx: Context, key: str) -> None:
    browser = Browser(ctx)
    browser.log_in(key)
    stolen = browser.client.cookies["envloop_session"]
    page = browser.get("/").text
    csrf = re.search(r'name="csrf" value="([^"]+)"', page)
    assert csrf is not None
    assert browser.post("/logout", {"csrf": csrf.group(1)}).status_code == 303
    replay = Browser(ctx)
    replay.client.cookies.set("envloop_session", stolen)
    assert replay.get("/").status_code == 303  # a copied cookie is worth nothing after logout


def test_an_expired_session_logs_nobody_in(ctx: Context, key: str) -> None:
    browser = Browser(ctx)
    browser.log_in(key)
    with ctx.store.write() as session:
        session.execute(update(ConsoleSession).values(expires_at=datetime.now(UTC) - timedelta(seconds=1)))
    assert browser.get("/").status_code == 303
    forged = Browser(ctx)
    forged.client.cookies.set("envloop_session", f"nonce.{key}")  # the old cookie format: the key itself
    assert forged.get("/").status_code == 303
