"""`envloop/chat@1` run directly on trial specs against the scripted endpoint: scoring, the recorded
exchange, artifacts, and every way a model call can fail."""

import asyncio
from pathlib import Path
from typing import Any

import pytest

from envloop.core.ids import new_id
from envloop.core.trajectory import ModelStep, ScoreStep, UserStep
from envloop.core.trial import TrialOutcome, TrialSpec
from envloop.models import close_clients
from envloop.runners.chat import ChatRunner
from envloop.runners.params import check_params, unread_params
from envloop.testing import Reply, ScriptedServer
from envloop.trajectories import read_trajectory

ROW = {"id": "q1", "prompt": "What is 2+2? Answer with a number.", "answer": "4", "metadata": {}}


def profile(server: ScriptedServer, protocol: str = "openai", **extra: str) -> dict[str, str]:
    url = server.openai_url if protocol == "openai" else server.anthropic_url
    return {"MODEL_PROTOCOL": protocol, "MODEL_BASE_URL": url, "MODEL_NAME": "team-model/base", **extra}


def spec_for(tmp_path: Path, params: dict[str, str], row: dict[str, Any] = ROW, **extra: Any) -> TrialSpec:
    return TrialSpec(
        job_id="job_chat",
        trial_id=new_id("trl"),
        task_name=str(row["id"]),
        attempt=1,
        profile_ref="team/model@1",
        runner="envloop/chat@1",
        params=params,
        secret_values=tuple(v for k, v in params.items() if k == "MODEL_API_KEY"),
        row=row,
        scorer=extra.pop("scorer", "exact"),
        instance_root=tmp_path / "instances",
        artifacts_dir=tmp_path / "artifacts",
        **extra,
    )


def run(spec: TrialSpec) -> TrialOutcome:
    async def go() -> TrialOutcome:
        try:
            return await ChatRunner().run(spec)
        finally:
            await close_clients()

    return asyncio.run(go())


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_a_right_answer_scores_one_and_the_exchange_is_recorded(tmp_path: Path, protocol: str) -> None:
    with ScriptedServer([Reply(text=" 4\n", input_tokens=12, output_tokens=2)]) as server:
        outcome = run(spec_for(tmp_path, profile(server, protocol)))
    assert outcome.status == "completed", outcome.error
    assert outcome.reward == 1.0
    assert outcome.stop_reason == "done"
    assert outcome.usage == {"calls": 1, "input_tokens": 12, "output_tokens": 2}
    assert [p.name for p in outcome.phases] == ["agent", "verifier", "artifacts"]
    assert server.received[0].prompt == ROW["prompt"]
    trajectory = read_trajectory(tmp_path / "artifacts" / "trajectory.json")
    user, model, score = trajectory.steps
    assert isinstance(user, UserStep) and user.text == ROW["prompt"]
    assert isinstance(model, ModelStep) and model.text == " 4\n" and model.usage.input_tokens == 12
    assert model.request.protocol == protocol and model.request.model == "team-model/base"
    assert isinstance(score, ScoreStep) and (score.reward, score.expected) == (1.0, "4")
    assert (score.scorer, score.answer) == ("exact", " 4\n")
    assert score.explanation == "the trimmed answer equals '4'"
    assert sorted(p.name for p in (tmp_path / "artifacts").iterdir()) == ["trajectory.json"]


def test_a_wrong_answer_scores_zero_and_is_still_completed(tmp_path: Path) -> None:
    with ScriptedServer([Reply(text="5")]) as server:
        outcome = run(spec_for(tmp_path, profile(server)))
    assert (outcome.status, outcome.reward, outcome.error) == ("completed", 0.0, None)


@pytest.mark.parametrize(
    ("scorer", "answer", "expected", "reward"),
    [
        ("includes", "The answer is Paris.", "Paris", 1.0),
        ("regex", "It is 42.", r"\b42\b", 1.0),
        ("numeric", "$1,000", "1000", 1.0),
        ("numeric", "about a thousand", "1000", 0.0),
    ],
)
def test_the_datasets_scorer_is_used(
    tmp_path: Path, scorer: str, answer: str, expected: str, reward: float
) -> None:
    row = {**ROW, "answer": expected}
    with ScriptedServer([Reply(text=answer)]) as server:
        outcome = run(spec_for(tmp_path, profile(server), row=row, scorer=scorer))
    assert outcome.reward == reward


def test_system_prompt_and_generation_params_reach_the_endpoint(tmp_path: Path) -> None:
    params = {"SYSTEM_PROMPT": "Answer with a number only.", "TEMPERATURE": "0", "MAX_OUTPUT_TOKENS": "256"}
    with ScriptedServer([Reply(text="4")]) as server:
        run(spec_for(tmp_path, profile(server, **params)))
    body = server.received[0].body
    assert body["messages"][0] == {"role": "system", "content": "Answer with a number only."}
    assert (body["temperature"], body["max_tokens"]) == (0.0, 256)
    trajectory = read_trajectory(tmp_path / "artifacts" / "trajectory.json")
    assert [s.kind for s in trajectory.steps] == ["system", "user", "model", "score"]


def test_an_answer_cut_by_the_token_limit_is_scored_and_says_length(tmp_path: Path) -> None:
    with ScriptedServer([Reply(text="4, because", stop="length")]) as server:
        outcome = run(spec_for(tmp_path, profile(server), scorer="includes"))
    assert (outcome.status, outcome.reward, outcome.stop_reason) == ("completed", 1.0, "length")


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_an_unexpected_reasoning_effort_fails_at_once_as_model_error(tmp_path: Path, protocol: str) -> None:
    rejection = Reply(status=400, error="Unexpected reasoning effort 'high'")
    with ScriptedServer([rejection], default=lambda r: Reply(text="4")) as server:
        outcome = run(spec_for(tmp_path, profile(server, protocol, REASONING_EFFORT="high")))
    assert outcome.status == "failed" and outcome.error is not None
    assert outcome.error.type == "model_error"
    assert "Unexpected reasoning effort 'high'" in outcome.error.message
    assert len(server.received) == 1
    assert outcome.reward is None and outcome.reward_note == "the model gave no answer to score"
    assert outcome.stop_reason == "model_error"
    trajectory = read_trajectory(tmp_path / "artifacts" / "trajectory.json")
    model = trajectory.steps[-1]
    assert isinstance(model, ModelStep) and "Unexpected reasoning effort" in (model.error or "")
    assert not any(isinstance(step, ScoreStep) for step in trajectory.steps)


def test_a_bad_key_fails_at_once_with_the_servers_message(tmp_path: Path) -> None:
    with ScriptedServer(api_key="sk-right") as server:
        outcome = run(spec_for(tmp_path, profile(server, MODEL_API_KEY="sk-wrong")))
    assert outcome.error is not None and outcome.error.type == "model_error"
    assert outcome.error.message == f"HTTP 401 from {server.openai_url}/chat/completions: invalid API key"


def test_an_unreachable_endpoint_is_a_model_error_naming_it(tmp_path: Path, refused_port: int) -> None:
    port = refused_port
    params = {"MODEL_PROTOCOL": "openai", "MODEL_BASE_URL": f"http://127.0.0.1:{port}/v1", "MODEL_NAME": "m"}
    outcome = run(spec_for(tmp_path, {**params, "MAX_RETRIES": "0"}))
    assert outcome.error is not None and outcome.error.type == "model_error"
    assert outcome.error.message.startswith(f"could not reach http://127.0.0.1:{port}/v1/chat/completions")


def test_rate_limits_are_retried_and_counted(tmp_path: Path) -> None:
    script = [Reply(status=429, error="slow down", headers={"Retry-After": "0"}), Reply(text="4")]
    with ScriptedServer(script) as server:
        outcome = run(spec_for(tmp_path, profile(server)))
    assert outcome.reward == 1.0
    assert outcome.usage["retries"] == 1


def test_the_agent_timeout_bounds_the_model_call(tmp_path: Path) -> None:
    with ScriptedServer([Reply(text="4", delay_sec=2.0)]) as server:
        outcome = run(spec_for(tmp_path, profile(server), agent_timeout_sec=0.3))
    assert outcome.error is not None and outcome.error.type == "agent_timeout"
    assert outcome.stop_reason == "timeout"
    assert outcome.phases[0].timed_out


def test_a_bad_profile_at_run_time_is_a_model_error_not_a_crash(tmp_path: Path) -> None:
    outcome = run(spec_for(tmp_path, {"MODEL_PROTOCOL": "gemini", "MODEL_NAME": "m"}))
    assert outcome.error is not None and outcome.error.type == "model_error"
    assert outcome.error.message.startswith("MODEL_PROTOCOL must be one of openai, anthropic, not 'gemini'")


def test_a_spec_without_its_row_is_an_infrastructure_error(tmp_path: Path) -> None:
    spec = spec_for(tmp_path, {}).model_copy(update={"row": None})
    outcome = run(spec)
    assert outcome.error is not None and outcome.error.type == "infrastructure_error"


def test_params_are_checked_for_submission() -> None:
    runner = ChatRunner()
    assert check_params(runner, {}) == [
        "MODEL_PROTOCOL is required (openai or anthropic)",
        "MODEL_BASE_URL is required",
        "MODEL_NAME is required",
    ]
    good = {"MODEL_PROTOCOL": "anthropic", "MODEL_BASE_URL": "https://h", "MODEL_NAME": "m"}
    assert check_params(runner, good) == []
    unread = unread_params(runner, {**good, "AGENT_NAME": "oracle", "TEMPERATURE": "0"})
    assert (unread.names, unread.ignored_by) == (["AGENT_NAME"], "runner envloop/chat@1")


def test_an_answer_the_regex_cannot_decide_in_time_is_a_verifier_error(tmp_path: Path) -> None:
    row = {**ROW, "answer": "(a|aa)+$"}
    with ScriptedServer([Reply(text="a" * 60 + "b")]) as server:
        outcome = run(spec_for(tmp_path, profile(server), row=row, scorer="regex"))
    assert outcome.status == "failed" and outcome.error is not None
    assert outcome.error.type == "verifier_error"
    assert outcome.reward is None and "did not finish within 1 s" in (outcome.reward_note or "")
    *_, step = read_trajectory(tmp_path / "artifacts" / "trajectory.json").steps
    assert isinstance(step, ScoreStep) and step.reward is None
