"""Each declared operation is one declaration and one service function: the declaration's request
fields are the service function's parameters, its route is in the API, and both clients' methods
take the request's parameters (positionally or by name) with the request's defaults."""

import dataclasses
import inspect
from pathlib import Path

import httpx
import pytest

from envloop.client import Client
from envloop.errors import NotFoundError, UserError
from envloop.local import LocalClient
from envloop.operations.declared import declared_operations
from envloop.operations.operation import Operation
from tests.api_server import Server

DECLARED = {operation.name: operation for operation in declared_operations()}


def test_operations_are_declared() -> None:
    assert {"plan_comparison", "create_key", "submit_job", "job_samples", "get_dataset"} <= set(DECLARED)


@pytest.mark.parametrize("name", sorted(DECLARED))
def test_the_service_function_takes_the_context_and_the_request_fields(name: str) -> None:
    operation = DECLARED[name]
    parameters = list(inspect.signature(operation.implementation()).parameters.values())
    assert parameters[0].name == "ctx"
    by_name = {p.name: p for p in parameters[1:]}
    assert set(operation.fields) <= set(by_name), f"{operation.service} lacks a field of the request"
    unfilled = [p.name for p in by_name.values() if p.name not in operation.fields and p.default is p.empty]
    assert unfilled == []


@pytest.mark.parametrize("name", sorted(DECLARED))
def test_every_client_has_the_declared_method_with_the_request_signature(name: str) -> None:
    operation = DECLARED[name]
    assert isinstance(getattr(Client, name), Operation)
    assert getattr(LocalClient, name) is getattr(Client, name)
    client = LocalClient.__new__(LocalClient)
    parameters = inspect.signature(getattr(client, name)).parameters
    assert [(p.name, p.default) for p in parameters.values()] == [
        (
            f.name,
            inspect.Parameter.empty if info.is_required() else info.get_default(call_default_factory=True),
        )
        for f in dataclasses.fields(operation.request_type)
        for info in [operation.fields[f.name]]
    ]


def test_the_app_serves_each_declared_route(server: Server) -> None:
    paths = httpx.get(f"{server.url}/openapi.json", timeout=30).json()["paths"]
    for operation in DECLARED.values():
        assert operation.method.lower() in paths[operation.path.replace(":path}", "}")], operation.name


def test_a_declared_method_takes_positional_and_named_arguments_with_the_declared_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ENVLOOP_DATABASE_URL", raising=False)
    with LocalClient(tmp_path / "home", run_trials=False) as client:
        assert inspect.signature(client.plan_comparison).parameters["power"].default == 0.8
        with pytest.raises(NotFoundError, match="job_missing"):
            client.plan_comparison("job_missing", 0.05, power=0.9)
        with pytest.raises(NotFoundError, match="job_missing"):
            client.plan_comparison(job_id="job_missing", effect=0.05)
        created = client.create_key("ci")
        assert created.name == "ci"
        assert [k.id for k in client.list_keys()] == [created.id]


@pytest.mark.parametrize("where", ["local", "http"])
def test_a_value_out_of_its_declared_bounds_is_one_user_error_line_on_either_client(
    where: str, server: Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ENVLOOP_DATABASE_URL", raising=False)
    client = server.client() if where == "http" else LocalClient(tmp_path / "home", run_trials=False)
    with client:
        with pytest.raises(UserError, match=r"^effect: Input should be greater than 0$"):
            client.plan_comparison("job_any", -0.1)
        with pytest.raises(TypeError):
            client.plan_comparison("job_any", 0.1, None, 0.8, 0.05, 0.0, "one too many")  # type: ignore[call-arg]
