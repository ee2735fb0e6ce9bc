"""The egress proxy itself: Squid, its image, its configuration, and when it is ready.

Squid forwards plain HTTP and HTTPS tunnels (`CONNECT`). For an allowlist, only to the named hosts
and only on ports 80 and 443 (`CONNECT` to 443 alone): a host `example.com` allows that name alone,
`*.example.com` every name below it but not the name itself (Harbor's rule). For a `public` phase
(`PUBLIC_HOSTS`) it forwards anything, to any port: it is there to observe. It caches nothing, and
logs every request with its client's address and its times (proxy_ledger.LOG_FORMAT).

The image (`envloop/egress:squid`, Debian's squid on the local Debian base) is made on first use
or by `scripts/docker-base-images`.
"""

import asyncio
import posixpath
import re
import time

from envloop.core.single_flight import SingleFlight
from envloop.environments.base import EnvironmentSetupError
from envloop.environments.docker.cli import docker_binary, first_line
from envloop.environments.docker.containers import Container
from envloop.environments.docker.engine import engine, image_id
from envloop.environments.docker.proxy_ledger import LOG_FORMAT

EGRESS_IMAGE = "envloop/egress:squid"
EGRESS_PORT = 3128
ACCESS_LOG = "/var/log/squid/envloop.log"
ACCESS_LOG_BYTES = 16 << 20
"""The access log lives on a tmpfs of this size, and squid drops what no longer fits (`on-error=drop`):
an agent that sends requests without end (180,000 of 7 KB in 20 s) wrote 300 MB to the host's disk
through it. A proxy whose log passed a quarter of this is replaced for the trials that come next
(shared_egress.py), so only the flooding trial's own later requests can go unrecorded. The daemon's
archive does not read a tmpfs: the log is read with the proxy image's own `cat` (envloop's image,
which no trial can change)."""
LOG_DIR = posixpath.dirname(ACCESS_LOG)
START = f'chown proxy {LOG_DIR} && printf "%s" "$SQUID_CONFIG" > /etc/squid/squid.conf && exec squid -N'
"""The proxy container's command: its tmpfs log directory made squid's, its configuration written."""
PUBLIC_HOSTS = ("*",)
"""The observing proxy of a `public` phase: every host, every port."""
_READY_SEC = 30.0
_BASE = "envloop/debian:bookworm"
_DOCKERFILE = f"""\
FROM {_BASE}
RUN apt-get update \\
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends squid \\
 && rm -rf /var/lib/apt/lists/*
LABEL envloop.base=egress-squid
"""


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
        f"logformat envloop {LOG_FORMAT}",
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
            f"a trial network needs its proxy image, made from {_BASE}, which is not on this machine "
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
            f"the egress proxy image could not be built: {first_line(output.decode(errors='replace'))}"
        )
    return EGRESS_IMAGE


_build_once = SingleFlight(_build_egress_image, "egress proxy image")


async def ensure_egress_image() -> str:
    """The proxy image, built once; the trials that find it missing together wait for one build."""
    if await image_id(EGRESS_IMAGE) is not None:
        return EGRESS_IMAGE
    return await _build_once()


async def wait_ready(container: Container) -> None:
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
            raise EnvironmentSetupError("the egress proxy stopped before it accepted connections")
        await asyncio.sleep(0.1)
    raise EnvironmentSetupError(f"the egress proxy did not accept connections within {_READY_SEC:g} s")
