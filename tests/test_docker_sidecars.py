"""Compose sidecars in the docker environment: built, reached by name, waited for, sharing the
trial's limits, and gone on every way out (the trial ends, is cancelled, or its worker is killed).

The task is Harbor's `sidecar-artifacts` pattern on a base image this machine has: an order API as
a sidecar, a collect hook that snapshots its in-memory counter, artifacts taken from the sidecar
and a separate verifier that scores from that evidence alone.
"""

import asyncio
import json
import secrets
import subprocess
import sys
import time
from pathlib import Path

import pytest

from envloop.core.ids import new_id
from envloop.core.trial import TrialOutcome, TrialSpec
from envloop.environments.docker.cli import docker_binary
from envloop.environments.docker.images import BuildRecords
from envloop.environments.docker.orphans import trial_containers
from envloop.environments.docker.provider import DockerEnvironmentProvider
from envloop.environments.docker.registration import sweep_leftovers
from envloop.runners import ShellRunner
from envloop.tasks.harbor import load_harbor_task
from tests.conftest import SHARED
from tests.docker_daemon import command_running, docker_daemon

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.usefixtures("docker_daemon")]
__all__ = ["docker_daemon"]

SERVER = (
    SHARED / "harbor-examples" / "tasks" / "sidecar-artifacts" / "environment" / "api-server" / "server.py"
)
COMPOSE = """\
services:
  main:
    depends_on:
      api:
        condition: service_healthy
    environment:
      API_URL: http://api:8000
  api:
    build:
      context: ./api
    expose: ["8000"]
    healthcheck:
      test: ["CMD", "python3", "-c", "import urllib.request; urllib.request.urlopen('http://localhost:8000/stats')"]
      interval: 1s
      timeout: 5s
      retries: 20
      start_period: 1s
"""
SOLVE = """\
#!/bin/bash
set -euo pipefail
for item in apple banana cherry; do
  python3 -c "import json, os, urllib.request; urllib.request.urlopen(urllib.request.Request(
    os.environ['API_URL'] + '/orders', data=json.dumps({'item': '$item'}).encode(), method='POST'))"
done
"""
TEST = """\
#!/bin/bash
python3 - <<'PY'
import json, pathlib
log, snapshot = pathlib.Path("/var/log/api/orders.log"), pathlib.Path("/tmp/stats.json")
orders = log.read_text().splitlines() if log.exists() else []
stats = json.loads(snapshot.read_text()) if snapshot.exists() else {}
good = len(orders) == 3 and stats.get("orders_received") == 3
pathlib.Path("/logs/verifier/reward.txt").write_text("1" if good else "0")
PY
"""
TOML = """\
artifacts = [
    { source = "/var/log/api/orders.log", service = "api" },
    { source = "/tmp/stats.json", service = "api" },
]
[verifier]
environment_mode = "separate"
[[verifier.collect]]
service = "api"
command = "python3 /snapshot.py > /tmp/stats.json"
"""
SNAPSHOT = "import urllib.request as u; print(u.urlopen('http://localhost:8000/stats').read().decode())\n"


def write_task(root: Path, *, toml: str = TOML, solve: str = SOLVE) -> Path:
    for sub in ("tests", "solution", "environment/api"):
        (root / sub).mkdir(parents=True)
    token = secrets.token_hex(8)
    (root / "task.toml").write_text('version = "1.0"\n' + toml)
    (root / "instruction.md").write_text("Order three fruits from the API.\n")
    (root / "environment" / "Dockerfile").write_text(
        f"FROM python:3.11-slim\nWORKDIR /app\nLABEL token={token}\n"
    )
    (root / "environment" / "api" / "Dockerfile").write_text(
        "FROM python:3.11-slim\nCOPY server.py snapshot.py /\nRUN mkdir -p /var/log/api\n"
        f'CMD ["python3", "/server.py"]\nLABEL token={token}\n'
    )
    (root / "environment" / "api" / "server.py").write_text(SERVER.read_text())
    (root / "environment" / "api" / "snapshot.py").write_text(SNAPSHOT)
    (root / "environment" / "docker-compose.yaml").write_text(COMPOSE)
    (root / "tests" / "Dockerfile").write_text("FROM python:3.11-slim\nCOPY test.sh /tests/test.sh\n")
    (root / "tests" / "test.sh").write_text(TEST)
    (root / "solution" / "solve.sh").write_text(solve)
    return root


def spec_for(tmp_path: Path, task: Path, params: dict[str, str]) -> TrialSpec:
    return TrialSpec(
        job_id="job_sidecars",
        trial_id=new_id("trl"),
        task_name=task.name,
        attempt=1,
        profile_ref="team/p@1",
        runner="envloop/shell@1",
        params=params,
        task_dir=task,
        instance_root=tmp_path / "instances",
        artifacts_dir=tmp_path / "artifacts",
    )


def run(tmp_path: Path, spec: TrialSpec) -> TrialOutcome:
    provider = DockerEnvironmentProvider(BuildRecords(tmp_path / "builds"))
    return asyncio.run(ShellRunner(provider).run(spec))


def test_a_sidecar_is_reached_by_name_and_its_evidence_scores_in_a_separate_verifier(tmp_path: Path) -> None:
    task = write_task(tmp_path / "task")
    oracle = spec_for(tmp_path / "o", task, {"AGENT_NAME": "oracle"})
    outcome = run(tmp_path / "o", oracle)
    assert outcome.error is None, outcome.error
    assert outcome.reward == 1.0
    kept = tmp_path / "o" / "artifacts" / "artifacts"
    assert len((kept / "var" / "log" / "api" / "orders.log").read_text().splitlines()) == 3
    assert json.loads((kept / "tmp" / "stats.json").read_text())["orders_received"] == 3
    assert asyncio.run(trial_containers(oracle.trial_id)) == []
    # Nor is its cgroup left in any hierarchy (the daemon made it in those envloop writes no limit to).
    assert _trial_cgroups(oracle.trial_id) == []
    nop = spec_for(tmp_path / "n", task, {"AGENT_NAME": "nop"})
    assert run(tmp_path / "n", nop).reward == 0.0


def test_sidecars_share_the_trials_memory_limit(tmp_path: Path) -> None:
    """A sidecar cannot take memory beyond what the task gave the whole trial."""
    task = write_task(tmp_path / "task", toml="[environment]\nmemory_mb = 256\n")
    spec = spec_for(tmp_path, task, {"AGENT_NAME": "nop"})
    provider = DockerEnvironmentProvider(BuildRecords(tmp_path / "builds"))
    grab = "x = bytearray(600 * 1024 * 1024); x[::4096] = b'1' * len(x[::4096]); print('ALLOCATED')"

    async def probe() -> str:
        async with provider.instance(load_harbor_task(task), spec) as environment:
            api = environment.service("api")  # type: ignore[attr-defined]
            result = await api.exec(["python3", "-c", grab])
            return str(result.stdout)

    assert "ALLOCATED" not in asyncio.run(probe())


def test_cancelling_a_trial_removes_its_sidecars_and_networks(tmp_path: Path) -> None:
    task = write_task(tmp_path / "task", solve="#!/bin/bash\nsleep 600\n")
    spec = spec_for(tmp_path, task, {"AGENT_NAME": "oracle"})

    async def cancel_mid_agent() -> None:
        running = asyncio.ensure_future(run_async(tmp_path, spec))
        await command_running(spec.trial_id, "sleep 600")
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running

    asyncio.run(cancel_mid_agent())
    assert asyncio.run(trial_containers(spec.trial_id)) == []
    assert _trial_networks(spec.trial_id) == []


async def run_async(tmp_path: Path, spec: TrialSpec) -> TrialOutcome:
    provider = DockerEnvironmentProvider(BuildRecords(tmp_path / "builds"))
    return await ShellRunner(provider).run(spec)


def _trial_networks(trial_id: str) -> list[str]:
    listed = subprocess.run(
        [
            docker_binary(),
            "network",
            "ls",
            "--filter",
            f"label=envloop.trial={trial_id}",
            "--format",
            "{{.Name}}",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return listed.stdout.split()


WORKER = """
import asyncio, sys
sys.path[:0] = {paths!r}
from tests.test_docker_sidecars import run_async, spec_for, write_task
from pathlib import Path
tmp = Path({tmp!r})
spec = spec_for(tmp, Path({task!r}), {{"AGENT_NAME": "oracle"}}).model_copy(update={{"trial_id": {trial!r}}})
asyncio.run(run_async(tmp, spec))
"""


def test_a_killed_workers_sidecars_are_swept_by_the_next(tmp_path: Path) -> None:
    task = write_task(tmp_path / "task", solve="#!/bin/bash\nsleep 600\n")
    trial = new_id("trl")
    script = WORKER.format(paths=sys.path, tmp=str(tmp_path), task=str(task), trial=trial)
    worker = subprocess.Popen([sys.executable, "-c", script])
    try:
        deadline = time.monotonic() + 300
        while len(asyncio.run(trial_containers(trial))) < 2:
            assert worker.poll() is None, "the worker ended before its trial started"
            assert time.monotonic() < deadline
            time.sleep(0.2)
    finally:
        worker.kill()
        worker.wait()
    assert len(asyncio.run(trial_containers(trial))) >= 2
    assert _trial_cgroups(trial)
    asyncio.run(sweep_leftovers())
    assert asyncio.run(trial_containers(trial)) == []
    assert _trial_networks(trial) == []
    assert _trial_cgroups(trial) == []


def _trial_cgroups(trial_id: str) -> list[Path]:
    """The trial's run cgroups, in every hierarchy (below the directory of the worker that ran it)."""
    found = Path("/sys/fs/cgroup").glob("*/envloop-trials/**/*")
    return [path for path in found if trial_id in path.name and path.is_dir()]
