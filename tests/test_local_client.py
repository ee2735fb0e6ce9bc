"""`envloop.LocalClient` and `envloop.Client` are one API: the same operations with the same
signatures, the same answers and the same exceptions, in process or over HTTP."""

import inspect
import json
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import envloop
from envloop.client import Client
from envloop.errors import NotFoundError, UserError
from envloop.local import LocalClient
from envloop.operations import Operations
from envloop.services.profiles import read_profile_file
from envloop.wire import JobEvent, JobRequest, TrialEvent
from tests.api_server import Server
from tests.conftest import make_task, stop_background_worker, write_profile


def public_methods(cls: type) -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(member)
        for name, member in inspect.getmembers(cls, inspect.isfunction)
        if not name.startswith("_") or name in ("__enter__", "__exit__")
    }


def hints(cls: type, name: str) -> dict[str, Any]:
    """The method's types, resolved: the clients name wire models and the trajectory for the type
    checker only (importing them would slow every command), so they are given here."""
    import envloop.wire  # noqa: PLC0415 - every wire model, for resolving the names
    from envloop.core.trajectory import Trajectory  # noqa: PLC0415

    names = {**vars(envloop.wire), "Trajectory": Trajectory}
    hinted = typing.get_type_hints(getattr(cls, name), localns=names)
    if name == "__enter__":
        hinted.pop("return")  # each returns its own class (Self in the Protocol)
    return hinted


def test_both_clients_have_exactly_the_operations_of_the_protocol() -> None:
    operations = set(public_methods(Operations))
    assert set(public_methods(Client)) == operations
    assert set(public_methods(LocalClient)) - {"on_context"} == operations


@pytest.mark.parametrize("name", sorted(public_methods(Operations)))
def test_each_operation_has_the_same_parameters_defaults_and_types_in_both_clients(name: str) -> None:
    protocol = public_methods(Operations)[name]
    for cls in (Client, LocalClient):
        signature = public_methods(cls)[name]
        assert [(p.name, p.kind, p.default) for p in signature.parameters.values()] == [
            (p.name, p.kind, p.default) for p in protocol.parameters.values()
        ], f"{cls.__name__}.{name}"
        assert hints(cls, name) == hints(Operations, name), f"{cls.__name__}.{name}"


def test_both_clients_are_exported_from_the_package() -> None:
    assert envloop.Client is Client
    assert envloop.LocalClient is LocalClient


SOLVES = 'echo "partial" > "${ENVLOOP_LOGS_DIR:-/logs}/agent/note.txt"; touch done'


def scenario(client: Operations, tmp_path: Path) -> dict[str, Any]:
    """Push a dataset, run two jobs (the second with one task failing), and read everything back,
    without the identifiers and times that differ from one store to another."""
    src = tmp_path / "tasks"
    make_task(src, "t0", solve=SOLVES)
    make_task(src, "t1", solve="exit 3")
    dataset = client.push_dataset(src, "bench")
    oracle = read_profile_file(write_profile(tmp_path / "oracle.json", {"AGENT_NAME": "oracle"}))
    profile = client.create_profile("team/oracle", "1", oracle).ref
    job_ids = []
    for tag in ("a", "b"):
        request = JobRequest(dataset=dataset.ref, profiles=[profile], attempts=2, tags={"run": tag})
        job_id = client.submit_job(request).job.id
        events = list(client.watch_job(job_id))
        assert isinstance(events[-1], JobEvent) and events[-1].job.status in ("completed", "failed")
        assert {
            (e.task, e.attempt) for e in events if isinstance(e, TrialEvent) and e.status != "running"
        } == {
            ("t0", 1),
            ("t0", 2),
            ("t1", 1),
            ("t1", 2),
        }
        job_ids.append(job_id)
    job = client.get_job(job_ids[0])
    trials = client.list_trials(job_ids[0])
    steps = [client.trial_steps(t.id) for t in trials]
    comparison = client.compare_runs(job_ids[0], job_ids[1])
    return {
        "dataset": dataset.model_dump(exclude={"created_at"}),
        "job": job.model_dump(exclude={"id", "created_at", "finished_at"}),
        "listed": [
            j.model_dump(include={"status", "counts", "tags"}) for j in client.list_jobs(tags={"run": "b"})
        ],
        "result": client.job_result(job_ids[0]).model_dump(exclude={"id"}),
        "trials": [
            t.model_dump(include={"task", "attempt", "status", "reward", "error_type"}) for t in trials
        ],
        "steps": [[s.kind for s in t.steps] if t else None for t in steps],
        "logs": client.trial_logs(trials[0].id, "verifier"),
        "artifacts": [a.path for a in client.list_artifacts(trials[0].id)],  # sizes vary with ids
        # Each attempt's trial id and duration, and the usage they add up to, are this run's own.
        "comparison": comparison.model_dump(
            exclude={"a": {"job_id"}, "b": {"job_id"}, "attempts": True, "usage": True}
        ),
        "compared_attempts": [
            [[(o.state, o.reward, o.reason) for o in side] for side in (task.a, task.b)]
            for task in comparison.attempts
        ],
        "job_ids": job_ids,
    }


@pytest.fixture
def local_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A second installation with its own SQLite store, and its background worker stopped at the end."""
    monkeypatch.delenv("ENVLOOP_DATABASE_URL", raising=False)
    path = tmp_path / "local-home"
    yield path
    stop_background_worker(path)


def test_the_same_scenario_gives_the_same_answers_over_http_and_in_process(
    busy_server: Server, local_home: Path, tmp_path: Path
) -> None:
    over_http = scenario(busy_server.client(), tmp_path / "http")
    with LocalClient(home=local_home) as local:
        in_process = scenario(local, tmp_path / "local")
    http_ids, local_ids = over_http.pop("job_ids"), in_process.pop("job_ids")
    assert in_process == over_http
    assert over_http["result"]["profiles"]["team/oracle@1"]["score"] == 0.5
    assert over_http["steps"][0] == ["user", "tool", "verifier"]

    # And on one store, both clients read the very same objects.
    with LocalClient(home=busy_server.el.home, run_trials=False) as same_store:
        http = busy_server.client()
        for job_id in http_ids:
            assert same_store.get_job(job_id) == http.get_job(job_id)
            assert same_store.job_result(job_id) == http.job_result(job_id)
            assert same_store.list_trials(job_id) == http.list_trials(job_id)
            first = http.list_trials(job_id)[0].id
            assert same_store.get_trial(first) == http.get_trial(first)
            assert same_store.trial_steps(first) == http.trial_steps(first)
            atif = b"".join(http.trajectory_json(first, format="atif"))
            assert b"".join(same_store.trajectory_json(first, "atif")) == atif
            assert json.loads(atif)["session_id"] == first
            assert same_store.job_diagnosis(job_id) == http.job_diagnosis(job_id)
        assert same_store.compare_runs(*http_ids) == http.compare_runs(*http_ids)
        assert same_store.list_datasets() == http.list_datasets()
        assert same_store.list_runners() == http.list_runners()
    assert local_ids != http_ids


def test_errors_are_the_same_exception_classes_in_process(busy_server: Server, local_home: Path) -> None:
    http = busy_server.client()
    with LocalClient(home=local_home) as local:
        for client in (http, local):
            with pytest.raises(NotFoundError, match="unknown job 'job_nope'"):
                client.get_job("job_nope")
            with pytest.raises(UserError, match="status"):
                client.list_jobs(status="finished")
            with pytest.raises(NotFoundError):
                client.get_dataset("nope@1")
