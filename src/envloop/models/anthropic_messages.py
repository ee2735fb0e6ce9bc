"""The Messages protocol over the official `anthropic` SDK.

Requests go through the client's `post` with the body in JSON form (`anthropic_format`; as in
`openai_chat`: `messages.create` would first walk the conversation against its parameter types);
streaming uses the SDK's own accumulator. Without `MODEL_API_KEY`, no credential header is sent and
none is read from the worker's environment.
"""

from typing import Any, cast

import anthropic

from envloop.models.anthropic_format import message_response, request_body
from envloop.models.base import SdkErrors, sdk_error, send
from envloop.models.settings import ModelSettings
from envloop.models.types import ModelRequest, ModelResponse

_SAMPLING = ("temperature", "top_p")


def make_sdk_client(settings: ModelSettings) -> anthropic.AsyncAnthropic:
    # Omit() removes the header instead of sending an empty credential.
    headers = cast(dict[str, str], {} if settings.api_key else {"Authorization": anthropic.Omit()})
    return anthropic.AsyncAnthropic(
        base_url=settings.base_url,
        # An explicit key keeps the SDK from reading credentials from the environment.
        api_key=settings.api_key or "no-key",
        timeout=settings.request_timeout_sec,
        max_retries=0,
        open_telemetry=False,
        default_headers=headers,
    )


_ERRORS = SdkErrors(anthropic.APIStatusError, anthropic.APITimeoutError, anthropic.APIConnectionError)


class AnthropicMessagesClient:
    def __init__(self, settings: ModelSettings, sdk: anthropic.AsyncAnthropic) -> None:
        self.settings = settings
        self._sdk = sdk
        self._url = settings.base_url.rstrip("/") + "/v1/messages"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        body = request_body(self.settings, request)
        return await send(self.settings, lambda: self._once(body))

    async def _once(self, body: dict[str, Any]) -> ModelResponse:
        try:
            if self.settings.stream:
                # The stream helper's signature no longer names the sampling fields: they go as extras.
                sampling = {k: body[k] for k in _SAMPLING if k in body}
                rest = {k: v for k, v in body.items() if k not in _SAMPLING}
                async with self._sdk.messages.stream(**rest, extra_body=sampling or None) as stream:
                    final = await stream.get_final_message()
                return message_response(final.model_dump(mode="json", exclude_none=True))
            return message_response(await self._sdk.post("/v1/messages", body=body, cast_to=object))
        except anthropic.APIError as exc:
            raise sdk_error(self.settings, self._url, exc, _ERRORS) from None


Client = AnthropicMessagesClient
