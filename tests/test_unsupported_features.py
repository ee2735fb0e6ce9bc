"""Task features envloop does not honour everywhere, named at push and refused at submission.

A task that asks for GPUs (no environment gives them), or for compose sidecars, a separate verifier,
an egress allowlist or Dockerfile steps (only a container gives them) would, run without them,
measure the environment rather than the agent.
These tests drive `el` as a user would: push says what each task needs, a job whose environment
cannot give it is refused in one line naming the tasks and the feature (and creates nothing), and
`--skip-unsupported` runs the rest, records what it left out and never scores it.
"""

from pathlib import Path

import pytest

from envloop.environments.features import refused_in, task_features
from envloop.services.context import Context
from envloop.services.datasets import push_dataset
from envloop.services.profiles import create_profile, read_profile_file
from envloop.tasks.dockerfile import read_plan
from envloop.tasks.harbor import load_harbor_task
from tests.api_server import Server
from tests.conftest import EXAMPLES, El, make_task, write_profile

FEATURE_TASKS = {
    "gpu-task": ("[environment]\ngpus = 2\n", None),
    "compose-task": ("", ("docker-compose.yaml", "services:\n  db:\n    image: postgres\n")),
    "allowlist-task": ('[environment]\nnetwork_mode = "allowlist"\nallowed_hosts = ["example.com"]\n', None),
    "verifier-task": ("[verifier.environment]\ncpus = 1\n", None),
    "build-task": (
        "",
        ("Dockerfile", "FROM debian:bookworm-slim\nRUN apt-get install -y tree\nWORKDIR /app\n"),
    ),
}


def write_tasks(root: Path) -> Path:
    make_task(root, "plain", solve='touch "${ENVLOOP_APP_DIR:-/app}/done"')
    for name, (toml, extra_file) in FEATURE_TASKS.items():
        task = make_task(root, name, solve='touch "${ENVLOOP_APP_DIR:-/app}/done"', toml=toml)
        if extra_file is not None:
            (task / "environment" / extra_file[0]).write_text(extra_file[1])
    return root


@pytest.fixture
def pushed(el: El, ctx: Context, tmp_path: Path) -> El:
    """`el` on a store holding the tasks as `mixed@1` and profile `demo/oracle@1`, set up through
    the services: the tests check what `el` does with them."""
    push_dataset(ctx, write_tasks(tmp_path / "tasks"), "mixed")
    create_profile(ctx, "demo/oracle", "1", read_profile_file(EXAMPLES / "profiles" / "oracle.json"))
    return el


def test_features_are_found_per_task_with_where_envloop_honours_them(tmp_path: Path) -> None:
    root = write_tasks(tmp_path / "tasks")
    found = {
        name: [(f.name, f.environments, f.required) for f in task_features(load_harbor_task(root / name))]
        for name in ["plain", *FEATURE_TASKS]
    }
    assert found == {
        "plain": [],
        "gpu-task": [("gpus", [], True)],
        "compose-task": [("compose", ["docker"], True)],
        "allowlist-task": [("network-allowlist", ["docker"], True)],
        "verifier-task": [("separate-verifier", ["docker"], True)],
        "build-task": [("dockerfile", ["docker"], True)],
    }
    build = task_features(load_harbor_task(root / "build-task"))
    assert refused_in(build, "local") == build and refused_in(build, "docker") == []


def test_a_bare_from_or_the_files_the_sandbox_copies_are_no_feature(tmp_path: Path) -> None:
    task = make_task(tmp_path, "copies")
    (task / "environment" / "data.txt").write_text("x\n")
    (task / "environment" / "Dockerfile").write_text(
        "FROM python:3.11-slim\nWORKDIR /app\nENV A=1\nCOPY data.txt /app/data.txt\n"
    )
    assert task_features(load_harbor_task(task)) == []


def test_only_harbors_compose_file_name_is_read_as_compose_the_others_are_data(tmp_path: Path) -> None:
    # Settings envloop would refuse in a compose file: as data of the build context they are nothing.
    unsupported = "services:\n  web:\n    image: nginx\n    ports: ['8080:80']\n"
    task = make_task(tmp_path, "compose-data")
    (task / "environment" / "Dockerfile").write_text("FROM debian:12\nWORKDIR /app\n")
    for name in ("docker-compose.yml", "compose.yaml", "compose.yml"):
        (task / "environment" / name).write_text(unsupported)
    assert task_features(load_harbor_task(task)) == []
    (task / "environment" / "docker-compose.yaml").write_text(unsupported)
    [compose] = task_features(load_harbor_task(task))
    assert (compose.name, compose.environments) == ("compose", [])
    assert compose.detail.startswith("environment/docker-compose.yaml: services.web.ports:")


def test_push_warns_per_task_and_the_revision_keeps_the_warnings(el: El, tmp_path: Path) -> None:
    pushed = el("dataset", "push", str(write_tasks(tmp_path / "tasks")), "--name", "mixed", "--json")
    assert pushed.code == 0, pushed.stderr
    warned = [line for line in pushed.stderr.splitlines() if line.startswith("warning:")]
    assert len(warned) == len(FEATURE_TASKS)
    assert any("task gpu-task: [environment] gpus = 2: no environment of envloop" in w for w in warned)
    assert any(
        "task build-task: environment/Dockerfile instructions the local sandbox does not execute (1 RUN): "
        "only the docker environment honours it; a job that asks for another --environment is refused; "
        "one that leaves the environment to its workers runs with a warning" in w
        for w in warned
    )
    gpus = (
        "task gpu-task: [environment] gpus = 2: no environment of envloop honours it; a job with this task is"
    )
    assert any(w.endswith(f"{gpus} refused") for w in warned)
    assert not any("plain" in w for w in warned)
    assert pushed.json()["warnings"] == [w.removeprefix("warning: ") for w in warned]
    shown = el.ok("dataset", "show", "mixed@1", "--json").json()
    assert shown["warnings"] == pushed.json()["warnings"]
    features = {m["name"]: [f["name"] for f in m["features"]] for m in shown["members"]}
    assert features["plain"] == [] and features["compose-task"] == ["compose"]
    text = el.ok("dataset", "show", "mixed@1").stdout
    assert 'task allowlist-task: network_mode = "allowlist" (example.com)' in text
    again = el("dataset", "push", str(tmp_path / "tasks"), "--name", "mixed")
    assert again.stderr.count("warning:") == len(FEATURE_TASKS)  # the same revision, the same words


@pytest.mark.parametrize(
    ("environment", "refused"),
    [
        ("local", ["gpu-task", "compose-task", "allowlist-task", "verifier-task", "build-task"]),
        ("docker", ["gpu-task"]),
        ("auto", ["gpu-task"]),
    ],
)
def test_a_job_that_cannot_give_a_task_what_it_needs_is_refused_naming_both(
    pushed: El, environment: str, refused: list[str]
) -> None:
    result = pushed(
        "job", "submit", "--dataset", "mixed@1", "--profile", "demo/oracle@1", "--environment", environment
    )
    assert result.code == 2
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert f"{len(refused)} task(s) cannot run as their authors meant" in result.stderr
    for name in refused:
        assert name in result.stderr
    assert ("build-task" in result.stderr) == (environment == "local")
    assert ("docker-compose sidecar services" in result.stderr) == (environment == "local")
    assert "GPUs" in result.stderr
    assert "--skip-unsupported" in result.stderr
    assert pushed("job", "list", "--json").json() == []


def test_leaving_the_environment_to_the_worker_refuses_what_none_honours_and_warns_of_the_rest(
    pushed: El,
) -> None:
    submit = ("job", "submit", "--dataset", "mixed@1", "--profile", "demo/oracle@1")
    refused = pushed(*submit)
    assert refused.code == 2 and "1 task(s)" in refused.stderr and "gpu-task" in refused.stderr
    assert "build-task" not in refused.stderr and "compose-task" not in refused.stderr
    accepted = pushed(*submit, "--task", "plain", "--task", "build-task", "--json")
    assert accepted.code == 0, accepted.stderr
    assert (
        "task build-task: Dockerfile instructions only a container runs: only --environment docker (or auto) "
        "honours it, and this job leaves the environment to its workers"
    ) in accepted.stderr


def test_skip_unsupported_runs_the_rest_records_the_rest_and_never_scores_it(pushed: El) -> None:
    job = pushed.ok(
        "job",
        "submit",
        "--dataset",
        "mixed@1",
        "--profile",
        "demo/oracle@1",
        "--environment",
        "local",
        "--skip-unsupported",
        "--wait",
        "--json",
        timeout=300,
    )
    view = job.json()
    assert view["tasks"] == ["plain"] and view["skip_unsupported"] is True
    skipped = {item["task"]: item["reason"] for item in view["skipped"]}
    assert set(skipped) == set(FEATURE_TASKS)
    assert skipped["gpu-task"] == "needs GPUs, which --environment local cannot give"
    assert "5 task(s) not run" not in job.stderr  # grouped by reason, each group said once
    assert "1 task not run: needs GPUs, which --environment local cannot give (task gpu-task)" in job.stderr
    trials = pushed.ok("trial", "list", "--job", view["id"], "--json").json()
    assert [(t["task"], t["reward"]) for t in trials] == [("plain", 1.0)]
    result = pushed.ok("job", "result", view["id"], "--json").json()
    not_run = {group["text"]: group["tasks"] for group in result["diagnosis"]["not_run"]}
    assert not_run["1 task not run: needs a network allowlist, which --environment local cannot give"] == [
        "allowlist-task"
    ]
    counts = result["profiles"]["demo/oracle@1"]["score_counts"]
    assert (counts["total"], counts["scored"], result["profiles"]["demo/oracle@1"]["score"]) == (1, 1, 1.0)
    text = pushed.ok("job", "result", view["id"]).stdout
    assert (
        "1 task not run: needs docker-compose sidecar services, which --environment local cannot give: "
        "compose-task" in text
    )
    exported = pushed.ok("job", "export", view["id"]).stdout
    assert '"skip_unsupported": true' in exported and '"tasks"' not in exported.replace('"tasks": null', "")


def test_skipping_every_selected_task_is_refused(pushed: El) -> None:
    result = pushed(
        "job",
        "submit",
        "--dataset",
        "mixed@1",
        "--profile",
        "demo/oracle@1",
        "--task",
        "gpu-task",
        "--skip-unsupported",
    )
    assert result.code == 2 and "none to run" in result.stderr
    assert pushed("job", "list", "--json").json() == []


@pytest.mark.slow
def test_over_http_push_carries_the_warnings_and_a_refused_job_is_a_400_creating_nothing(
    server: Server, tmp_path: Path
) -> None:
    client = server.client()
    view = client.push_dataset(write_tasks(tmp_path / "tasks"), "mixed")
    assert len(view.warnings) == len(FEATURE_TASKS)
    assert {m.name: len(m.features or []) for m in client.get_dataset("mixed@1").members or []}[
        "gpu-task"
    ] == 1
    client.create_profile(
        "p", "1", read_profile_file(write_profile(tmp_path / "p.json", {"AGENT_NAME": "nop"}))
    )
    with server.http() as http:
        refused = http.post(
            "/v1/jobs", json={"dataset": "mixed@1", "profiles": ["p@1"], "environment": "docker"}
        )
        assert refused.status_code == 400
        assert "gpu-task" in refused.text and "GPUs" in refused.text and "compose-task" not in refused.text
        assert http.get("/v1/jobs").json() == []
        skipping = {
            "dataset": "mixed@1",
            "profiles": ["p@1"],
            "environment": "docker",
            "skip_unsupported": True,
        }
        created = http.post("/v1/jobs", json=skipping)
        assert created.status_code == 201, created.text
        assert created.json()["job"]["tasks"] == [
            "allowlist-task",
            "build-task",
            "compose-task",
            "plain",
            "verifier-task",
        ]
        job_id = created.json()["job"]["id"]
        http.post(f"/v1/jobs/{job_id}/cancel")
        diagnosis = http.get(f"/v1/jobs/{job_id}/diagnosis").json()
        assert sum(len(group["tasks"]) for group in diagnosis["not_run"]) == 1


def test_the_bundled_example_tasks_need_no_feature_and_run_locally_without_a_warning() -> None:
    """Every trial of the examples would otherwise carry a warning about a FROM or a RUN that does
    not matter: the host's system stands in for the FROM, and a script is copied with its mode."""
    tasks = sorted((EXAMPLES / "tasks").iterdir())
    assert len(tasks) == 5
    for path in tasks:
        task = load_harbor_task(path)
        plan = read_plan(task)
        assert (task_features(task), plan.warning()) == ([], None), path.name
    [script] = read_plan(load_harbor_task(EXAMPLES / "tasks" / "fix-script")).copies
    assert script.target == "/app/count_words.sh" and script.source.stat().st_mode & 0o111 == 0o111
