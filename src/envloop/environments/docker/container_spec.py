"""What a trial's container is started with: `ContainerSpec`, as a caller asks for it, and the Engine
API's create request made from it (`create_body`). Apart from containers.py, which runs a started
container, so every rule a container starts under reads in one place.

Its network is `none` unless the caller names a network of its own; `host` (which would let the
trial reach every service listening on the host) is refused. Limits are the daemon's cgroups: cpus,
memory (no swap beyond it), pids, plus a largest-file rlimit; `cgroup_parent` puts several
containers (a trial and its sidecars) under one cgroup whose limits they share.

The daemon's log of a container (what its first process writes, which any process inside can reach
through `/proc/1/fd/1`) is envloop's only unbounded channel left: every container gets a `json-file`
log of at most `LOG_MAX_SIZE`, whatever the daemon's default driver, so `cat /dev/zero >
/proc/1/fd/1` cannot fill the host's disk. envloop captures commands' output itself and never keeps
the daemon's log (the allowlist proxy reads its own to see it is ready).
"""

import re
from collections.abc import Iterable

from pydantic import BaseModel, Field, IPvAnyAddress, field_validator

from envloop.environments.docker.leftovers import KEEP_UP
from envloop.environments.variables import VARIABLE_NAME

_NETWORK_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
LOG_MAX_SIZE = "1m"
"""The most the daemon keeps of a container's own log (one file, rotated over itself)."""
_LOG_CONFIG = {"Type": "json-file", "Config": {"max-size": LOG_MAX_SIZE, "max-file": "1"}}


def check_variable_names(names: Iterable[str]) -> None:
    """ValueError for the first name that is not a valid environment variable name: the same rule
    for a container's own variables and for those of each command run in it."""
    for name in names:
        if not VARIABLE_NAME.fullmatch(name):
            raise ValueError(f"{name!r} is not a valid environment variable name")


class ContainerSpec(BaseModel):
    """How to start a trial's container."""

    image: str
    trial_id: str
    name: str | None = Field(default=None, description="the container's name; made from the trial's")
    network: str = "none"
    aliases: list[str] = Field(default_factory=list, description="names others on `network` reach it by")
    dns: list[IPvAnyAddress] = Field(
        default_factory=list, description="where the daemon's resolver forwards the names it does not know"
    )
    cpus: float | None = Field(default=None, gt=0)
    memory_mb: int | None = Field(default=None, gt=0)
    pids: int | None = Field(default=None, gt=0)
    file_size_mb: int | None = Field(default=None, gt=0)
    cgroup_parent: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    workdir: str | None = None
    user: str | None = None
    """Default user of every exec (the image's USER when None)."""
    command: list[str] | None = Field(
        default=None,
        description="the container's own command: None keeps it up (`sh -c 'sleep infinity'` after the "
        "image's ENTRYPOINT, as Harbor does), [] the image's",
    )
    entrypoint: list[str] | None = None
    healthcheck: dict[str, object] | None = Field(default=None, description="the daemon's Healthcheck")
    labels: dict[str, str] = Field(default_factory=dict)
    tmpfs: dict[str, str] = Field(
        default_factory=dict, description="tmpfs mounts (path: options such as `size=4m`), kept off the disk"
    )

    @field_validator("network")
    @classmethod
    def _own_network_namespace(cls, value: str) -> str:
        """`host` and `container:<id>` would share another namespace's network, and with it every
        service listening there (the host's own included): a trial never gets either."""
        if value == "host" or value.startswith("container:") or not _NETWORK_NAME.fullmatch(value):
            raise ValueError(f"network {value!r}: a trial gets `none` or a named network of its own")
        return value

    @field_validator("env")
    @classmethod
    def _variable_names(cls, value: dict[str, str]) -> dict[str, str]:
        check_variable_names(value)
        return value


def create_body(spec: ContainerSpec, labels: dict[str, str]) -> dict[str, object]:
    """The Engine API's `POST /containers/create` body for `spec`, carrying `labels`."""
    ulimits: list[dict[str, object]] = [{"Name": "core", "Soft": 0, "Hard": 0}]
    if spec.file_size_mb is not None:
        size = spec.file_size_mb * 1024 * 1024
        ulimits.append({"Name": "fsize", "Soft": size, "Hard": size})
    host: dict[str, object] = {
        "Init": True,
        "NetworkMode": spec.network,
        "Ulimits": ulimits,
        "LogConfig": _LOG_CONFIG,
    }
    if spec.cpus is not None:
        host["NanoCpus"] = int(spec.cpus * 1e9)
    if spec.memory_mb is not None:
        host["Memory"] = host["MemorySwap"] = spec.memory_mb * 1024 * 1024
    if spec.pids is not None:
        host["PidsLimit"] = spec.pids
    if spec.cgroup_parent is not None:
        host["CgroupParent"] = spec.cgroup_parent
    if spec.tmpfs:
        host["Tmpfs"] = spec.tmpfs
    if spec.dns:
        host["Dns"] = [str(address) for address in spec.dns]
    body: dict[str, object] = {
        "Image": spec.image,
        # Never a service's name: the daemon's resolver answers a container's hostname on every
        # network it joins, so `api` would resolve to its public address, which the trial's other
        # containers cannot reach (only its aliases on the internal network are theirs).
        "Hostname": "envloop",
        "Labels": labels,
        "Env": [f"{name}={value}" for name, value in spec.env.items()],
        "HostConfig": host,
    }
    if spec.command is None:
        # As Harbor starts a task's container: the image's ENTRYPOINT stays (it may start the
        # task's services, then exec its arguments), and the command keeps the container up.
        body["Cmd"] = KEEP_UP
    elif spec.command:
        body["Cmd"] = spec.command
    if spec.entrypoint is not None:
        body["Entrypoint"] = spec.entrypoint
    if spec.healthcheck is not None:
        body["Healthcheck"] = spec.healthcheck
    if spec.command is not None and spec.user:
        body["User"] = spec.user
    if spec.workdir:
        body["WorkingDir"] = spec.workdir
    if spec.network != "none" and spec.aliases:
        body["NetworkingConfig"] = {"EndpointsConfig": {spec.network: {"Aliases": spec.aliases}}}
    return body
