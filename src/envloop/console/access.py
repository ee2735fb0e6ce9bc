"""Who is looking at a console page, and what they may do there.

Three ways in, each giving a `Viewer`:

- a login session opened with the API key a user typed on the login page: the HttpOnly cookie
  holds only an opaque session token (`services.console_sessions`: server-side, expiring, ended by
  logout or by revoking the key); every action (POST) must carry the session's CSRF token in a
  hidden form field, so another site cannot act for the user;
- `Authorization: Bearer KEY` on the request itself (scripts, acceptance checks): no cookie is
  involved, so no CSRF token is needed;
- a share link `/share/TOKEN/…`: a read-only view of that one job and its trials, nothing else.

Keys are checked by `services.keys.authenticate_key` and share tokens by
`services.shares.resolve_share`, exactly as the API checks them.
"""

import hmac
from dataclasses import dataclass
from urllib.parse import quote

from fastapi import Request

from envloop.api.auth import installation
from envloop.errors import NotFoundError
from envloop.services.console_sessions import SESSION_TTL, resolve_session
from envloop.services.context import Context
from envloop.services.keys import authenticate_key, project_context
from envloop.services.shares import resolve_share

SESSION_COOKIE = "envloop_session"
LOGIN_COOKIE = "envloop_login"
SESSION_MAX_AGE = int(SESSION_TTL.total_seconds())


class LoginRequired(Exception):
    """No valid key: pages send the browser to the login form, then back to `next_path`."""

    def __init__(self, next_path: str, problem: str | None = None) -> None:
        super().__init__(problem or "log in with an API key")
        self.next_path = next_path
        self.problem = problem


class Forbidden(Exception):
    """An action without a valid CSRF token, or a read-only viewer asking for an action."""


@dataclass(frozen=True)
class Viewer:
    ctx: Context
    base: str = ""
    """URL prefix of every page: "" for a session, "/share/TOKEN" for a share link."""
    shared_job: str | None = None
    csrf: str | None = None
    """The token forms must carry; None when no form needs one (bearer) or none may be sent (share)."""
    bearer: bool = False

    @property
    def read_only(self) -> bool:
        return self.shared_job is not None

    def job_url(self, job_id: str, view: str = "") -> str:
        if self.shared_job is not None:
            return f"{self.base}/{view}".rstrip("/") if view else self.base
        return f"/jobs/{quote(job_id)}" + (f"/{view}" if view else "")

    def trial_url(self, trial_id: str, tab: str = "") -> str:
        path = f"{self.base}/trials/{quote(trial_id)}"
        return path + (f"/{tab}" if tab else "")

    def check_job(self, job_id: str) -> None:
        """A share viewer reads its one job: any other is unknown to it, like to the API."""
        if self.shared_job is not None and job_id != self.shared_job:
            raise NotFoundError(f"unknown job {job_id!r}")


def _next_path(request: Request) -> str:
    path = request.url.path
    return path + (f"?{request.url.query}" if request.url.query else "")


def session_viewer(request: Request) -> Viewer:
    """The caller of a project page: a bearer key, or the login session's key."""
    base = installation(request)
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        project_id = authenticate_key(base.store, token.strip())
        if project_id is None:
            raise LoginRequired(_next_path(request), "unknown or revoked API key")
        return Viewer(ctx=project_context(base, project_id), bearer=True)
    cookie = request.cookies.get(SESSION_COOKIE, "")
    if cookie:
        grant = resolve_session(base.store, cookie)
        if grant is not None:
            return Viewer(ctx=project_context(base, grant.project_id), csrf=grant.csrf)
        raise LoginRequired(_next_path(request), "your session ended (expired, or its key was revoked)")
    raise LoginRequired(_next_path(request))


def share_viewer(request: Request, token: str) -> Viewer:
    base = installation(request)
    grant = resolve_share(base.store, token)
    if grant is None:
        raise NotFoundError("this share link is unknown, expired or revoked")
    return Viewer(
        ctx=project_context(base, grant.project_id), base=f"/share/{quote(token)}", shared_job=grant.job_id
    )


def check_action(viewer: Viewer, submitted: str | None) -> None:
    """Actions need a project key; from a login session also its CSRF token."""
    if viewer.read_only:
        raise Forbidden("a share link only reads its job")
    if viewer.bearer:
        return
    if viewer.csrf is None or not submitted or not hmac.compare_digest(viewer.csrf, submitted):
        raise Forbidden("the form's security token is missing or stale: reload the page and try again")


def safe_next(path: str | None) -> str:
    """Where to go after logging in: a path on this server only (never `//host` or a URL)."""
    if not path or not path.startswith("/") or path.startswith("//") or "\\" in path:
        return "/"
    return path
