"""`envloop/chat@1` from the command line, against the scripted endpoint: a held-out set pushed as
JSONL, an endpoint's /base and /sft aliases compared, each exchange inspectable with
`el trial get --steps`, and bad profiles refused at submission."""

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from envloop.testing import Received, Reply, ScriptedServer
from tests.conftest import El, write_profile

ROWS = [
    {"id": "add", "prompt": "What is 2+2? Answer with a number.", "answer": "4"},
    {"id": "capital", "prompt": "Capital of France? One word.", "answer": "Paris"},
    {"id": "mul", "prompt": "What is 6*7? Answer with a number.", "answer": "42"},
]
SFT_ANSWERS = {"What is 2+2? Answer with a number.": " 4\n", "Capital of France? One word.": "Paris"}


def trained_or_not(received: Received) -> Reply:
    """`…/sft` knows two of the three answers; `…/base` knows none."""
    if received.model.endswith("/sft"):
        return Reply(text=SFT_ANSWERS.get(received.prompt, "I am not sure."))
    return Reply(text="Let me think about that.")


@pytest.fixture
def endpoint() -> Iterator[ScriptedServer]:
    with ScriptedServer(default=trained_or_not, api_key="sk-endpoint-key") as server:
        yield server


@pytest.fixture
def heldout(el: El, tmp_path: Path) -> str:
    path = tmp_path / "heldout.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    pushed = el.ok("dataset", "push", str(path), "--name", "heldout", "--scorer", "exact", "--json").json()
    assert pushed["runner"] == "envloop/chat@1"
    return str(pushed["ref"])


def chat_profile(el: El, tmp_path: Path, name: str, params: dict[str, str]) -> str:
    secret = ["MODEL_API_KEY"] if "MODEL_API_KEY" in params else []
    path = write_profile(tmp_path / f"{name.replace('/', '-')}.json", params, secret=secret)
    el.ok("profile", "create", name, "1", "--file", str(path))
    return f"{name}@1"


def endpoint_params(server: ScriptedServer, protocol: str, model: str) -> dict[str, str]:
    url = server.openai_url if protocol == "openai" else server.anthropic_url
    return {
        "MODEL_PROTOCOL": protocol,
        "MODEL_BASE_URL": url,
        "MODEL_NAME": model,
        "MODEL_API_KEY": "sk-endpoint-key",
        "TEMPERATURE": "0",
        "MAX_OUTPUT_TOKENS": "256",
    }


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_base_and_sft_aliases_compared_on_a_heldout_set(
    el: El, tmp_path: Path, endpoint: ScriptedServer, heldout: str, protocol: str
) -> None:
    base = chat_profile(el, tmp_path, "team/base", endpoint_params(endpoint, protocol, "my-model/base"))
    sft = chat_profile(el, tmp_path, "team/sft", endpoint_params(endpoint, protocol, "my-model/sft"))
    job = el.ok(
        "job", "submit", "--dataset", heldout, "--profile", base, "--profile", sft, "--attempts", "2",
        "--wait", "--json", timeout=180,
    ).json()  # fmt: skip
    assert job["status"] == "completed"
    result = el.ok("job", "result", job["id"], "--json").json()
    assert result["profiles"][base]["score"] == 0.0
    assert result["profiles"][sft]["score"] == pytest.approx(2 / 3)
    assert result["profiles"][sft]["score_counts"]["scored"] == 6
    assert {r.protocol for r in endpoint.received} == {protocol}
    assert len(endpoint.received) == 12

    trials = el.ok("trial", "list", "--job", job["id"], "--json").json()
    add_sft = next(t for t in trials if t["profile"] == sft and t["task"] == "add")
    shown = el.ok("trial", "get", add_sft["id"], "--steps").stdout
    assert "What is 2+2? Answer with a number." in shown
    assert "#1 model  " in shown and f"{protocol} my-model/sft" in shown
    assert "exact  reward 1  the trimmed answer equals '4'" in shown
    as_json = el.ok("trial", "get", add_sft["id"], "--steps", "--json").json()
    assert as_json["reward"] == 1.0
    kinds = [step["kind"] for step in as_json["trajectory"]["steps"]]
    assert kinds == ["user", "model", "score"]
    assert as_json["trajectory"]["steps"][1]["usage"]["output_tokens"] >= 1
    artifacts = {a["path"] for a in el.ok("trial", "artifacts", add_sft["id"], "--json").json()}
    assert artifacts == {"trajectory.json"}


@pytest.mark.slow
def test_get_without_steps_keeps_its_shape_and_a_missing_or_broken_trajectory_is_reported(
    el: El, home: Path, tmp_path: Path, endpoint: ScriptedServer, heldout: str
) -> None:
    profile = chat_profile(el, tmp_path, "team/sft", endpoint_params(endpoint, "openai", "my-model/sft"))
    job = el.ok("job", "submit", "--dataset", heldout, "--profile", profile, "--wait", "--json").json()
    first, second = el.ok("trial", "list", "--job", job["id"], "--json").json()[:2]
    assert "trajectory" not in el.ok("trial", "get", first["id"], "--json").json()
    kept = home / "artifacts" / "trials"
    (kept / first["id"] / "trajectory.json").unlink()
    assert "no trajectory was kept for this trial" in el.ok("trial", "get", first["id"], "--steps").stdout
    assert el.ok("trial", "get", first["id"], "--steps", "--json").json()["trajectory"] is None
    (kept / second["id"] / "trajectory.json").write_text('{"schema_version": "envloop.trajectory/v1"}')
    broken = el("trial", "get", second["id"], "--steps")
    assert broken.code == 2
    assert broken.stderr.startswith(
        f"el: error: trial {second['id']}: trajectory.json is not a valid trajectory"
    )
    missing = el("trial", "get", "trl_unknown", "--steps")
    assert missing.code == 2 and missing.stderr.strip() == "el: error: unknown trial 'trl_unknown'"


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"MODEL_NAME": ""}, "MODEL_NAME is required"),
        ({"MODEL_BASE_URL": ""}, "MODEL_BASE_URL is required"),
    ],
)
def test_chat_profiles_missing_a_param_are_refused_at_submission(
    el: El, tmp_path: Path, endpoint: ScriptedServer, heldout: str, change: dict[str, str], problem: str
) -> None:
    params = {k: v for k, v in {**endpoint_params(endpoint, "openai", "m/sft"), **change}.items() if v}
    profile = chat_profile(el, tmp_path, "team/bad", params)
    refused = el("job", "submit", "--dataset", heldout, "--profile", profile)
    assert refused.code == 2
    assert refused.stderr.strip() == f"el: error: profile {profile} cannot run with envloop/chat@1: {problem}"
    assert el.ok("job", "list", "--json").json() == []
    assert endpoint.received == []


@pytest.mark.parametrize(
    ("change", "secret", "problem"),
    [
        ({"MODEL_PROTOCOL": "gemini"}, [], "MODEL_PROTOCOL must be one of openai, anthropic, not 'gemini'"),
        ({"TEMPERATURE": "warm"}, [], "TEMPERATURE must be a number ≥ 0, not 'warm'"),
        (
            {"MODEL_BASE_URL": "ftp://internal-host-name"},
            ["MODEL_BASE_URL"],
            "MODEL_BASE_URL must be an http:// or https:// URL (the secret value is not shown)",
        ),
    ],
)
def test_chat_profiles_with_mistyped_values_are_refused_when_created(
    el: El, tmp_path: Path, endpoint: ScriptedServer, change: dict[str, str], secret: list[str], problem: str
) -> None:
    path = write_profile(
        tmp_path / "bad.json", {**endpoint_params(endpoint, "openai", "m/sft"), **change}, secret
    )
    created = el("profile", "create", "team/bad", "1", "--file", str(path))
    assert (created.code, created.stderr) == (2, f"el: error: profile team/bad@1: {problem}\n")
    assert el.ok("profile", "list", "--json").json() == []


def test_an_unreachable_endpoint_fails_the_trials_as_model_error(
    el: El, tmp_path: Path, heldout: str, refused_port: int
) -> None:
    port = refused_port
    params = {
        "MODEL_PROTOCOL": "openai",
        "MODEL_BASE_URL": f"http://127.0.0.1:{port}/v1",
        "MODEL_NAME": "m",
        "MAX_RETRIES": "0",
    }
    profile = chat_profile(el, tmp_path, "team/offline", params)
    followed = el("job", "submit", "--dataset", heldout, "--profile", profile, "--wait", "--json")
    job = followed.json()
    assert job["status"] == "failed" and followed.code == 3
    trials = el.ok("trial", "list", "--job", job["id"], "--json").json()
    assert {t["error_type"] for t in trials} == {"model_error"}
    assert all(t["error_message"].startswith(f"could not reach http://127.0.0.1:{port}/v1") for t in trials)
    result = el.ok("job", "result", job["id"], "--json").json()
    assert result["profiles"][profile]["score"] is None  # no answer is not a zero
