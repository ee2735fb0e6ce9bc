"""The FastAPI application: routers per resource, service errors mapped to HTTP statuses.

Routes are synchronous, so FastAPI runs them on its thread pool: the service layer and the store
stay plain blocking code, shared with the CLI.
"""

from collections.abc import Iterator, Sequence
from typing import Annotated

from fastapi import Depends, FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import BaseRoute, Match

from envloop import __version__
from envloop.api.auth import Caller, caller
from envloop.api.errors import validation_error, without_validation_responses
from envloop.api.limits import RequestLimits
from envloop.api.param_schemas import with_param_schemas
from envloop.api.routes import declared, meta
from envloop.errors import ConflictError, NotFoundError, UserError
from envloop.services.context import Context
from envloop.store.artifacts import ArtifactNotFoundError

DESCRIPTION = """\
Self-hosted evaluation of AI models and agents: datasets, profiles, jobs, trials, rollouts.

Every endpoint except `GET /v1/health` needs `Authorization: Bearer TOKEN`, where TOKEN is an
API key of a project (`el key create`), or a share token, which reads one job and nothing else.
Errors are `{"detail": "one line"}` with 400 (bad input, nothing changed, including a request that
does not fit the operation's parameters or body), 401, 403, 404 (unknown, or another project's),
409 (contradicts what is stored) or 413 (a body over its limit: 1 MiB, or `ENVLOOP_MAX_UPLOAD_MB`
for a dataset upload). Credentials are checked before a request body is read.
"""

_ALL_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
CATCH_ALL = "/v1/{rest:path}"


def _status_of(exc: UserError) -> int:
    if isinstance(exc, NotFoundError):
        return 404
    if isinstance(exc, ConflictError):
        return 409
    return 400


async def _user_error(request: Request, exc: Exception) -> JSONResponse:
    message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    status = _status_of(exc) if isinstance(exc, UserError) else 404
    return JSONResponse({"detail": message}, status_code=status)


def _leaf_routes(routes: Sequence[BaseRoute]) -> Iterator[BaseRoute]:
    """The routes themselves: included routers are kept as wrappers around their own routes."""
    for route in routes:
        inner = getattr(route, "original_router", None)
        if inner is not None:
            yield from _leaf_routes(inner.routes)
        else:
            yield route


async def _http_error(request: Request, exc: Exception) -> Response:
    """As FastAPI answers, except that a 405 lists every method of the path in `Allow`: FastAPI has
    one route per method, and the first one that matches the path only knows its own."""
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 405:
        allowed = {
            method
            for route in _leaf_routes(request.app.router.routes)
            if getattr(route, "path", None) != CATCH_ALL and route.matches(request.scope)[0] != Match.NONE
            for method in getattr(route, "methods", None) or ()
        }
        exc.headers = {**(exc.headers or {}), "Allow": ", ".join(sorted(allowed))}
    return await http_exception_handler(request, exc)


def create_app(ctx: Context | None = None) -> FastAPI:
    """The API over `ctx`'s store and artifacts (None: only to describe it, e.g. its OpenAPI). The
    console is mounted on it by `envloop.console.api_and_console`, which `el serve` runs."""
    app = FastAPI(
        title="envloop",
        version=__version__,
        description=DESCRIPTION,
        openapi_url="/openapi.json",
        docs_url=None,
        redoc_url=None,
    )
    app.state.context = ctx
    app.add_exception_handler(UserError, _user_error)
    app.add_exception_handler(ArtifactNotFoundError, _user_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_middleware(RequestLimits)
    for module in (meta, declared):
        app.include_router(module.router)

    @app.api_route(CATCH_ALL, methods=list(_ALL_METHODS), include_in_schema=False)
    def unknown(request: Request, rest: str, who: Annotated[Caller, Depends(caller)]) -> None:
        """Registered last: without valid credentials even an unknown path answers 401, so the API
        does not reveal which paths exist; with them, 405 where the path exists, else 404."""
        if any(route.matches(request.scope)[0] == Match.PARTIAL for route in app.router.routes):
            raise StarletteHTTPException(405)
        raise StarletteHTTPException(404)

    describe = app.openapi
    app.openapi = lambda: with_param_schemas(without_validation_responses(describe()))  # type: ignore[method-assign]
    return app
