"""Trajectories leave envloop in Harbor's Agent Trajectory Interchange Format (ATIF) through both
surfaces: `el trial get TRIAL --steps --format atif` and `GET /v1/trials/{id}/steps?format=atif`.
A secret the model echoed stays masked in the export, as in the kept trajectory it comes from."""

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from envloop.services import datasets, job_submission, profiles, trials
from envloop.services.context import open_context
from envloop.testing import Received, Reply, ScriptedServer
from envloop.wire.jobs import JobRequest
from tests.api_server import Server, serve_in_process
from tests.conftest import El, run_trials, write_profile

KEY = "sk-live-atif-5b7e/Secret_Key"


def leaky(received: Received) -> Reply:
    return Reply(text=f"Your key is {KEY}.", reasoning=f"The header said Bearer {KEY}")


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[El, str]]:
    """One finished chat trial whose model answered with the profile's secret key, on a store of the
    module's own, and `el` on it. The trial is set up through the services and run on a worker in
    this process: the tests export it, they do not test how it was made."""
    root = tmp_path_factory.mktemp("atif")
    dataset = root / "probe.jsonl"
    dataset.write_text(
        json.dumps({"id": "echo", "prompt": "Repeat your credentials.", "answer": "no"}) + "\n"
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("ENVLOOP_DATABASE_URL", raising=False)
        patch.delenv("ENVLOOP_ARTIFACTS", raising=False)
        el = El(home=root / "home", cwd=root)
        patch.setenv("ENVLOOP_HOME", str(el.home))  # the home the services default to, as in `el`
        ctx = open_context(el.home)
        try:
            ref = datasets.push_dataset(ctx, dataset, "probe", scorer="includes").ref
            with ScriptedServer(default=leaky, api_key=KEY) as endpoint:
                params = {
                    "MODEL_PROTOCOL": "openai",
                    "MODEL_BASE_URL": endpoint.openai_url,
                    "MODEL_NAME": "leaky/sft",
                    "MODEL_API_KEY": KEY,
                }
                document = profiles.read_profile_file(
                    write_profile(root / "leaky.json", params, secret=["MODEL_API_KEY"])
                )
                profiles.create_profile(ctx, "team/leaky", "1", document)
                job = job_submission.submit_job(ctx, JobRequest(dataset=ref, profiles=["team/leaky@1"])).job
                run_trials(ctx, 1)
            [trial] = trials.list_trials(ctx, job.id)
            assert trial.status == "completed"
            yield el, trial.id
        finally:
            ctx.close()


@pytest.fixture
def trial_id(finished: tuple[El, str]) -> str:
    return finished[1]


@pytest.fixture
def el(finished: tuple[El, str]) -> El:
    """`el` on the module's store (the trial's)."""
    return finished[0]


@pytest.fixture
def api(finished: tuple[El, str], tmp_path: Path) -> Iterator[Server]:
    """The API on the trial's store: the tests read what it answers, not how it is served."""
    running = serve_in_process(finished[0], tmp_path / "serve.log")
    yield running
    running.stop()


def assert_masked_atif(document: dict[str, object], trial_id: str) -> None:
    assert document["schema_version"] == "ATIF-v1.7" and document["session_id"] == trial_id
    steps = document["steps"]
    assert isinstance(steps, list)
    assert [s["source"] for s in steps] == ["user", "agent", "system"]
    assert [s["step_id"] for s in steps] == [1, 2, 3]
    agent = steps[1]
    assert (
        agent["message"] == "Your key is ***." and agent["reasoning_content"] == "The header said Bearer ***"
    )
    assert agent["model_name"] == "leaky/sft"
    assert steps[2]["extra"]["scorer"] == "includes"
    assert KEY not in json.dumps(document)


def test_el_trial_get_exports_the_trajectory_as_atif_with_the_secret_masked(el: El, trial_id: str) -> None:
    shown = el.ok("trial", "get", trial_id, "--steps", "--format", "atif")
    assert KEY not in shown.stdout + shown.stderr
    assert_masked_atif(json.loads(shown.stdout), trial_id)

    with_record = el.ok("trial", "get", trial_id, "--steps", "--format", "atif", "--json").json()
    assert with_record["id"] == trial_id and with_record["status"] == "completed"
    assert_masked_atif(with_record["trajectory"], trial_id)

    native = el.ok("trial", "get", trial_id, "--steps", "--json").json()["trajectory"]
    assert native["schema_version"] == "envloop.trajectory/v1"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--steps", "--format", "xml"], "el: error: unknown --format 'xml': envloop or atif"),
        (["--format", "atif"], "el: error: --format atif exports the trajectory: add --steps"),
    ],
)
def test_a_bad_export_format_is_refused_with_one_line(el: El, args: list[str], message: str) -> None:
    refused = el("trial", "get", "trl_unknown", *args)
    assert refused.code == 2 and refused.stdout == ""
    assert refused.stderr.strip().splitlines() == [message]


def test_the_api_exports_the_same_atif_document_and_refuses_other_formats(
    el: El, trial_id: str, api: Server
) -> None:
    with api.http() as http:
        exported = http.get(f"/v1/trials/{trial_id}/steps", params={"format": "atif"})
        native = http.get(f"/v1/trials/{trial_id}/steps")
        unknown_format = http.get(f"/v1/trials/{trial_id}/steps", params={"format": "xml"})
    assert exported.status_code == 200 and KEY not in exported.text
    assert_masked_atif(exported.json(), trial_id)
    cli = json.loads(el.ok("trial", "get", trial_id, "--steps", "--format", "atif").stdout)
    assert exported.json() == cli
    assert native.status_code == 200 and native.json()["schema_version"] == "envloop.trajectory/v1"
    assert unknown_format.status_code in (400, 422)
    with api.http(key="") as anonymous:
        assert anonymous.get(f"/v1/trials/{trial_id}/steps", params={"format": "atif"}).status_code == 401
    with api.http() as http:
        assert http.get("/v1/trials/trl_unknown/steps", params={"format": "atif"}).status_code == 404
