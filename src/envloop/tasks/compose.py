"""The part of a task's `environment/docker-compose.yaml` envloop runs: sidecar services.

Harbor merges a task's compose file over its own base, whose `main` service is the agent's
container; tasks add services beside it (a database, an API, an MCP server) and may give `main`
`depends_on` and `environment`. envloop reads the file itself (YAML through PyYAML, the shape
through the models below) and runs that subset: for each sidecar `build` (a context below
environment/, its `dockerfile`, `args`) or a local `image`, `command`, `entrypoint`, `environment`,
`working_dir`, `user`, `expose` (every port of a sidecar is reachable by its name anyway),
`healthcheck` and `depends_on` with its three conditions. Anything else (`ports` published on the
host, `volumes`, `privileged`, networks of its own, …) is refused by name when the task is pushed:
run without it, a task would not be what its author wrote.

Harbor's Docker environment reads `environment/docker-compose.yaml` and no other name
(`DockerEnvironment._environment_docker_compose_path` in its `environments/docker/docker.py`): a
`docker-compose.yml`, `compose.yaml` or `compose.yml` beside the Dockerfile is a file of the build
context like any other (a task about fixing a compose file ships one), so envloop reads only that
name too.
"""

import re
from pathlib import Path, PurePosixPath
from typing import Literal, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from envloop.tasks.bounded import ParseLimitError, load_yaml, read_bounded
from envloop.tasks.model import COMPOSE_FILE
from envloop.tasks.task_toml import MAIN_SERVICE

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(us|ms|s|m|h)")
_SERVICE_NAME = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_.-]*$")


class ComposeError(ValueError):
    """The file cannot be run as written; the message names the key."""


def _seconds(value: object) -> float:
    """A compose duration (`2s`, `1m30s`, `500ms`, or a number of seconds)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    text = str(value).strip()
    parts = _DURATION.findall(text)
    if not parts or "".join(number + unit for number, unit in parts) != text:
        raise ValueError(f"{value!r} is not a duration such as 2s or 1m30s")
    scale = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
    return sum(float(number) * scale[unit] for number, unit in parts)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Build(_Strict):
    context: str = "."
    dockerfile: str = "Dockerfile"
    args: dict[str, str] = Field(default_factory=dict)

    @field_validator("args", mode="before")
    @classmethod
    def _args_list(cls, value: object) -> object:
        return _mapping(value)


class Healthcheck(_Strict):
    test: list[str] | str | None = None
    interval: float = 30.0
    timeout: float = 30.0
    retries: int = Field(default=3, ge=1)
    start_period: float = 0.0
    start_interval: float = 5.0
    disable: bool = False

    @field_validator("interval", "timeout", "start_period", "start_interval", mode="before")
    @classmethod
    def _durations(cls, value: object) -> float:
        return _seconds(value)

    def command(self) -> list[str] | None:
        """The probe as a command line, or None when it is disabled (`NONE`, `disable: true`)."""
        test = self.test
        if self.disable or test is None or test == ["NONE"]:
            return None
        if isinstance(test, str):
            return ["sh", "-c", test]
        if test[:1] == ["CMD"]:
            return test[1:]
        if test[:1] == ["CMD-SHELL"]:
            return ["sh", "-c", " ".join(test[1:])]
        return test


class Dependency(_Strict):
    condition: Literal["service_started", "service_healthy", "service_completed_successfully"] = (
        "service_started"
    )
    restart: bool = False
    required: bool = True


def _dependencies(value: object) -> object:
    """`depends_on: [db]` is `depends_on: {db: {condition: service_started}}`."""
    return {str(name): {} for name in value} if isinstance(value, list) else value


class _Links(_Strict):
    """What `main` and every sidecar may declare alike, in either of compose's spellings (a list or
    a mapping): its environment and the services it waits for."""

    depends_on: dict[str, Dependency] = Field(default_factory=dict)
    environment: dict[str, str] = Field(default_factory=dict)

    @field_validator("environment", mode="before")
    @classmethod
    def _environment_list(cls, value: object) -> object:
        return _mapping(value)

    @field_validator("depends_on", mode="before")
    @classmethod
    def _depends_list(cls, value: object) -> object:
        return _dependencies(value)


class MainOverrides(_Links):
    """What a task may say about `main`: the agent's container is envloop's own to make."""


class Service(_Links):
    build: Build | None = None
    image: str | None = None
    command: list[str] | str | None = None
    entrypoint: list[str] | str | None = None
    working_dir: str | None = None
    user: str | None = None
    expose: list[str | int] = Field(default_factory=list)
    healthcheck: Healthcheck | None = None
    container_name: str | None = None
    restart: str | None = None

    @field_validator("build", mode="before")
    @classmethod
    def _build_string(cls, value: object) -> object:
        return {"context": value} if isinstance(value, str) else value


class ComposeFile(BaseModel):
    """A task's compose file, as envloop runs it."""

    main: MainOverrides
    sidecars: dict[str, Service]
    source: str

    def startup_order(self) -> list[str]:
        """Sidecars in an order that starts each after what it depends on."""
        ordered: list[str] = []
        visiting: set[str] = set()

        def visit(name: str) -> None:
            if name in ordered:
                return
            if name in visiting:
                raise ComposeError(f"{self.source}: services.{name}.depends_on: a dependency cycle")
            visiting.add(name)
            for dependency in self.sidecars[name].depends_on:
                visit(dependency)
            visiting.discard(name)
            ordered.append(name)

        for name in sorted(self.sidecars):
            visit(name)
        return ordered


def _mapping(value: object) -> object:
    """`["KEY=value", ...]` as `{"KEY": "value"}`; values as text (`PORT: 8000`)."""
    if isinstance(value, list):
        pairs = [str(item).partition("=") for item in value]
        return {key: rest for key, _, rest in pairs}
    if isinstance(value, dict):
        return {str(key): "" if item is None else str(item) for key, item in value.items()}
    return value


def compose_file(environment_dir: Path) -> Path | None:
    path = environment_dir / COMPOSE_FILE
    return path if path.is_file() else None


def read_compose(environment_dir: Path) -> ComposeFile | None:
    """The task's compose file, checked; None when it has none. ComposeError names what cannot run."""
    path = compose_file(environment_dir)
    if path is None:
        return None
    where = f"environment/{path.name}"
    try:
        data = load_yaml(read_bounded(path, where).decode("utf-8", errors="replace"), where)
    except yaml.YAMLError as exc:
        raise ComposeError(f"{where}: not valid YAML ({str(exc).splitlines()[0]})") from None
    except ParseLimitError as exc:
        raise ComposeError(str(exc)) from None
    if not isinstance(data, dict) or not isinstance(data.get("services"), dict):
        raise ComposeError(f"{where}: expected a `services` table")
    unknown = sorted(set(data) - {"services", "version", "name"})
    if unknown:
        raise ComposeError(f"{where}: top-level `{unknown[0]}` is not supported (only services)")
    services: dict[str, object] = data["services"]
    sidecars: dict[str, Service] = {}
    for name, body in services.items():
        if not isinstance(name, str) or not _SERVICE_NAME.fullmatch(name):
            raise ComposeError(f"{where}: {name!r} is not a service name")
        if name != MAIN_SERVICE:
            sidecars[name] = _model(Service, body, f"{where}: services.{name}")
    main = _model(MainOverrides, services.get(MAIN_SERVICE) or {}, f"{where}: services.main")
    compose = ComposeFile(main=main, sidecars=sidecars, source=where)
    for name, service in sidecars.items():
        _check_service(compose, name, service, environment_dir, where)
    for dependency in main.depends_on:
        if dependency not in sidecars:
            raise ComposeError(
                f"{where}: services.main.depends_on names {dependency!r}, which is not a service"
            )
    compose.startup_order()
    return compose


_Model = TypeVar("_Model", bound=BaseModel)


def _model(model: type[_Model], body: object, where: str) -> _Model:
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        error = exc.errors()[0]
        key = ".".join(str(part) for part in error["loc"])
        if error["type"] == "extra_forbidden":
            raise ComposeError(
                f"{where}.{key}: not supported by envloop (the task would run without it)"
            ) from None
        raise ComposeError(f"{where}.{key}: {error['msg']}") from None


def _check_service(
    compose: ComposeFile, name: str, service: Service, environment_dir: Path, where: str
) -> None:
    if service.build is None and service.image is None:
        raise ComposeError(f"{where}: services.{name}: needs a build or an image")
    if service.build is not None:
        context = PurePosixPath(service.build.context)
        if context.is_absolute() or ".." in context.parts or not (environment_dir / context).is_dir():
            raise ComposeError(f"{where}: services.{name}.build.context: not a folder inside environment/")
        dockerfile = PurePosixPath(service.build.dockerfile)
        if dockerfile.is_absolute() or ".." in dockerfile.parts:
            raise ComposeError(f"{where}: services.{name}.build.dockerfile: not a file inside its context")
    for dependency in service.depends_on:
        if dependency not in compose.sidecars or dependency == name:
            raise ComposeError(
                f"{where}: services.{name}.depends_on names {dependency!r}, which is not a sidecar"
            )
