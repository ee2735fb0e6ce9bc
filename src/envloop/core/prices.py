"""What model tokens cost: the operator's price table and the cost of a trial's tokens under it.

The table is a TOML file (`ENVLOOP_PRICES`, else `prices.toml` in ENVLOOP_HOME), prices per
million tokens, one table per model as profiles name it in MODEL_NAME:

    currency = "USD"              # shown beside every cost; USD when absent

    [models."gpt-4o"]
    input = 2.50                  # per million input tokens
    output = 10.00                # per million output tokens (reasoning included)
    cache_read = 1.25             # per million cached input tokens; the input price when absent

Endpoints count cached tokens two ways: OpenAI's `prompt_tokens` include them, Anthropic's
`input_tokens` do not. A trial's usage keeps each protocol's own counts, so the cost reads the
profile's MODEL_PROTOCOL to price every token exactly once.
"""

import tomllib
from typing import Literal

from pydantic import ConfigDict, Field, ValidationError

from envloop.core.lazy import LazyModel

PER = 1_000_000


class ModelPrice(LazyModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    input: float = Field(ge=0, allow_inf_nan=False, description="per million input tokens")
    output: float = Field(ge=0, allow_inf_nan=False, description="per million output tokens")
    cache_read: float | None = Field(
        default=None, ge=0, allow_inf_nan=False, description="per million cached input tokens"
    )


class PriceTable(LazyModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    currency: str = Field(default="USD", min_length=1, max_length=10)
    models: dict[str, ModelPrice] = Field(default_factory=dict)


class PriceTableError(ValueError):
    """The price table cannot be read; the message names the field at fault, never a host path."""


def parse_price_table(text: str) -> PriceTable:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PriceTableError(f"price table: {exc}") from None
    try:
        return PriceTable.model_validate(data, strict=True)  # "2.5" is not a price; 2 and 2.5 are
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise PriceTableError(f"price table: {where}: {first['msg']}") from None


def token_cost(
    price: ModelPrice, usage: dict[str, int], protocol: Literal["openai", "anthropic"] | str | None
) -> float:
    """The cost of a trial's (or a sum of trials') tokens, every token priced once."""
    input_tokens = usage.get("input_tokens", 0)
    cached = usage.get("cache_read_tokens", 0)
    if protocol != "anthropic":  # OpenAI counts cached tokens inside its input tokens
        input_tokens = max(0, input_tokens - cached)
    cache_price = price.input if price.cache_read is None else price.cache_read
    return (
        input_tokens * price.input + cached * cache_price + usage.get("output_tokens", 0) * price.output
    ) / PER
