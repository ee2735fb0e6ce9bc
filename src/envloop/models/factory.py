"""Model clients by settings, with the SDK clients (and their connection pools) reused.

Building an SDK client costs tens of milliseconds (TLS contexts, header machinery), far more than
a local model call, so one is kept per endpoint, credential and timeout for each event loop and
shared by every trial of a worker. A protocol's module (and its SDK, which takes a second or more
to import) is loaded on first use: CLI commands that never call a model never pay for it.
"""

import asyncio
import importlib
import logging
import weakref
from types import ModuleType
from typing import Any, cast

from envloop.models.base import ModelClient
from envloop.models.settings import ModelSettings

_MODULES = {"openai": "envloop.models.openai_chat", "anthropic": "envloop.models.anthropic_messages"}
_SDK_CLIENTS: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[object, ...], Any]]" = (
    weakref.WeakKeyDictionary()
)


def _protocol_module(settings: ModelSettings) -> ModuleType:
    if settings.protocol not in _MODULES:
        raise ValueError(f"no client for protocol {settings.protocol!r}")
    return importlib.import_module(_MODULES[settings.protocol])


def model_client(settings: ModelSettings) -> ModelClient:
    """A client for these settings; call it inside the event loop that will use the client."""
    module = _protocol_module(settings)
    key = (settings.protocol, settings.base_url, settings.api_key, settings.request_timeout_sec)
    clients = _SDK_CLIENTS.setdefault(asyncio.get_running_loop(), {})
    sdk = clients.get(key)
    if sdk is None:
        for name in ("httpx", "httpx2", "httpcore", "httpcore2"):
            # One INFO line per HTTP request would flood the worker log; the trajectory keeps each call.
            logging.getLogger(name).setLevel(logging.WARNING)
        sdk = clients[key] = module.make_sdk_client(settings)
    return cast(ModelClient, module.Client(settings, sdk))


async def close_clients() -> None:
    """Close the pooled SDK clients of the running loop (a worker shutting down, a test ending)."""
    clients = _SDK_CLIENTS.pop(asyncio.get_running_loop(), {})
    for client in clients.values():
        await client.close()
