"""The typed view of a Harbor task's task.toml: `TaskConfig` and the sections it is made of.

Unknown task.toml fields are kept (extra="allow"), never rejected, so a task written for a newer
Harbor still loads; what envloop does read is checked here (limits, hosts, paths, services), so a
push refuses a bad task before any trial runs it. Apart from the loaded task (model.py) because it
is the format itself: docs/hooks/task_reference.py writes the format's reference from it.
"""

import re
from pathlib import PurePosixPath
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


class _Section(BaseModel):
    # A limit of `inf` or `nan` would mean "no limit" wherever it is compared; it is refused here.
    model_config = ConfigDict(extra="allow", allow_inf_nan=False)


# Harbor's `user` fields: a user name or a numeric uid, as in a Dockerfile's USER.
TaskUser = str | int
NetworkMode = Literal["no-network", "public", "allowlist"]
VerifierMode = Literal["shared", "separate"]

_HOST_LABEL = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")
_SERVICE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
MAIN_SERVICE = "main"


def normal_host(host: str) -> str:
    """An `allowed_hosts` entry as Harbor reads it: a hostname, or `*.suffix` for every name below
    the suffix (not the suffix itself); lower-case, no trailing dot, never a URL, port or path."""
    host = host.strip().lower().rstrip(".")
    if not host or "://" in host or "/" in host or ":" in host:
        raise ValueError(f"{host!r} is not a hostname (no scheme, port or path)")
    bare = host[2:] if host.startswith("*.") else host
    if "*" in bare or not bare or not all(_HOST_LABEL.fullmatch(label) for label in bare.split(".")):
        raise ValueError(f"{host!r} is not a hostname or a leading '*.' wildcard")
    return host


class NetworkFields(_Section):
    """Harbor's `network_mode` and `allowed_hosts`, on every section that can set a network policy."""

    network_mode: NetworkMode | None = Field(default=None, description="no-network, public or allowlist")
    allowed_hosts: list[str] | None = Field(
        default=None, description="the hosts an allowlist reaches (`*.example.com` for names below it)"
    )

    @field_validator("allowed_hosts")
    @classmethod
    def _hosts(cls, hosts: list[str] | None) -> list[str] | None:
        return None if hosts is None else [normal_host(host) for host in hosts]

    @model_validator(mode="after")
    def _hosts_need_allowlist(self) -> "NetworkFields":
        if self.allowed_hosts is not None and self.network_mode != "allowlist":
            raise ValueError('allowed_hosts is only valid with network_mode = "allowlist"')
        return self


class AgentSection(NetworkFields):
    timeout_sec: float | None = Field(default=None, gt=0)
    user: TaskUser | None = Field(default=None, description="who the agent's commands run as")


class HealthcheckSection(_Section):
    """Harbor's `[environment.healthcheck]` (and `[steps.healthcheck]`), Docker's HEALTHCHECK in
    seconds: the command is probed until it passes; failures during the start period do not count,
    `retries` consecutive failures after it mean the environment never became healthy."""

    command: str = Field(min_length=1)
    interval_sec: float = Field(default=5.0, gt=0)
    timeout_sec: float = Field(default=30.0, gt=0)
    start_period_sec: float = Field(default=0.0, ge=0)
    start_interval_sec: float = Field(default=5.0, gt=0)
    retries: int = Field(default=3, ge=1)


class McpServer(_Section):
    """One `[[environment.mcp_servers]]` entry: a server offered to agents that speak MCP."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    transport: Literal["stdio", "sse", "streamable-http"] = "sse"
    url: str | None = Field(default=None, description="for sse and streamable-http")
    command: str | None = Field(default=None, description="for stdio: run inside the environment")
    args: list[str] = Field(default_factory=list)

    @field_validator("transport", mode="before")
    @classmethod
    def _http_alias(cls, value: object) -> object:
        return "streamable-http" if value == "http" else value

    @model_validator(mode="after")
    def _fields_for_transport(self) -> "McpServer":
        if self.transport != "stdio" and not self.url:
            raise ValueError(f"url is required for transport {self.transport!r}")
        if self.transport == "stdio" and not self.command:
            raise ValueError("command is required for transport 'stdio'")
        return self


def _service(value: str | None) -> str | None:
    if value is not None and not _SERVICE_NAME.fullmatch(value):
        raise ValueError(f"{value!r} is not a docker-compose service name")
    return value


class ArtifactEntry(_Section):
    """An `artifacts` entry in its table form: a path in the agent's environment (or a sidecar's) that
    is kept, and copied into a separate verifier's environment at the same path."""

    source: str = Field(min_length=1)
    destination: str | None = None
    exclude: list[str] = Field(default_factory=list)
    service: str | None = Field(default=None, description="a compose service; main by default")

    @field_validator("source")
    @classmethod
    def _without_parents(cls, value: str) -> str:
        if ".." in PurePosixPath(value).parts or "\0" in value:
            raise ValueError(f"{value!r}: an artifact path cannot contain '..'")
        return value

    @field_validator("destination")
    @classmethod
    def _relative_destination(cls, value: str | None) -> str | None:
        if not value:
            return None
        path = PurePosixPath(value)
        if path.is_absolute() or ".." in path.parts or "\\" in value:
            raise ValueError(f"{value!r}: a destination is a relative path without '..'")
        return value

    @field_validator("service")
    @classmethod
    def _service_name(cls, value: str | None) -> str | None:
        return _service(value)

    @model_validator(mode="after")
    def _sidecar_paths_are_absolute(self) -> "ArtifactEntry":
        if not self.on_main and not self.source.startswith("/"):
            raise ValueError(
                f"{self.source!r}: an artifact of service {self.service!r} needs an absolute path"
            )
        return self

    @property
    def on_main(self) -> bool:
        return self.service in (None, MAIN_SERVICE)


def _artifact_tables(entries: object) -> object:
    """`"/tmp/x"` is short for `{ source = "/tmp/x" }`."""
    if not isinstance(entries, list):
        return entries
    return [{"source": entry} if isinstance(entry, str) else entry for entry in entries]


class CollectHook(_Section):
    """A `[[verifier.collect]]` command, run after the agent and before artifacts are collected, to
    snapshot a service's state into files an artifact entry keeps."""

    command: str = Field(min_length=1)
    service: str = MAIN_SERVICE
    timeout_sec: float = Field(default=60.0, gt=0)
    user: TaskUser | None = None

    @field_validator("service")
    @classmethod
    def _service_name(cls, value: str) -> str:
        return _service(value) or MAIN_SERVICE


def _megabytes(field: str, value: object) -> int:
    text = value.strip().upper() if isinstance(value, str) else ""
    scale = {"G": 1024, "M": 1, "K": 1 / 1024}.get(text[-1:])
    try:
        megabytes = int(float(text[:-1]) * scale) if scale is not None else -1
    except ValueError:
        megabytes = -1
    if megabytes <= 0:
        raise ValueError(f"{field} must be a size such as '2G' or '512M', not {value!r}")
    return megabytes


class EnvironmentSection(NetworkFields):
    cpus: float | None = Field(default=None, gt=0)
    memory_mb: int | None = Field(default=None, gt=0)
    storage_mb: int | None = Field(default=None, gt=0)
    gpus: int | None = Field(default=None, ge=0)
    gpu_types: list[str] | None = None
    os: Literal["linux", "windows"] = "linux"
    docker_image: str | None = Field(default=None, description="a prebuilt image instead of a Dockerfile")
    build_timeout_sec: float | None = Field(default=None, gt=0)
    env: dict[str, str] = Field(default_factory=dict)
    workdir: str | None = None
    allow_internet: bool | None = Field(default=None, description="deprecated form of network_mode")
    healthcheck: HealthcheckSection | None = Field(default=None, description="probed before the agent starts")
    mcp_servers: list[McpServer] = Field(default_factory=list)
    skills_dir: str | None = None

    @field_validator("os", mode="before")
    @classmethod
    def _os_any_case(cls, value: object) -> object:
        return value.lower() if isinstance(value, str) else value

    @model_validator(mode="before")
    @classmethod
    def _legacy_sizes(cls, data: object) -> object:
        """Harbor's deprecated `memory = "2G"` and `storage = "10G"` are its `memory_mb` and
        `storage_mb`: honoured, never silently dropped (a task would run with the default limit)."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        for legacy, field in (("memory", "memory_mb"), ("storage", "storage_mb")):
            if legacy not in data:
                continue
            size = _megabytes(legacy, data.pop(legacy))
            if data.get(field, size) != size:
                raise ValueError(f"{legacy} = {size} MB and {field} = {data[field]} disagree")
            data[field] = size
        return data

    def network(self, default: NetworkMode = "no-network") -> NetworkMode:
        """The baseline policy: what the task says (`network_mode`, or the older `allow_internet`),
        else the environment's default (Harbor's, `public`, in containers; closed in the local
        sandbox)."""
        if self.network_mode is not None:
            return self.network_mode
        if self.allow_internet is not None:
            return "public" if self.allow_internet else "no-network"
        return default


class VerifierSection(NetworkFields):
    timeout_sec: float | None = Field(default=None, gt=0)
    env: dict[str, str] = Field(default_factory=dict)
    user: TaskUser | None = Field(default=None, description="who tests/test.sh runs as")
    environment_mode: VerifierMode | None = Field(
        default=None, description="shared (the agent's environment) or separate (one of its own)"
    )
    environment: EnvironmentSection | None = Field(
        default=None, description="the separate verifier's environment; implies separate"
    )
    collect: list[CollectHook] = Field(default_factory=list)

    @model_validator(mode="after")
    def _shared_has_no_environment(self) -> "VerifierSection":
        if self.environment_mode == "shared" and self.environment is not None:
            raise ValueError('environment_mode = "shared" cannot have a [verifier.environment]')
        return self

    @property
    def mode(self) -> VerifierMode | None:
        """The mode this section sets: its own, else separate when it defines an environment."""
        if self.environment_mode is not None:
            return self.environment_mode
        return "separate" if self.environment is not None else None


STEP_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"


class StepConfig(_Section):
    """One `[[steps]]` entry: its own instruction, tests and solution live in `steps/<name>/`; its
    agent and verifier settings fall back to the task's."""

    name: str = Field(pattern=STEP_NAME_PATTERN)
    min_reward: float | dict[str, float] | None = None
    agent: AgentSection = Field(default_factory=AgentSection)
    verifier: VerifierSection = Field(default_factory=VerifierSection)
    healthcheck: HealthcheckSection | None = Field(default=None, description="probed before the step's agent")
    artifacts: list[ArtifactEntry] = Field(default_factory=list)

    @field_validator("artifacts", mode="before")
    @classmethod
    def _artifact_strings(cls, value: object) -> object:
        return _artifact_tables(value)


class PackageSection(_Section):
    """Harbor's `[task]` table: the task's registry name and description (not used to run it)."""

    name: str | None = None
    description: str | None = None
    authors: list[dict[str, str]] = Field(default_factory=list)
    keywords: list[str] = Field(default_factory=list)


class SolutionSection(_Section):
    env: dict[str, str] = Field(default_factory=dict)


class TaskConfig(_Section):
    """task.toml. Absent sections take defaults; a default timeout is applied by the runner."""

    version: str | None = None
    schema_version: str | None = None
    source: str | None = None
    task: PackageSection | None = None
    metadata: dict[str, object] = Field(default_factory=dict)
    agent: AgentSection = Field(default_factory=AgentSection)
    verifier: VerifierSection = Field(default_factory=VerifierSection)
    environment: EnvironmentSection = Field(default_factory=EnvironmentSection)
    solution: SolutionSection = Field(default_factory=SolutionSection)
    steps: list[StepConfig] = Field(default_factory=list)
    multi_step_reward_strategy: Literal["mean", "final"] | None = None
    artifacts: list[ArtifactEntry] = Field(default_factory=list)

    @field_validator("artifacts", mode="before")
    @classmethod
    def _artifact_strings(cls, value: object) -> object:
        return _artifact_tables(value)
