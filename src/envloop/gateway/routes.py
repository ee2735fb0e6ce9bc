"""The only requests the gateway forwards: each route is matched on the raw request target, byte
for byte, so no encoding, dot segment, doubled slash or absolute URL can reach any other upstream
path; the upstream path is always the route's own constant, never built from what the agent sent.

Agents address the gateway as each SDK expects: for `openai` the base URL ends in `/v1`
(`/v1/chat/completions`, `/v1/responses`, `/v1/models`), for `anthropic` it is the root
(`/v1/messages`, `/v1/messages/count_tokens`, `/v1/models`). Of a query string only the parameters
a route names are kept (Claude Code's `?beta=true`, the model list's paging), re-encoded.
"""

from dataclasses import dataclass
from typing import Literal
from urllib.parse import parse_qsl, urlencode

from envloop.models.settings import ModelProtocol

Api = Literal["chat", "responses", "messages", "count_tokens", "models"]


@dataclass(frozen=True)
class Route:
    api: Api
    method: str
    path: str
    protocol: ModelProtocol | None
    """The protocol the route belongs to; None: both (the model list)."""
    query: tuple[str, ...] = ()
    """The query parameters forwarded upstream."""

    @property
    def generates(self) -> bool:
        """Whether a call is a model generation, recorded as a model step of the trial."""
        return self.api in ("chat", "responses", "messages")

    def upstream_path(self, protocol: ModelProtocol) -> str:
        """The path after the upstream's base URL: OpenAI base URLs end in /v1 already."""
        return self.path.removeprefix("/v1") if protocol == "openai" else self.path


ROUTES = {
    (route.method, route.path): route
    for route in (
        Route("chat", "POST", "/v1/chat/completions", "openai"),
        Route("responses", "POST", "/v1/responses", "openai"),
        Route("messages", "POST", "/v1/messages", "anthropic", query=("beta",)),
        Route("count_tokens", "POST", "/v1/messages/count_tokens", "anthropic", query=("beta",)),
        Route(
            "models", "GET", "/v1/models", None, query=("limit", "after_id", "before_id", "after", "order")
        ),
    )
}
_MAX_QUERY = 512


class TargetRefused(Exception):
    """A request target the gateway does not forward: its HTTP status and one line."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def match(method: str, target: str) -> tuple[Route, str]:
    """The route of a raw request target and the query string to forward (maybe empty)."""
    if not target.startswith("/"):
        raise TargetRefused(400, "the request target must be a path (absolute URLs are refused)")
    path, _, query = target.partition("?")
    route = ROUTES.get((method, path))
    if route is None:
        if any(p == path for _, p in ROUTES):
            raise TargetRefused(405, f"{method} is not allowed on {path}")
        raise TargetRefused(404, f"no route {method} {path[:200]}")
    if len(query) > _MAX_QUERY:
        raise TargetRefused(400, "the query string is too long")
    kept = [(k, v) for k, v in parse_qsl(query, keep_blank_values=True) if k in route.query]
    return route, urlencode(kept)
