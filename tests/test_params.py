"""Typed params: a component's pydantic model is the one place a param's type, bounds, default and
secrecy are stated, and every message about a profile is derived from it."""

from typing import Literal

from envloop.core.params import (
    AllParams,
    ComponentParams,
    ParamReader,
    param,
    param_problems,
    read_params,
    secret_names,
    secret_param,
)


class Example(ComponentParams):
    COUNT: int = param("how many", default=3, ge=1)
    RATIO: float | None = param("a share", gt=0, le=1)
    MODE: Literal["fast", "slow"] | None = param("how")
    NAME: str = param("who", default=...)
    TOKEN: str | None = secret_param("a credential")


def test_text_is_read_as_the_declared_type_and_blank_means_unset() -> None:
    read, problems = read_params(Example, {"COUNT": " 7 ", "RATIO": "0.5", "NAME": "x", "MODE": " "})
    assert problems == [] and read is not None
    assert (read.COUNT, read.RATIO, read.MODE, read.NAME) == (7, 0.5, None, "x")
    defaults, _ = read_params(Example, {"NAME": "x", "COUNT": ""})
    assert defaults is not None and defaults.COUNT == 3


def test_every_bad_value_is_named_with_what_it_should_have_been() -> None:
    _, problems = read_params(Example, {"COUNT": "0", "RATIO": "nan", "MODE": "medium", "NAME": " "})
    assert problems == [
        "COUNT must be a whole number ≥ 1, not '0'",
        "RATIO must be a number in (0, 1], not 'nan'",
        "MODE must be one of fast, slow, not 'medium'",
        "NAME is required",
    ]


def test_a_secret_value_is_never_quoted() -> None:
    reader = ParamReader(label="agent 'x'", model=Example)
    params = {"NAME": "x", "COUNT": "sk-secret-count", "TOKEN": "t"}
    assert param_problems(reader, params, hidden=["COUNT"]) == [
        "COUNT must be a whole number ≥ 1 (the secret value is not shown)"
    ]
    assert secret_names(Example) == ["TOKEN"]


def test_present_only_checks_the_values_that_are_set() -> None:
    reader = ParamReader(label="agent 'x'", model=Example, when=" when AGENT_NAME=x")
    assert param_problems(reader, {"COUNT": "2"}, present_only=True) == []
    assert param_problems(reader, {"COUNT": "2"}) == ["NAME is required when AGENT_NAME=x"]


def test_a_model_that_allows_extra_fields_receives_every_param() -> None:
    class Everything(AllParams):
        COMMAND: str = param("what to run", default=...)

    read, _ = read_params(Everything, {"COMMAND": "run", "ANYTHING": "kept"})
    assert read is not None and read.model_extra == {"ANYTHING": "kept"}
