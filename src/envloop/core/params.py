"""Typed profile parameters: every runner and agent (built-in or plugin) declares the params it
reads as a pydantic model, and everything else comes from that model.

A profile's params are text (they reach commands as environment variables), so a model's fields
are named exactly as the params (`MAX_STEPS: int | None`) and pydantic's lax mode reads the text
as the field's type. A blank value counts as unset, and surrounding whitespace never matters. What
a param is for, its default, whether it is a secret (`secret_param`) and what a bad value should
have been (`expect`, else derived from the type and its bounds) all live on the field, so the
validation messages, the "does not read" warning, `el runner show` and the API's schemas agree.

A model whose config allows extra fields reads every param (the `command` agent passes them all to
its command line), so none is reported unread.
"""

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

M = TypeVar("M", bound=BaseModel)

_QUOTE_LIMIT = 40


class ComponentParams(BaseModel):
    """The base of a component's params: unknown params are ignored (the caller reports them as
    unread), values are frozen once read, and NaN or infinity is never a number."""

    model_config = ConfigDict(extra="ignore", frozen=True, allow_inf_nan=False)


class AllParams(ComponentParams):
    """The base for a component that receives every param of the profile."""

    model_config = ConfigDict(extra="allow")


def param(description: str, *, default: Any = None, expect: str | None = None, **constraints: Any) -> Any:
    """A declared param: `description` for people, `expect` for the refusal message when the type's
    own wording would not do (a pattern, a URL)."""
    extra: dict[str, Any] = {"expect": expect} if expect else {}
    return Field(default, description=description, json_schema_extra=extra or None, **constraints)


def secret_param(description: str, *, default: Any = None) -> Any:
    """A declared param whose value is a credential: profiles should list it in `secret_params`."""
    return Field(default, description=description, json_schema_extra={"secret": True, "writeOnly": True})


@dataclass(frozen=True)
class ParamReader:
    """One component that reads a profile's params: the runner, or the agent it runs."""

    label: str
    """How messages name it: `runner envloop/chat@1`, `agent 'oracle'`."""
    model: type[BaseModel]
    when: str = ""
    """Appended to "X is required" when the requirement is the component's (` when AGENT_NAME=…`)."""


def declared_names(model: type[BaseModel]) -> set[str]:
    return set(model.model_fields)


def reads_every_param(model: type[BaseModel]) -> bool:
    return model.model_config.get("extra") == "allow"


def secret_names(model: type[BaseModel]) -> list[str]:
    return [
        name
        for name, info in model.model_fields.items()
        if isinstance(info.json_schema_extra, dict) and info.json_schema_extra.get("secret")
    ]


def params_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema of a params model, as `el runner show` and the API print it."""
    return model.model_json_schema()


def _input(model: type[BaseModel], params: Mapping[str, str]) -> dict[str, str]:
    every = reads_every_param(model)
    fields = declared_names(model)
    return {
        name: value.strip() for name, value in params.items() if value.strip() and (every or name in fields)
    }


@dataclass(frozen=True)
class _Report:
    when: str = ""
    hidden: Collection[str] = ()
    """Params whose values a message must not quote (the profile's secret params)."""
    present_only: bool = False
    """Only values that are set are checked; a missing required param is not a problem."""


def read_params(model: type[M], params: Mapping[str, str], *, when: str = "") -> tuple[M | None, list[str]]:
    """The params read as `model`, or None with one sentence per bad param (declaration order)."""
    try:
        return model.model_validate(_input(model, params)), []
    except ValidationError as exc:
        return None, _problems(model, params, exc, _Report(when=when))


def param_problems(
    reader: ParamReader,
    params: Mapping[str, str],
    *,
    hidden: Collection[str] = (),
    present_only: bool = False,
) -> list[str]:
    """What is wrong with `params` for this reader, never quoting the values of `hidden` params or
    of params the model declares secret."""
    try:
        reader.model.model_validate(_input(reader.model, params))
    except ValidationError as exc:
        report = _Report(when=reader.when, hidden=hidden, present_only=present_only)
        return _problems(reader.model, params, exc, report)
    return []


def _problems(
    model: type[BaseModel], params: Mapping[str, str], exc: ValidationError, report: _Report
) -> list[str]:
    properties = model.model_json_schema().get("properties", {})
    problems: list[str] = []
    named: set[str] = set()
    for error in exc.errors():
        loc = error["loc"]
        name = str(loc[0]) if loc else ""
        if name not in properties:
            problems.append(str(error["msg"]).removeprefix("Value error, "))
            continue
        if name in named:
            continue
        named.add(name)
        prop = properties[name]
        if error["type"] == "missing":
            if report.present_only:
                continue
            choices = _choices(prop)
            hint = f" ({' or '.join(choices)})" if choices and len(choices) <= 3 else ""
            problems.append(f"{name} is required{hint}{report.when}")
        elif name in report.hidden or prop.get("secret"):
            problems.append(f"{name} must be {expectation(prop)} (the secret value is not shown)")
        else:
            raw = params.get(name, "").strip()
            shown = raw if len(raw) <= _QUOTE_LIMIT else raw[:_QUOTE_LIMIT]
            problems.append(f"{name} must be {expectation(prop)}, not {shown!r}")
    return problems


def _plain(prop: dict[str, Any]) -> dict[str, Any]:
    """The non-null branch of an optional field's schema."""
    branches = [b for b in prop.get("anyOf", []) if b.get("type") != "null"]
    return {**prop, **branches[0]} if len(branches) == 1 else prop


def _choices(prop: dict[str, Any]) -> list[str]:
    plain = _plain(prop)
    if "enum" in plain:
        return [str(v) for v in plain["enum"]]
    if "const" in plain:
        return [str(plain["const"])]
    return []


def _number(value: float) -> str:
    return f"{value:g}"


def _bounds(plain: dict[str, Any], whole: bool) -> str:
    low = plain.get("minimum", plain.get("exclusiveMinimum"))
    high = plain.get("maximum", plain.get("exclusiveMaximum"))
    low_open, high_open = "exclusiveMinimum" in plain, "exclusiveMaximum" in plain
    if low is not None and high is not None:
        if whole and not low_open and not high_open:
            return f" from {_number(low)} to {_number(high)}"
        return f" in {'(' if low_open else '['}{_number(low)}, {_number(high)}{')' if high_open else ']'}"
    if low is not None:
        return f" {'>' if low_open else '≥'} {_number(low)}"
    if high is not None:
        return f" {'<' if high_open else '≤'} {_number(high)}"
    return ""


def expectation(prop: dict[str, Any]) -> str:
    """What a value of this field should be, in words: `a whole number ≥ 1`, `one of a, b`."""
    if prop.get("expect"):
        return str(prop["expect"])
    plain = _plain(prop)
    choices = _choices(prop)
    if len(choices) == 1:
        return choices[0]
    if choices:
        return f"one of {', '.join(choices)}"
    kind = plain.get("type")
    if kind == "integer":
        return "a whole number" + _bounds(plain, whole=True)
    if kind == "number":
        return "a number" + _bounds(plain, whole=False)
    if kind == "boolean":
        return "true or false"
    if "pattern" in plain:
        return f"text matching {plain['pattern']}"
    return "text"
