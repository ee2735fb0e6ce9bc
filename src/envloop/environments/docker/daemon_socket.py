"""Where the Docker daemon listens: its Unix socket, from DOCKER_HOST or the default path.

Kept apart from the Engine API client so that asking whether a daemon could be there at all loads
no HTTP client (`registration.sweep_leftovers`, at every worker's start)."""

import os

DEFAULT_SOCKET = "/var/run/docker.sock"


def socket_path() -> str:
    host = os.environ.get("DOCKER_HOST", "")
    if host.startswith("unix://"):
        return host.removeprefix("unix://")
    return DEFAULT_SOCKET
