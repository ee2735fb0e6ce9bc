"""Every daemon call (and firewall command) of a docker trial, timed: where a trial's time goes.

Runs trials of one task (debian:12, the oracle, `touch /app/done` and a verifier that reads it) in
this process, as a worker runs them, with the task's network mode: `public` (the task names no
network, Harbor's default), `allowlist` or `none`. The first trial builds the image and makes what
the worker's trials share (bridges, the proxy); it is not counted. Each counted trial's Engine API
calls are grouped by method and endpoint (`POST /containers/*/exec`), its `iptables` and
`ebtables` commands by their first words, with count and milliseconds, beside the trial's wall;
then the same per trial over all of them. The floor's calls are what `bench/docker_trials.py` runs
with the docker CLI: `network create`, `run`, `exec` x3, `rm`, `network rm`.

    .venv/bin/python bench/docker_calls.py [--network public|allowlist|none] [--sidecar] [--trials 5]

`--sidecar` gives the task one compose service (`debian:12` sleeping); `--gateway` runs the
`command` agent (doing what the oracle does) with a model endpoint, so the agent phase opens the
worker's model gateway to the container (no model is called). Either way the trial still makes a
network of its own, which the shared bridges do not spare it.

Needs a running daemon and the base images (scripts/docker-daemon start; scripts/docker-base-images),
and root (the host guard's iptables).
"""

import argparse
import asyncio
import collections
import os
import re
import secrets
import shutil
import statistics
import subprocess
import tempfile
import time
import types
from pathlib import Path
from typing import Any

from envloop.core.ids import new_id
from envloop.core.trial import TrialSpec
from envloop.environments.docker import firewall
from envloop.environments.docker.cli import docker_binary
from envloop.environments.docker.engine import Engine
from envloop.environments.docker.images import BuildRecords
from envloop.environments.docker.provider import DockerEnvironmentProvider
from envloop.runners import ShellRunner
from envloop.runners.model_route import PRIVATE_UPSTREAM_VARIABLE

_NETWORKS = {
    "public": "",
    "allowlist": '[environment]\nnetwork_mode = "allowlist"\nallowed_hosts = ["example.com"]\n',
    "none": '[environment]\nnetwork_mode = "no-network"\n',
}
_ID = re.compile(r"/[0-9a-f]{12,64}(?=/|$)|/envloop[-/][A-Za-z0-9_.:-]+")

Calls = dict[str, list[float]]


_SIDECAR = 'services:\n  side:\n    image: debian:12\n    command: ["sleep", "infinity"]\n'


def write_task(root: Path, network: str, label: str, sidecar: bool = False) -> Path:
    for sub in ("environment", "solution", "tests"):
        (root / sub).mkdir(parents=True)
    if sidecar:
        (root / "environment" / "docker-compose.yaml").write_text(_SIDECAR)
    (root / "task.toml").write_text(f'version = "1.0"\n{_NETWORKS[network]}')
    (root / "instruction.md").write_text("Create /app/done.\n")
    (root / "environment" / "Dockerfile").write_text(f"FROM debian:12\nWORKDIR /app\nLABEL bench={label}\n")
    (root / "solution" / "solve.sh").write_text("#!/usr/bin/env bash\ntouch /app/done\n")
    (root / "tests" / "test.sh").write_text(
        "#!/usr/bin/env bash\nr=0; [ -f /app/done ] && r=1; echo $r > /logs/verifier/reward.txt\n"
    )
    return root


class Recorder:
    """Wraps the Engine API client and the firewall's iptables runner, timing each call."""

    def __init__(self) -> None:
        self.calls: Calls = collections.defaultdict(list)

    def _timed(self, key: str, started: float) -> None:
        self.calls[key].append((time.perf_counter() - started) * 1000)

    def install(self) -> None:
        recorder = self
        request, stream = Engine.request, Engine.stream
        runners, names = _runners()
        iptables = getattr(runners, names[0])

        async def timed_request(engine: Engine, method: str, path: str, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return await request(engine, method, path, **kwargs)
            finally:
                recorder._timed(f"{method} {_ID.sub('/*', path)}", started)

        def timed_stream(engine: Engine, method: str, path: str, **kwargs: Any) -> Any:
            opened = stream(engine, method, path, **kwargs)

            class Timed:
                async def __aenter__(self) -> Any:
                    self.started = time.perf_counter()
                    return await opened.__aenter__()

                async def __aexit__(self, *exc: object) -> Any:
                    try:
                        return await opened.__aexit__(*exc)
                    finally:
                        recorder._timed(f"{method} {_ID.sub('/*', path)} (stream)", self.started)

            return Timed()

        async def timed_iptables(*args: str, check: bool = True) -> bool:
            started = time.perf_counter()
            try:
                return await iptables(*args, check=check)
            finally:
                recorder._timed(f"iptables {args[0]} {args[1] if len(args) > 1 else ''}", started)

        ebtables = getattr(runners, names[1], None)  # absent from a tree before the shared bridges

        async def timed_ebtables(*args: str, check: bool = True) -> tuple[bool, str]:
            started = time.perf_counter()
            try:
                return await ebtables(*args, check=check)  # type: ignore[misc]
            finally:
                recorder._timed(f"ebtables {args[0]} {args[1] if len(args) > 1 else ''}", started)

        if ebtables is not None:
            setattr(runners, names[1], timed_ebtables)
        batch = getattr(runners, names[2], None)  # absent before the ports' MAC rules

        async def timed_batch(changes: dict[str, tuple[str, ...]], attempts: int = 6) -> bool:
            started = time.perf_counter()
            try:
                return await batch(changes, attempts)  # type: ignore[misc]
            finally:
                first = next(iter(changes.values()), ("",))
                recorder._timed(f"ebtables-restore {first[0]} {'+'.join(changes)}", started)

        if batch is not None:
            setattr(runners, names[2], timed_batch)
        Engine.request = timed_request  # type: ignore[method-assign]
        Engine.stream = timed_stream  # type: ignore[method-assign,assignment]
        setattr(runners, names[0], timed_iptables)


def _runners() -> tuple[types.ModuleType, tuple[str, str, str]]:
    """Where the firewall's iptables, ebtables and ebtables-restore runners are, and their names: a
    tree from before netfilter.py (timed with PYTHONPATH=its src to compare) had them in firewall.py."""
    try:
        from envloop.environments.docker import netfilter  # noqa: PLC0415
    except ImportError:
        return firewall, ("_iptables", "_ebtables", "_ebtables_batch")
    return netfilter, ("iptables", "ebtables", "ebtables_batch")


async def _close_shared() -> None:
    """Remove the bridges and proxies the trials shared; a tree from before they were shared
    (timed with PYTHONPATH=its src to compare) has none."""
    try:
        from envloop.environments.docker.shared_egress import close_shared_egress  # noqa: PLC0415
    except ImportError:
        return
    await close_shared_egress()


_GATEWAY_PARAMS = {
    "AGENT_NAME": "command",
    "AGENT_COMMAND": "touch /app/done",
    "MODEL_BASE_URL": "http://127.0.0.1:9/v1",  # never called: opening the route is what is timed
}


def _spec(root: Path, task: Path, gateway: bool = False) -> TrialSpec:
    trial_id = new_id("trl")
    return TrialSpec(
        job_id="job_bench_calls",
        trial_id=trial_id,
        task_name=task.name,
        attempt=1,
        profile_ref="bench/oracle@1",
        runner="envloop/shell@1",
        params=_GATEWAY_PARAMS if gateway else {"AGENT_NAME": "oracle"},
        task_dir=task,
        instance_root=root / "instances",
        artifacts_dir=root / "artifacts" / trial_id,
    )


async def _trial(provider: DockerEnvironmentProvider, root: Path, task: Path, gateway: bool) -> float:
    started = time.perf_counter()
    outcome = await ShellRunner(provider).run(_spec(root, task, gateway))
    if outcome.reward != 1.0:
        raise RuntimeError(f"the trial did not pass: {outcome.error}")
    return (time.perf_counter() - started) * 1000


def _table(per_trial: list[Calls], walls: list[float]) -> None:
    keys = sorted(
        {key for calls in per_trial for key in calls},
        key=lambda k: -sum(sum(c.get(k, [])) for c in per_trial),
    )
    count = len(per_trial)
    print(f"{'call':<52} {'per trial':>9} {'ms per trial':>13} {'median ms':>10}")
    total = 0.0
    for key in keys:
        samples = [ms for calls in per_trial for ms in calls.get(key, [])]
        spent = sum(samples) / count
        total += spent
        print(f"{key:<52} {len(samples) / count:9.1f} {spent:13.1f} {statistics.median(samples):10.1f}")
    print(f"{'all daemon calls and iptables, summed':<52} {'':>9} {total:13.1f}")
    print(f"{'trial wall (median)':<52} {'':>9} {statistics.median(walls):13.1f}")


async def _main(args: argparse.Namespace) -> None:
    root = Path(tempfile.mkdtemp(prefix="envloop-bench-calls-"))
    provider = DockerEnvironmentProvider(BuildRecords(root / "builds"))
    label = f"calls-{secrets.token_hex(4)}"
    task = write_task(root / "task", args.network, label, args.sidecar)
    recorder = Recorder()
    recorder.install()
    try:
        await _trial(provider, root, task, args.gateway)  # builds the image, makes what trials share
        per_trial: list[Calls] = []
        walls = []
        for _ in range(args.trials):
            recorder.calls = collections.defaultdict(list)
            walls.append(await _trial(provider, root, task, args.gateway))
            per_trial.append(dict(recorder.calls))
        _table(per_trial, walls)
    finally:
        await _close_shared()
        shutil.rmtree(root, ignore_errors=True)
        built = subprocess.run(
            [docker_binary(), "images", "-q", "--filter", f"label=bench={label}"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.split()
        if built:
            subprocess.run([docker_binary(), "rmi", "-f", *set(built)], capture_output=True, check=False)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--network", choices=tuple(_NETWORKS), default="public")
    parser.add_argument("--sidecar", action="store_true", help="give the task one compose service")
    parser.add_argument("--gateway", action="store_true", help="open the model gateway to the agent phase")
    parser.add_argument("--trials", type=int, default=5)
    args = parser.parse_args()
    if args.gateway:  # the endpoint is on loopback, which a worker refuses unless told
        os.environ[PRIVATE_UPSTREAM_VARIABLE] = "allow"
    sidecar = (", one sidecar" if args.sidecar else "") + (", model gateway" if args.gateway else "")
    print(f"network {args.network}{sidecar}, {args.trials} trials one after another, {os.cpu_count()} cores")
    print(f"load average at the start: {os.getloadavg()[0]:.2f} (the machine is shared)")
    asyncio.run(_main(args))
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
