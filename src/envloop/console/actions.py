"""Logging in and out, and the console's actions: cancel a job, create and revoke share links,
invalidate and restore a trial. Each action is a form POST carrying the session's CSRF token; it
calls the same service function as the API and the CLI, then sends the browser back to the page.

Login checks its own form with a double-submit token (a random value in a cookie and in the form),
so another site cannot log a browser into someone else's project either.
"""

import secrets
from typing import Annotated

from fastapi import APIRouter, Depends, Form, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse

from envloop.api.auth import installation
from envloop.console.access import (
    LOGIN_COOKIE,
    SESSION_COOKIE,
    SESSION_MAX_AGE,
    Viewer,
    check_action,
    safe_next,
    session_viewer,
)
from envloop.console.render import SECURITY_HEADERS, page
from envloop.console.routing import ConsoleRoute
from envloop.errors import UserError
from envloop.services import jobs, shares, trials
from envloop.services.console_sessions import end_session, open_session
from envloop.services.keys import authenticated_key, has_active_key
from envloop.services.shares import SHARE_PREFIX

router = APIRouter(route_class=ConsoleRoute, include_in_schema=False)
SessionViewer = Annotated[Viewer, Depends(session_viewer)]
FormText = Annotated[str, Form()]


def _back(path: str) -> RedirectResponse:
    return RedirectResponse(path, status_code=303, headers=SECURITY_HEADERS)


def _login_form(request: Request, next_path: str, problem: str | None, status_code: int = 200) -> Response:
    token = secrets.token_urlsafe(24)
    response = page(
        request,
        None,
        "login.html",
        status_code,
        login_token=token,
        next_path=safe_next(next_path),
        problem=problem,
        has_key=has_active_key(installation(request).store),
    )
    response.set_cookie(
        LOGIN_COOKIE,
        token,
        httponly=True,
        samesite="strict",
        path="/login",
        secure=request.url.scheme == "https",
    )
    return response


@router.get("/login", response_class=HTMLResponse)
def login_form(request: Request, next: str = "/", problem: str | None = None) -> Response:
    return _login_form(request, next, problem[:200] if problem else None)


@router.post("/login")
def login(request: Request, key: FormText = "", login_token: FormText = "", next: FormText = "/") -> Response:
    expected = request.cookies.get(LOGIN_COOKIE, "")
    if not expected or not secrets.compare_digest(expected, login_token):
        return _login_form(request, next, "the login form expired: try again", 403)
    key = key.strip()
    if key.startswith(SHARE_PREFIX):
        return _login_form(request, next, "that is a share token: open the share link it came with", 401)
    store = installation(request).store
    found = authenticated_key(store, key)
    if found is None:
        return _login_form(request, next, "unknown or revoked API key", 401)
    response = _back(safe_next(next))
    response.set_cookie(
        SESSION_COOKIE,
        open_session(store, found[0]),
        max_age=SESSION_MAX_AGE,
        httponly=True,
        samesite="lax",
        path="/",
        secure=request.url.scheme == "https",
    )
    response.delete_cookie(LOGIN_COOKIE, path="/login")
    return response


@router.post("/logout")
def logout(request: Request, v: SessionViewer, csrf: FormText = "") -> Response:
    check_action(v, csrf)
    end_session(installation(request).store, request.cookies.get(SESSION_COOKIE, ""))
    response = _back("/login")
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response


@router.post("/jobs/{job_id}/cancel")
def cancel(job_id: str, v: SessionViewer, csrf: FormText = "") -> Response:
    check_action(v, csrf)
    jobs.cancel_job(v.ctx, job_id)
    return _back(f"/jobs/{job_id}")


@router.post("/jobs/{job_id}/shares", response_class=HTMLResponse)
def create_share(
    request: Request, job_id: str, v: SessionViewer, csrf: FormText = "", expires_in_sec: FormText = ""
) -> Response:
    """The new link is shown once, on its own page (the token is stored only as a hash)."""
    check_action(v, csrf)
    expires: float | None = None
    if expires_in_sec.strip():
        try:
            expires = float(expires_in_sec)
        except ValueError:
            raise UserError(f"expiry must be a number of seconds, not {expires_in_sec!r}") from None
    created = shares.create_share(v.ctx, job_id, expires)
    link = str(request.base_url).rstrip("/") + created.path
    return page(request, v, "share_created.html", share=created, link=link)


@router.post("/shares/{share_id}/revoke")
def revoke_share(share_id: str, v: SessionViewer, csrf: FormText = "") -> Response:
    check_action(v, csrf)
    revoked = shares.revoke_share(v.ctx, share_id)
    return _back(f"/jobs/{revoked.job_id}#shares")


@router.post("/trials/{trial_id}/invalidate")
def invalidate(trial_id: str, v: SessionViewer, csrf: FormText = "", reason: FormText = "") -> Response:
    check_action(v, csrf)
    if len(reason) > 1000:
        raise UserError("a reason has at most 1000 characters")
    trials.invalidate_trial(v.ctx, trial_id, reason.strip() or None)
    return _back(f"/trials/{trial_id}")


@router.post("/trials/{trial_id}/restore")
def restore(trial_id: str, v: SessionViewer, csrf: FormText = "") -> Response:
    check_action(v, csrf)
    trials.invalidate_trial(v.ctx, trial_id, None, undo=True)
    return _back(f"/trials/{trial_id}")
