"""Console routes answer errors as pages: a user error or an unknown resource is an HTML page with
one line, a missing login is a redirect to the login form, an action refused is a 403 page.

The API keeps answering the same errors as JSON; only routes built with `ConsoleRoute` are
affected. Dependencies (who is asking) are solved inside the route handler, so their errors are
caught here too.
"""

from collections.abc import Callable, Coroutine
from typing import Any
from urllib.parse import quote

from fastapi import Request, Response
from fastapi.responses import RedirectResponse
from fastapi.routing import APIRoute

from envloop.console.access import Forbidden, LoginRequired
from envloop.console.render import SECURITY_HEADERS, page
from envloop.errors import NotFoundError, UserError
from envloop.store.artifacts import ArtifactNotFoundError


def error_page(request: Request, status_code: int, heading: str, message: str) -> Response:
    return page(request, None, "error.html", status_code, heading=heading, message=message, back=None)


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class ConsoleRoute(APIRoute):
    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        inner = super().get_route_handler()

        async def handler(request: Request) -> Response:
            try:
                return await inner(request)
            except LoginRequired as exc:
                if request.method != "GET":
                    return error_page(request, 401, "Not logged in", exc.problem or "log in with an API key")
                target = f"/login?next={quote(exc.next_path, safe='')}"
                if exc.problem:
                    target += f"&problem={quote(exc.problem, safe='')}"
                return RedirectResponse(target, status_code=303, headers=SECURITY_HEADERS)
            except Forbidden as exc:
                return error_page(request, 403, "Not allowed", _first_line(exc))
            except (NotFoundError, ArtifactNotFoundError) as exc:
                return error_page(request, 404, "Not found", _first_line(exc))
            except UserError as exc:
                return error_page(request, 400, "Cannot do that", _first_line(exc))

        return handler
