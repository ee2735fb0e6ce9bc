"""Profile params → model settings: every problem named at once, only what is set is sent."""

import pytest

from envloop.models import ModelConfigError, model_settings, read_model_settings

BASE = {"MODEL_PROTOCOL": "openai", "MODEL_BASE_URL": "http://127.0.0.1:9/v1", "MODEL_NAME": "m"}


def test_a_minimal_profile_reads_with_defaults() -> None:
    settings = model_settings(BASE)
    assert (settings.protocol, settings.base_url, settings.model) == ("openai", "http://127.0.0.1:9/v1", "m")
    assert settings.api_key == ""
    assert settings.max_output_tokens is None and settings.temperature is None
    assert settings.stream is False
    assert (settings.request_timeout_sec, settings.max_retries, settings.max_concurrency) == (120.0, 4, 8)


def test_the_messages_protocol_gets_its_required_max_tokens_by_default() -> None:
    settings = model_settings({**BASE, "MODEL_PROTOCOL": "anthropic", "MODEL_BASE_URL": "http://h"})
    assert settings.max_output_tokens == 1024
    assert model_settings({**BASE, "MAX_OUTPUT_TOKENS": "64"}).max_output_tokens == 64


@pytest.mark.parametrize(
    ("params", "problem"),
    [
        ({}, "MODEL_PROTOCOL is required (openai or anthropic)"),
        ({"MODEL_PROTOCOL": "gemini"}, "MODEL_PROTOCOL must be one of openai, anthropic, not 'gemini'"),
        ({"MODEL_BASE_URL": ""}, "MODEL_BASE_URL is required"),
        ({"MODEL_BASE_URL": "localhost:8000/v1"}, "MODEL_BASE_URL must be an http:// or https:// URL"),
        ({"MODEL_NAME": " "}, "MODEL_NAME is required"),
        ({"TEMPERATURE": "hot"}, "TEMPERATURE must be a number ≥ 0, not 'hot'"),
        ({"TEMPERATURE": "nan"}, "TEMPERATURE must be a number ≥ 0, not 'nan'"),
        ({"MAX_OUTPUT_TOKENS": "0"}, "MAX_OUTPUT_TOKENS must be a whole number ≥ 1, not '0'"),
        ({"TOP_P": "1.5"}, "TOP_P must be a number in (0, 1], not '1.5'"),
        ({"STREAM": "maybe"}, "STREAM must be true or false, not 'maybe'"),
        ({"REQUEST_TIMEOUT_SEC": "-1"}, "REQUEST_TIMEOUT_SEC must be a number > 0"),
        ({"MAX_RETRIES": "99"}, "MAX_RETRIES must be a whole number from 0 to 20"),
        ({"MAX_CONCURRENCY": "0"}, "MAX_CONCURRENCY must be a whole number ≥ 1"),
    ],
)
def test_each_bad_param_is_named(params: dict[str, str], problem: str) -> None:
    merged = {**BASE, **params} if params else {}
    settings, problems = read_model_settings(merged)
    assert settings is None
    assert any(p.startswith(problem) for p in problems), problems


def test_all_problems_are_reported_together() -> None:
    _, problems = read_model_settings({"MODEL_PROTOCOL": "x", "TEMPERATURE": "y"})
    assert len(problems) == 4  # protocol, base URL, model name, temperature
    with pytest.raises(
        ModelConfigError,
        match=r"MODEL_PROTOCOL must be one of openai, anthropic, not 'x'; MODEL_BASE_URL is required",
    ):
        model_settings({"MODEL_PROTOCOL": "x"})


def test_stream_accepts_the_usual_spellings() -> None:
    assert model_settings({**BASE, "STREAM": "true"}).stream
    assert model_settings({**BASE, "STREAM": "TRUE"}).stream
    assert not model_settings({**BASE, "STREAM": "0"}).stream


def test_the_summary_a_trajectory_keeps_never_holds_the_key() -> None:
    settings = model_settings({**BASE, "MODEL_API_KEY": "sk-very-secret", "TEMPERATURE": "0.2"})
    summary = settings.summary()
    assert "sk-very-secret" not in repr(summary)
    assert summary["temperature"] == 0.2
    assert "max_output_tokens" not in summary
