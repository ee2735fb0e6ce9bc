"""Allowlists: a filtering egress proxy (Squid) that lets a trial reach the named hosts alone.

A phase whose policy is `allowlist` gives the main container only the trial's internal network
(no route out) and, on it, a Squid proxy that also sits on the trial's public network. Commands
see the proxy in `HTTP_PROXY`/`HTTPS_PROXY` (both spellings); Squid forwards plain HTTP and HTTPS
tunnels (`CONNECT`, to port 443 only) for the allowed names and refuses everything else. A host
`example.com` allows that name alone; `*.example.com` every name below it but not the name itself
(Harbor's rule). Traffic that ignores the proxy has nowhere to go, so the allowlist fails closed.

An allowed host this machine cannot reach (no route to the internet, a name that does not resolve)
would fail the task's checks as if the agent had: the proxy logs every request, and a request it
let through but could not connect (a 5xx Squid made itself, never reaching the host) is named by
`unreachable()`. It counts against the environment (the phase's verdict is not counted) only for a
host the trial depends on: an allowlist entry written out, or a host the task names in its files
(task_hosts.py); a host only the agent asked for, or one a wildcard entry let through, is the
agent's business, and the verdict stands.

A `public` phase has the same problem on a machine without the internet (a task whose solution
fetches a page scores 0 with the oracle), so it gets an observing proxy too (`PUBLIC_HOSTS`): it
forwards anything, to any port, and HTTP(S) clients that honour the proxy variables (most) go
through it and leave a record; traffic that ignores it still goes out directly, as `public` means.
A name under a reserved top-level domain (`.invalid`, `.test`, …) exists nowhere, so failing to
reach one is never this machine's shortfall.
The proxy's own traffic is a public trial's: it cannot reach the host or a private network either
(firewall.py).

The image (`envloop/egress:squid`, Debian's squid on the local Debian base) is made on first use
or by `scripts/docker-base-images`. One proxy per distinct host list, for the trial's lifetime.
"""

import asyncio
import posixpath
import re
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

from envloop.core.single_flight import SingleFlight
from envloop.environments.base import EnvironmentSetupError
from envloop.environments.docker.cli import DockerError, docker_binary, first_line
from envloop.environments.docker.containers import Container, ContainerSpec
from envloop.environments.docker.engine import engine, image_id
from envloop.environments.docker.networks import TrialNetworks
from envloop.tasks.phases import NetworkPolicy

EGRESS_IMAGE = "envloop/egress:squid"
EGRESS_PORT = 3128
ACCESS_LOG = "/var/log/squid/envloop.log"
ACCESS_LOG_BYTES = 4 << 20
"""The access log lives on a tmpfs of this size, and squid drops what no longer fits (`on-error=drop`):
an agent that sends requests without end (180,000 of 7 KB in 20 s) wrote 300 MB to the host's disk
through it, and a log past the size read back failed the trial as the infrastructure's. The daemon's
archive does not read a tmpfs: the log is read with the proxy image's own `cat` (envloop's image,
which no trial can change)."""
_LOG_DIR = posixpath.dirname(ACCESS_LOG)
_CONFIGURED = 'printf "%s" "$SQUID_CONFIG" > /etc/squid/squid.conf'
"""Where the proxy logs each request: method, URL, status, Squid's result and how it was served."""
_READY_SEC = 30.0
_BASE = "envloop/debian:bookworm"
_DOCKERFILE = f"""\
FROM {_BASE}
RUN apt-get update \\
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends squid \\
 && rm -rf /var/lib/apt/lists/*
LABEL envloop.base=egress-squid
"""


PUBLIC_HOSTS = ("*",)
"""The observing proxy of a `public` phase: every host, every port."""
_RESERVED = (".invalid", ".test", ".example", ".localhost", ".local")
"""Top-level domains no name under which can be reached anywhere (RFC 2606, 6761, 6762)."""


def squid_config(hosts: tuple[str, ...]) -> str:
    """A Squid configuration that forwards to `hosts` alone (ports 80 and 443), or to anything for
    `PUBLIC_HOSTS`, caching nothing."""
    exact = [host for host in hosts if not host.startswith("*")]
    below = [host[2:] for host in hosts if host.startswith("*.")]
    lines = [f"http_port {EGRESS_PORT}"]
    if hosts == PUBLIC_HOSTS:
        lines.append("http_access allow all")
    else:
        lines += [
            "acl to_ports port 80 443",
            "acl tls_port port 443",
            "acl CONNECT method CONNECT",
            "http_access deny !to_ports",
            "http_access deny CONNECT !tls_port",
        ]
    if exact:
        lines.append("acl allowed_names dstdomain " + " ".join(exact))
        lines.append("http_access allow allowed_names")
    if below:
        pattern = "|".join(re.escape(suffix) for suffix in below)
        lines.append(f"acl allowed_below dstdom_regex -i ^([a-z0-9-]+\\.)+({pattern})$")
        lines.append("http_access allow allowed_below")
    lines += [
        "http_access deny all",
        "cache deny all",
        "logformat envloop %rm %ru %>Hs %Ss %Sh",
        f"access_log stdio:{ACCESS_LOG} logformat=envloop on-error=drop",
        "cache_log stdio:/dev/stderr",
        "pid_filename none",
        "visible_hostname envloop-egress",
        "shutdown_lifetime 0 seconds",
    ]
    return "\n".join(lines) + "\n"


async def _build_egress_image() -> str:
    """The proxy image, built from the local Debian base (with the host's network, as every build
    that installs packages here)."""
    if await image_id(EGRESS_IMAGE) is not None:
        return EGRESS_IMAGE  # a build that ended as this one was asked for
    if await image_id(_BASE) is None:
        raise EnvironmentSetupError(
            f"a network allowlist needs its proxy image, made from {_BASE}, which is not on this machine "
            "(scripts/docker-base-images makes it)"
        )
    proc = await asyncio.create_subprocess_exec(
        docker_binary(),
        "build",
        "--network",
        "host",
        "-t",
        EGRESS_IMAGE,
        "-",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env={"DOCKER_BUILDKIT": "1", "PATH": "/usr/bin:/bin:/usr/sbin:/sbin"},
    )
    output, _ = await proc.communicate(_DOCKERFILE.encode())
    if proc.returncode != 0:
        raise EnvironmentSetupError(
            f"the allowlist proxy image could not be built: {first_line(output.decode(errors='replace'))}"
        )
    return EGRESS_IMAGE


class Unreachable(NamedTuple):
    """A destination a proxy let through but could not connect."""

    where: str
    """`host:port` (or the host of a plain HTTP request)."""
    listed: bool
    """Whether an allowlist names its host as it is (not through a wildcard)."""


class EgressProxies:
    """The allowlist proxies of one run of a trial."""

    def __init__(self, networks: TrialNetworks, trial_id: str, labels: dict[str, str]) -> None:
        self._networks = networks
        self._trial_id = trial_id
        self._labels = labels
        self._proxies: dict[tuple[str, ...], asyncio.Task[tuple[Container, str]]] = {}
        """Each proxy as it starts (or started): a trial's first is started beside its container."""
        self._read: dict[str, int] = {}
        """Lines of each proxy's access log already read."""

    def prestart(self, hosts: tuple[str, ...], internal: str) -> None:
        """Start the proxy for `hosts` now, while the trial's container starts; `proxy_for` waits
        for it (and raises what its start raised)."""
        if hosts not in self._proxies:
            self._proxies[hosts] = asyncio.ensure_future(self._start(hosts, internal))

    async def proxy_for(
        self, hosts: tuple[str, ...], internal: str, direct: tuple[str, ...] = ()
    ) -> dict[str, str]:
        """The variables that send a command's traffic through the proxy for `hosts`, except to
        the trial's own containers (`main`, and the service names in `direct`)."""
        self.prestart(hosts, internal)
        _, address = await self._proxies[hosts]
        url = f"http://{address}:{EGRESS_PORT}"
        skip = ",".join(["localhost", "127.0.0.1", "::1", "main", *direct])
        return {
            "HTTP_PROXY": url,
            "HTTPS_PROXY": url,
            "http_proxy": url,
            "https_proxy": url,
            "NO_PROXY": skip,
            "no_proxy": skip,
        }

    async def _start(self, hosts: tuple[str, ...], internal: str) -> tuple[Container, str]:
        image = await ensure_egress_image()
        alias = f"envloop-egress-{len(self._proxies) + 1}"
        config = squid_config(hosts)
        spec = ContainerSpec(
            image=image,
            trial_id=self._trial_id,
            network=internal,
            aliases=[alias],
            memory_mb=256,
            pids=256,
            labels=self._labels,
            tmpfs={_LOG_DIR: f"size={ACCESS_LOG_BYTES}"},
            command=["sh", "-c", f"chown proxy {_LOG_DIR} && {_CONFIGURED} && exec squid -N"],
            env={"SQUID_CONFIG": config},
        )
        try:
            container = await Container.start(spec)
        except DockerError as exc:
            raise EnvironmentSetupError(f"the trial's egress proxy did not start: {exc}") from None
        try:
            await self._networks.connect(container.id, await self._networks.public())
            await _wait_ready(container)
            # By address: a name could resolve to the proxy's public address, which a public
            # trial may not reach (the host guard drops private destinations on public bridges).
            address = await container.address(internal)
        except BaseException:
            await container.remove()
            raise
        return container, address

    async def unreachable(self) -> list[Unreachable]:
        """The allowed destinations the proxies could not reach since the last call."""
        found: list[Unreachable] = []
        for hosts, container in self._started():
            try:
                log = await _access_log(container)
            except DockerError:
                continue
            lines = log.decode(errors="replace").splitlines()
            fresh, self._read[container.id] = lines[self._read.get(container.id, 0) :], len(lines)
            for where in filter(None, map(_unreachable, fresh)):
                name = where.rsplit(":", 1)[0].lower().rstrip(".")
                if hosts == PUBLIC_HOSTS and name.endswith(_RESERVED):
                    continue
                listed = hosts != PUBLIC_HOSTS and name in {host.lower() for host in hosts}
                missed = Unreachable(where, listed)
                if missed not in found:
                    found.append(missed)
        return found

    async def remove(self) -> None:
        """Remove every proxy, one still starting included (its start is cancelled and cleans up)."""
        for starting in self._proxies.values():
            starting.cancel()
        await asyncio.gather(*self._proxies.values(), return_exceptions=True)
        await asyncio.gather(*(container.remove() for _, container in self._started()))
        self._proxies.clear()

    def _started(self) -> list[tuple[tuple[str, ...], Container]]:
        return [
            (hosts, starting.result()[0])
            for hosts, starting in self._proxies.items()
            if starting.done() and not starting.cancelled() and starting.exception() is None
        ]


def proxy_hosts(policy: NetworkPolicy) -> tuple[str, ...] | None:
    """The hosts a phase's proxy lets through (every one for `public`, which it only observes);
    None for a phase without a proxy."""
    if policy.mode == "allowlist":
        return policy.hosts
    return PUBLIC_HOSTS if policy.mode == "public" else None


def _unreachable(line: str) -> str | None:
    """The destination of a logged request the proxy allowed but could not connect; None otherwise.
    A 5xx with no upstream contact (`HIER_NONE`) is Squid's own failure; a refused name is 403."""
    words = line.split()
    if len(words) != 5:
        return None
    _, url, status, result, hierarchy = words
    if not status.isdigit() or not 500 <= int(status) <= 504 or hierarchy != "HIER_NONE":
        return None
    if result.startswith("TCP_DENIED"):
        return None
    return url.split("://", 1)[-1].split("/", 1)[0]


async def _access_log(container: Container) -> bytes:
    """The proxy's access log: at most its tmpfs's `ACCESS_LOG_BYTES`."""
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "access.log"
        await container.exec(["cat", ACCESS_LOG], stdout=out, timeout=_READY_SEC)
        return out.read_bytes() if out.exists() else b""


async def _wait_ready(container: Container) -> None:
    """Squid says it accepts connections in its log; a proxy that never does fails the phase."""
    deadline = time.monotonic() + _READY_SEC
    while time.monotonic() < deadline:
        response = await engine().request(
            "GET", f"/containers/{container.id}/logs", params={"stdout": "1", "stderr": "1"}
        )
        if b"Accepting HTTP Socket connections" in response.content:
            return
        state = await engine().json("GET", f"/containers/{container.id}/json")
        if not state["State"]["Running"]:
            raise EnvironmentSetupError("the allowlist proxy stopped before it accepted connections")
        await asyncio.sleep(0.1)
    raise EnvironmentSetupError(f"the allowlist proxy did not accept connections within {_READY_SEC:g} s")


_build_once = SingleFlight(_build_egress_image, "egress proxy image")


async def ensure_egress_image() -> str:
    """The proxy image, built once; the trials that find it missing together wait for one build."""
    if await image_id(EGRESS_IMAGE) is not None:
        return EGRESS_IMAGE
    return await _build_once()
