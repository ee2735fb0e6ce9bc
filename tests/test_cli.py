"""The `el` command as users and scripts drive it: contracts for JSON output, exit codes, errors."""

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, El, write_profile


@pytest.fixture(scope="session")
def demo_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A home with the demo dataset and the oracle and nop profiles, made through `el` once per
    test process; each test that needs one gets a copy of its own."""
    root = tmp_path_factory.mktemp("demo-home")
    el = El(home=root / "home", cwd=root)
    el.ok("dataset", "push", str(EXAMPLES / "tasks"), "--name", "demo")
    el.ok("profile", "create", "demo/oracle", "1", "--file", str(EXAMPLES / "profiles" / "oracle.json"))
    el.ok("profile", "create", "demo/nop", "1", "--file", str(EXAMPLES / "profiles" / "nop.json"))
    return el.home


@pytest.fixture
def demo(el: El, demo_home: Path) -> El:
    shutil.copytree(demo_home, el.home)
    return el


def _one_line_error(result: object) -> str:
    stderr = result.stderr.strip()  # type: ignore[attr-defined]
    assert result.code == 2, stderr  # type: ignore[attr-defined]
    assert len(stderr.splitlines()) == 1, stderr
    assert "Traceback" not in stderr
    return stderr


def test_dataset_push_json_has_name_version_and_ref(el: El) -> None:
    data = el.ok("dataset", "push", str(EXAMPLES / "tasks"), "--name", "demo", "--json").json()
    assert (data["name"], data["version"], data["ref"]) == ("demo", 1, "demo@1")
    again = el.ok("dataset", "push", str(EXAMPLES / "tasks"), "--name", "demo", "--json").json()
    assert again["ref"] == "demo@1"


def test_profile_create_json_for_a_seed_style_profile(el: El, tmp_path: Path) -> None:
    path = tmp_path / "seed.json"
    path.write_text(
        json.dumps(
            {
                "schema_version": "envplatform.profile/v2",
                "name": "team/eval-my-model",
                "version": "1",
                "secret_params": ["MODEL_API_KEY"],
                "spec": {"params": {"AGENT_NAME": "oracle", "MODEL_API_KEY": "YOUR_ENVLOOP_KEY"}},
            }
        )
    )
    data = el.ok("profile", "create", "team/eval-my-model", "1", "--file", str(path), "--json").json()
    assert data["ref"] == "team/eval-my-model@1"
    assert data["params"]["MODEL_API_KEY"] == "***"
    shown = el.ok("profile", "show", "team/eval-my-model@1")
    assert "YOUR_ENVLOOP_KEY" not in shown.stdout + shown.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["dataset", "show", "nope@1"],
        ["dataset", "show", "nope@x"],
        ["job", "get", "job_missing"],
        ["trial", "get", "trl_missing"],
        ["job", "submit", "--dataset", "demo@9", "--profile", "demo/nop@1"],
        ["job", "submit", "--dataset", "demo@1", "--profile", "demo/ghost@1"],
        ["job", "submit", "--dataset", "demo@1", "--profile", "demo/nop@1", "--bogus-option"],
        ["dataset", "push", "/nonexistent/dir", "--name", "x"],
        ["profile", "create", "p", "1"],
        ["job", "frobnicate"],
    ],
)
def test_bad_input_exits_2_with_one_clear_line(demo: El, args: list[str]) -> None:
    _one_line_error(demo(*args))


def test_malformed_task_toml_exits_2_naming_the_file(el: El, tmp_path: Path) -> None:
    task = tmp_path / "broken"
    (task / "tests").mkdir(parents=True)
    (task / "tests" / "test.sh").write_text("exit 0\n")
    (task / "instruction.md").write_text("x\n")
    (task / "task.toml").write_text("[agent\ntimeout_sec = 1\n")
    assert "task.toml" in _one_line_error(el("dataset", "push", str(task), "--name", "b"))


def test_a_profile_that_cannot_run_is_refused_before_it_is_frozen(demo: El, tmp_path: Path) -> None:
    missing = write_profile(tmp_path / "c.json", {"AGENT_NAME": "command"})
    assert _one_line_error(demo("profile", "create", "cmd", "1", "--file", str(missing))) == (
        "el: error: profile cmd@1: AGENT_COMMAND is required when AGENT_NAME=command"
    )
    slip = write_profile(tmp_path / "s.json", {"AGENT_NAME": "command", "AGENT_COMAND": "true"})
    assert _one_line_error(demo("profile", "create", "cmd", "1", "--file", str(slip))) == (
        "el: error: profile cmd@1: AGENT_COMAND is not a param of agent 'command': "
        "did you mean AGENT_COMMAND?"
    )
    # Nothing was frozen: the version is still free for the profile as it was meant.
    meant = write_profile(tmp_path / "m.json", {"AGENT_NAME": "command", "AGENT_COMMAND": "true"})
    demo.ok("profile", "create", "cmd", "1", "--file", str(meant))
    # A name no component declares and none resembles may be a task's own variable: kept.
    own = write_profile(tmp_path / "o.json", {"AGENT_NAME": "nop", "DATA_URL": "https://example.test"})
    demo.ok("profile", "create", "own", "1", "--file", str(own))


def test_demo_job_end_to_end_with_json_results(demo: El, tmp_path: Path) -> None:
    submitted = demo(
        "job",
        "submit",
        "--dataset",
        "demo@1",
        "--profile",
        "demo/oracle@1",
        "--profile",
        "demo/nop@1",
        "--attempts",
        "2",
        "--wait",
        "--json",
        timeout=300,
    )
    job = submitted.json()  # stdout is only the JSON document, progress went to stderr
    # The broken verifier fails its trials (verifier_error), so the job rolls up to failed, and
    # following it to that end exits 3 so a script can tell.
    assert job["status"] == "failed" and submitted.code == 3
    result = demo.ok("job", "result", job["id"], "--json").json()
    assert result["status"] == "failed"
    oracle, nop = result["profiles"]["demo/oracle@1"], result["profiles"]["demo/nop@1"]
    for metrics in (oracle, nop):
        assert {"score", "pass", "pass_at_k", "pass_hat_k", "score_counts", "curve"} <= metrics.keys()
    # 5 tasks x 2 attempts; the broken verifier never writes a reward, and that is not a zero.
    assert oracle["score_counts"] == {
        "total": 10,
        "scored": 8,
        "missing": 2,
        "invalid": 2,
        "cancelled": 0,
        "invalidated": 0,
        "total_members": 5,
        "complete_members": 4,
    }
    assert oracle["score"] == pytest.approx((1 + 1 + 1 + 0.75) * 2 / 8)
    assert oracle["pass"] is None  # partial credit makes the binary metrics undefined
    assert nop["score"] == 0.0


def test_job_result_prints_the_coverage_line_first(demo: El) -> None:
    job = demo.ok(
        "job",
        "submit",
        "--dataset",
        "demo@1",
        "--profile",
        "demo/oracle@1",
        "--task",
        "hello-file",
        "--task",
        "sum-numbers",
        "--attempts",
        "2",
        "--wait",
        "--json",
        timeout=300,
    ).json()
    text = demo.ok("job", "result", job["id"]).stdout.splitlines()
    body = [line for line in text if line.strip()]
    assert body[1] == "demo/oracle@1"
    assert body[2] == "score 100%, 4/4 attempts scored, 2/2 members complete"
    assert body[3].startswith("pass 100%   pass@2 100%   pass^2 100%")


def test_submit_wait_prints_what_job_result_prints(demo: El) -> None:
    """As the docs say: the task table, then usage, why attempts are missing, and warnings."""
    args = ["--dataset", "demo@1", "--profile", "demo/oracle@1", "--task", "broken-verifier"]
    submitted = demo("job", "submit", *args, "--task", "hello-file", "--wait", timeout=300)
    assert submitted.code == 3, submitted.stderr  # the broken verifier fails the job
    text = submitted.stdout
    assert "score 100%, 1/2 attempts scored" in text
    assert "Usage" in text and "trial time median" in text
    assert "Why attempts are missing or failed" in text and "verifier" in text
    job_id = text.split()[1]
    assert demo.ok("job", "result", job_id).stdout == text


def test_export_then_submit_config_reproduces_the_job(demo: El, tmp_path: Path) -> None:
    job = demo.ok(
        "job",
        "submit",
        "--dataset",
        "demo@latest",
        "--profile",
        "demo/nop@1",
        "--task",
        "hello-file",
        "--attempts",
        "1",
        "--tag",
        "round=1",
        "--json",
    ).json()
    config = tmp_path / "job.json"
    demo.ok("job", "export", job["id"], "-o", str(config))
    again = demo.ok("job", "submit", "--config", str(config), "--json").json()
    assert (again["dataset"], again["profiles"], again["tasks"], again["tags"]) == (
        "demo@1",
        ["demo/nop@1"],
        ["hello-file"],
        {"round": "1"},
    )
    demo.ok("job", "watch", again["id"], "--json", timeout=300)


def test_trial_commands_list_get_logs_artifacts_and_invalidate(demo: El, tmp_path: Path) -> None:
    job = demo.ok(
        "job",
        "submit",
        "--dataset",
        "demo@1",
        "--profile",
        "demo/oracle@1",
        "--task",
        "sum-numbers",
        "--attempts",
        "1",
        "--wait",
        "--json",
        timeout=300,
    ).json()
    (trial,) = demo.ok("trial", "list", "--job", job["id"], "--json").json()
    assert (trial["status"], trial["reward"]) == ("completed", 1.0)
    detail = demo.ok("trial", "get", trial["id"], "--json").json()
    assert [p["name"] for p in detail["phases"]][:3] == ["setup", "agent", "verifier"]
    kept = demo.ok("trial", "artifacts", trial["id"], "--json").json()
    assert "verifier/reward.txt" in {a["path"] for a in kept}
    streams = [a for a in kept if a["path"].endswith(("/stdout.txt", "/stderr.txt"))]
    assert all(a["size"] > 0 for a in streams), "a stream that printed nothing kept a file"
    logs = demo.ok("trial", "logs", trial["id"], "--phase", "agent", "--json").json()
    assert set(logs) == {Path(a["path"]).stem for a in streams if a["path"].startswith("agent/")}
    demo.ok("trial", "logs", trial["id"], "--phase", "verifier", "--json")
    assert "reason" in _one_line_error(demo("trial", "invalidate", trial["id"]))
    demo.ok("trial", "invalidate", trial["id"], "--reason", "flaky host")
    result = demo.ok("job", "result", job["id"], "--json").json()["profiles"]["demo/oracle@1"]
    assert (result["score"], result["score_counts"]["invalidated"]) == (None, 1)
    demo.ok("trial", "invalidate", trial["id"], "--undo")
    assert demo.ok("job", "result", job["id"], "--json").json()["profiles"]["demo/oracle@1"]["score"] == 1.0


def test_runner_list_names_the_shell_runner(el: El) -> None:
    refs = [r["ref"] for r in el.ok("runner", "list", "--json").json()]
    assert "envloop/shell@1" in refs


def test_a_harbor_task_from_another_project_runs_unmodified(el: El) -> None:
    """The fixture hard-codes /app and /logs like Terminal-Bench tasks: it needs the bwrap sandbox."""
    fixture = Path(__file__).parent / "fixtures" / "tasks" / "harbor-hello-world"
    el.ok("dataset", "push", str(fixture), "--name", "foreign")
    el.ok("profile", "create", "demo/oracle", "1", "--file", str(EXAMPLES / "profiles" / "oracle.json"))
    job = el.ok(
        "job",
        "submit",
        "--dataset",
        "foreign@1",
        "--profile",
        "demo/oracle@1",
        "--wait",
        "--json",
        timeout=300,
    ).json()
    assert job["status"] == "completed"
    (trial,) = el.ok("trial", "list", "--job", job["id"], "--json").json()
    assert (trial["reward"], trial["sandbox"]) == (1.0, "bwrap")
