"""The ModelClient protocol, and what every protocol client shares: error wording, the endpoint
gate and the retry loop around one HTTP request."""

import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from envloop.models.limits import endpoint_gate
from envloop.models.retry import Backoff, kind_for_status, retry_after_seconds, with_retries
from envloop.models.settings import ModelSettings
from envloop.models.types import ModelError, ModelErrorKind, ModelRequest, ModelResponse

BACKOFF = Backoff()
_MESSAGE_LIMIT = 500


class ModelClient(Protocol):
    """One endpoint, one model, one set of generation settings (a profile's)."""

    settings: ModelSettings

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """The model's answer; ModelError when the call failed for good (after retries)."""
        ...


def json_object(value: Any) -> dict[str, Any]:
    """Responses are read as plain JSON, defensively: a field of the wrong type reads as empty."""
    return value if isinstance(value, dict) else {}


def json_text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def json_count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


class TextBuffer:
    """Text gathered piece by piece, keeping at most `limit` characters (None: no limit); `cut`
    says whether anything was dropped. A recorder of a long stream holds this much and no more."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit = limit
        self.cut = False
        self._parts: list[str] = []
        self._size = 0

    def add(self, piece: str) -> None:
        if self.limit is not None and self._size + len(piece) > self.limit:
            piece = piece[: max(0, self.limit - self._size)]
            self.cut = True
        if piece:
            self._parts.append(piece)
            self._size += len(piece)

    def text(self) -> str:
        return "".join(self._parts)


def server_message(body: object, text: str) -> str:
    """The human part of an error response, whichever of the common shapes the server used."""
    candidates: list[object] = []
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict):
            candidates += [error.get("message"), error.get("detail")]
        candidates += [error, body.get("message"), body.get("detail")]
    for candidate in candidates:
        if isinstance(candidate, str) and candidate.strip():
            return candidate.strip()[:_MESSAGE_LIMIT]
    return text.strip()[:_MESSAGE_LIMIT] or "(no message)"


def _hint(settings: ModelSettings, status: int) -> str:
    if status != 404:
        return ""
    if settings.protocol == "openai":
        return " (for MODEL_PROTOCOL=openai, MODEL_BASE_URL is the URL ending in /v1)"
    return " (for MODEL_PROTOCOL=anthropic, MODEL_BASE_URL is the root URL, without /v1)"


def _kind_in_stream(body: object) -> ModelErrorKind:
    """An error event inside a 200 stream says what went wrong only in its body."""
    error = body.get("error", body) if isinstance(body, dict) else None
    kind = error.get("type") if isinstance(error, dict) else None
    if kind in ("overloaded_error", "rate_limit_error"):
        return "rate_limit"
    if kind in ("api_error", "server_error", "timeout_error"):
        return "server"
    return "bad_response"


def response_text(response: Any) -> str:
    try:
        return str(response.text)
    except Exception:  # a streamed error body that was never read
        return ""


def status_error(
    settings: ModelSettings, status: int, url: str, headers: Mapping[str, str], body: object, text: str
) -> ModelError:
    message = f"HTTP {status} from {url}: {server_message(body, text)}{_hint(settings, status)}"
    kind = kind_for_status(status) if status >= 400 else _kind_in_stream(body)
    return ModelError(message, kind=kind, status=status, retry_after=retry_after_seconds(headers))


def transport_error(url: str, exc: BaseException, timed_out: bool) -> ModelError:
    cause = exc.__cause__ or exc.__context__ or exc
    detail = f"{type(cause).__name__}: {cause}".rstrip(": ")
    if timed_out:
        return ModelError(f"no answer from {url} in time ({detail})", kind="timeout")
    return ModelError(f"could not reach {url} ({detail})", kind="connection")


@dataclass(frozen=True)
class SdkErrors:
    """An SDK's exception classes. The official openai and anthropic SDKs name and shape them alike
    (an `APIError` with status, timeout and connection subclasses), so one mapping serves both."""

    status: type[Exception]
    timeout: type[Exception]
    connection: type[Exception]


def sdk_error(settings: ModelSettings, url: str, exc: Exception, errors: SdkErrors) -> ModelError:
    """The ModelError for an `APIError` the SDK raised (the timeout class subclasses the connection
    class, so it is asked first)."""
    failure: Any = exc
    if isinstance(exc, errors.status):
        response = failure.response
        text = response_text(response)
        return status_error(settings, response.status_code, url, response.headers, failure.body, text)
    if isinstance(exc, errors.timeout):
        return transport_error(url, exc, timed_out=True)
    if isinstance(exc, errors.connection):
        return transport_error(url, exc, timed_out=False)
    return ModelError(f"unreadable answer from {url}: {failure.message}", kind="bad_response")


async def send(settings: ModelSettings, once: Callable[[], Awaitable[ModelResponse]]) -> ModelResponse:
    """Run one protocol request under the endpoint's gate, retrying what may succeed next time."""
    gate = endpoint_gate(settings.endpoint)

    async def gated() -> ModelResponse:
        async with gate.slot(settings.max_concurrency):
            return await once()

    started = time.perf_counter()
    try:
        response, attempts = await with_retries(gated, max_retries=settings.max_retries, backoff=BACKOFF)
    except ModelError as exc:
        if exc.attempts > 1:
            exc.message = f"{exc.message} (after {exc.attempts} attempts)"
            exc.args = (exc.message,)
        raise
    response.attempts = attempts
    response.latency_ms = (time.perf_counter() - started) * 1000
    return response
