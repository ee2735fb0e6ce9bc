"""The Chat Completions protocol over the official `openai` SDK.

The SDK's own retries are off (envloop retries, honouring Retry-After, under the endpoint gate).
Requests go through the client's `post` with the body already in JSON form: `chat.completions.create`
would first walk the whole conversation against its parameter types, which costs more than the
rest of a local call and grows with every turn of an agent's conversation; authentication, error
mapping and JSON decoding are the SDK's either way.

Organisation and project headers the SDK would take from the worker's environment are dropped, and
without `MODEL_API_KEY` no Authorization header is sent: nothing of the worker's own credentials
reaches an endpoint a profile names. The body and the answer's reading are `openai_format`'s.
"""

from typing import Any, cast

import openai

from envloop.models.base import SdkErrors, sdk_error, send
from envloop.models.openai_format import ChatChunks, completion_response, request_body
from envloop.models.settings import ModelSettings
from envloop.models.types import ModelRequest, ModelResponse


def make_sdk_client(settings: ModelSettings) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        base_url=settings.base_url,
        # The SDK insists on a key; without one, the header is omitted on every request instead.
        api_key=settings.api_key or "no-key",
        timeout=settings.request_timeout_sec,
        max_retries=0,
        # Omit() removes a header the SDK would add from OPENAI_ORG_ID / OPENAI_PROJECT_ID.
        default_headers=cast(
            dict[str, str], {"OpenAI-Organization": openai.Omit(), "OpenAI-Project": openai.Omit()}
        ),
    )


async def _from_stream(stream: openai.AsyncStream[Any]) -> ModelResponse:
    chunks = ChatChunks()
    async for raw in stream:
        chunks.add(raw)
    return completion_response(chunks.completion())


_ERRORS = SdkErrors(openai.APIStatusError, openai.APITimeoutError, openai.APIConnectionError)


class OpenAIChatClient:
    def __init__(self, settings: ModelSettings, sdk: openai.AsyncOpenAI) -> None:
        self.settings = settings
        self._sdk = sdk
        self._url = settings.base_url.rstrip("/") + "/chat/completions"
        # Without a key the SDK's Authorization header is removed (Omit), not sent empty.
        self._options: Any = {} if settings.api_key else {"headers": {"Authorization": openai.Omit()}}

    async def complete(self, request: ModelRequest) -> ModelResponse:
        body = request_body(self.settings, request)
        return await send(self.settings, lambda: self._once(body))

    async def _once(self, body: dict[str, Any]) -> ModelResponse:
        try:
            if self.settings.stream:
                stream = await self._sdk.post(
                    "/chat/completions",
                    body={**body, "stream": True, "stream_options": {"include_usage": True}},
                    cast_to=object,
                    options=self._options,
                    stream=True,
                    stream_cls=openai.AsyncStream[object],
                )
                return await _from_stream(stream)
            data = await self._sdk.post("/chat/completions", body=body, cast_to=object, options=self._options)
            return completion_response(data)
        except openai.APIError as exc:
            raise sdk_error(self.settings, self._url, exc, _ERRORS) from None


Client = OpenAIChatClient
