"""Every environment provider sweeps its own leftovers when a worker starts, built-in or plugin
alike: the worker asks the catalog (environments/leftovers.py) and names no provider. A plugin's
sweep that fails is logged and the worker starts regardless."""

import os
import subprocess
import sys
from pathlib import Path

from envloop.environments.catalog import ENVIRONMENT_PROVIDERS
from tests.conftest import REPO, El


def sweeping_site(root: Path) -> Path:
    """An installed distribution with two environment providers: `tidy` removes the directory
    ACME_LEFTOVER names (what a dead worker's instance left), `messy` fails its sweep."""
    site = root / "sweep-site"
    dist = site / "acme_sweep-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-sweep\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[envloop.environments]\nmessy = acme_sweep:Messy\ntidy = acme_sweep:Tidy\n"
    )
    (site / "acme_sweep.py").write_text(
        "import os\n"
        "import shutil\n\n"
        "from envloop.environments.local import LocalEnvironmentProvider\n\n\n"
        "class Tidy(LocalEnvironmentProvider):\n"
        "    async def sweep_leftovers(self) -> list[str]:\n"
        '        shutil.rmtree(os.environ["ACME_LEFTOVER"])\n'
        '        return ["acme-leftover"]\n\n\n'
        "class Messy(LocalEnvironmentProvider):\n"
        "    async def sweep_leftovers(self) -> list[str]:\n"
        '        raise RuntimeError("the sweep broke")\n'
    )
    return site


def test_a_starting_worker_sweeps_each_providers_leftovers_and_a_failing_sweep_stops_nothing(
    el: El, tmp_path: Path
) -> None:
    leftover = tmp_path / "left-by-a-dead-worker"
    (leftover / "inside").mkdir(parents=True)
    path = os.pathsep.join([str(sweeping_site(tmp_path)), str(REPO / "src")])
    started = el("worker", "--idle-exit", "0.2", env={"PYTHONPATH": path, "ACME_LEFTOVER": str(leftover)})
    assert started.code == 0, started.stderr
    assert not leftover.exists()
    assert "environment messy: its leftovers could not be swept: the sweep broke" in started.stderr


def test_the_built_in_providers_are_catalog_entries_and_each_has_a_sweep() -> None:
    entries = {found.name: (found.origin.source, found.component) for found in ENVIRONMENT_PROVIDERS.all()}
    (local_source, local), (docker_source, docker) = entries["local"], entries["docker"]
    assert (local_source, docker_source) == ("built-in", "built-in")
    assert local.sweep_leftovers is not None and local.ready is None
    assert docker.sweep_leftovers is not None and docker.ready is not None


_DOCKER_SWEEP = """
import asyncio, sys
from envloop.environments.docker.registration import sweep_leftovers
print(asyncio.run(sweep_leftovers()), "httpx" in sys.modules)
"""


def test_without_a_docker_socket_the_docker_sweep_finds_nothing_and_loads_no_client(tmp_path: Path) -> None:
    # Every worker process starts with this sweep; a machine without Docker must not pay for
    # loading the Engine API client to learn that nothing answers.
    env = {**os.environ, "DOCKER_HOST": f"unix://{tmp_path / 'no-daemon.sock'}"}
    swept = subprocess.run(
        [sys.executable, "-c", _DOCKER_SWEEP], check=False, env=env, capture_output=True, text=True
    )
    assert swept.returncode == 0, swept.stderr
    assert swept.stdout.split() == ["[]", "False"]


_DOCKER_CLOSE = """
import asyncio, sys
from envloop.environments.docker.registration import close_shared
loaded = [name for name in sys.modules if name.startswith("envloop.environments.docker.") and not
          name.endswith((".registration", ".docker"))]
print(asyncio.run(close_shared()), "httpx" in sys.modules, *loaded)
"""


def test_a_worker_whose_trials_shared_nothing_closes_it_without_loading_the_container_machinery() -> None:
    # Every worker process closes what its trials shared as it stops; a local worker's shared
    # nothing, and loading the Docker modules to be told so cost each of them 0.14 s of CPU.
    closed = subprocess.run(
        [sys.executable, "-c", _DOCKER_CLOSE], check=False, capture_output=True, text=True
    )
    assert closed.returncode == 0, closed.stderr
    assert closed.stdout.split() == ["[]", "False"]
