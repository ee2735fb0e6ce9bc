"""Model clients: the Chat Completions and Messages protocols over the official SDKs, one interface.

    settings = model_settings(profile_params)       # ModelConfigError names every bad param
    client = model_client(settings)                  # inside the event loop that uses it
    response = await client.complete(ModelRequest(messages=[Message(role="user", content="2+2?")]))

Retries (rate limits, transient failures, `Retry-After`), the per-endpoint concurrency limit and
token usage are handled here; a call that fails for good raises `ModelError` with the server's
message.
"""

from envloop.models.base import ModelClient
from envloop.models.factory import close_clients, model_client
from envloop.models.settings import (
    PROTOCOLS,
    ModelConfigError,
    ModelParams,
    ModelProtocol,
    ModelSettings,
    model_settings,
    read_model_settings,
)
from envloop.models.types import (
    Message,
    ModelError,
    ModelRequest,
    ModelResponse,
    ResponseStop,
    ToolCall,
    ToolSpec,
    Usage,
)

__all__ = [
    "PROTOCOLS",
    "Message",
    "ModelClient",
    "ModelConfigError",
    "ModelError",
    "ModelParams",
    "ModelProtocol",
    "ModelRequest",
    "ModelResponse",
    "ModelSettings",
    "ResponseStop",
    "ToolCall",
    "ToolSpec",
    "Usage",
    "close_clients",
    "model_client",
    "model_settings",
    "read_model_settings",
]
