"""The bridges and proxies a worker's trials share: each trial's record its own, each trial out of
the others' reach, the proxy outliving a trial that dies, and nothing left when the worker goes.

Trials here run at once in one process, as a worker runs them, so they share one public bridge and
one observing proxy (shared_egress.py).
"""

import asyncio
import os
import signal
import time
from pathlib import Path

import pytest

from envloop.core.trial import TrialOutcome
from envloop.environments.docker.bridge_rules import sweep_rules
from envloop.environments.docker.images import BuildRecords
from envloop.environments.docker.orphans import sweep_orphans
from envloop.environments.docker.provider import DockerEnvironmentProvider
from envloop.runners import ShellRunner
from envloop.tasks.harbor import load_harbor_task
from tests.docker_daemon import command_running, docker_daemon
from tests.public_trial_support import (
    FETCH,
    RAW,
    command,
    labelled,
    leftovers,
    proxies,
    rules_of,
    run_worker,
    spec_for,
    write_task,
)
from tests.registries import host_of, registry_url

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.usefixtures("docker_daemon")]
__all__ = ["docker_daemon"]


def test_two_trials_at_once_each_answer_for_their_own_requests(tmp_path: Path) -> None:
    # Each task names a page this machine cannot reach. Trial A asks for both pages while trial B
    # fetches a registry's page: B's page failing counts for B only if B asked, and B did not.
    pages = {name: f"https://www.envloop-shared-{name}.zz/" for name in ("a", "b")}
    task_a = write_task(tmp_path / "a", note=f"checks fetch {pages['a']}")
    task_b = write_task(tmp_path / "b", note=f"checks fetch {pages['b']}")
    provider = DockerEnvironmentProvider(BuildRecords(tmp_path / "builds"))
    spec_a = spec_for(tmp_path, task_a, command(f"sleep 2; python3 /fetch.py {pages['a']} {pages['b']}"))
    spec_b = spec_for(tmp_path, task_b, command(f"sleep 1; python3 /fetch.py {registry_url()}; sleep 8"))

    async def both() -> list[TrialOutcome]:
        return list(await asyncio.gather(*(ShellRunner(provider).run(s) for s in (spec_a, spec_b))))

    before = proxies()
    outcome_a, outcome_b = asyncio.run(both())
    assert outcome_a.error is not None and outcome_a.error.type == "environment_error"
    assert outcome_a.error.message == (
        "agent phase: www.envloop-shared-a.zz:443 could not be reached from this machine "
        "(the trial's proxy could not connect)"
    )
    assert outcome_b.error is None and outcome_b.reward == 1.0, outcome_b.error
    # Each trial's record holds its own requests alone, though one proxy logged them all.
    assert outcome_a.destinations is not None and outcome_b.destinations is not None
    assert [(one.label(), one.results) for one in outcome_a.destinations.listed] == [
        ("www.envloop-shared-a.zz:443", {"unresolved": 1}),
        ("www.envloop-shared-b.zz:443", {"unresolved": 1}),
    ]
    assert [(one.label(), one.results) for one in outcome_b.destinations.listed] == [
        (f"{host_of(registry_url())}:443", {"reached": 1})
    ]
    # One proxy served both (and stays for the worker's next trials).
    assert len(set(proxies()) - set(before)) <= 1 and proxies()


def test_a_separate_verifiers_requests_join_the_trials_record(tmp_path: Path) -> None:
    # The agent asks for a name that exists nowhere; the verifier, in a container of its own, fetches
    # a registry's page: one record holds both.
    task = write_task(tmp_path / "task", solve="python3 /fetch.py https://envloop-agent.invalid/")
    toml = (task / "task.toml").read_text()
    (task / "task.toml").write_text(toml + '[verifier]\nenvironment_mode = "separate"\n')
    (task / "tests" / "fetch.py").write_text(FETCH)
    (task / "tests" / "Dockerfile").write_text("FROM python:3.11-slim\nCOPY test.sh fetch.py /tests/\n")
    (task / "tests" / "test.sh").write_text(
        f"#!/usr/bin/env bash\npython3 /tests/fetch.py {registry_url()}\necho 1 > /logs/verifier/reward.txt\n"
    )
    provider = DockerEnvironmentProvider(BuildRecords(tmp_path / "builds"))
    outcome = asyncio.run(ShellRunner(provider).run(spec_for(tmp_path, task, {"AGENT_NAME": "oracle"})))
    assert outcome.error is None and outcome.reward == 1.0, outcome.error
    assert outcome.destinations is not None
    assert [(one.label(), one.results) for one in outcome.destinations.listed] == [
        ("envloop-agent.invalid:443", {"unresolved": 1}),
        (f"{host_of(registry_url())}:443", {"reached": 1}),
    ]


def test_a_trial_reaches_no_other_trials_container_on_the_shared_bridge(tmp_path: Path) -> None:
    task = load_harbor_task(write_task(tmp_path / "task"))
    provider = DockerEnvironmentProvider(BuildRecords(tmp_path / "builds"))
    serve = "nohup python3 -m http.server 8000 --bind 0.0.0.0 >/dev/null 2>&1 & sleep 1; hostname -i"
    probe = (
        "import socket, sys\n"
        "try:\n"
        "    socket.create_connection((sys.argv[1], 8000), timeout=3).close(); print('REACHED')\n"
        "except OSError as exc:\n"
        "    print(type(exc).__name__)\n"
    )

    async def attack() -> tuple[str, str, str, str, str, list[list[str]]]:
        spec_a, spec_b = (spec_for(tmp_path, tmp_path / "task", {}) for _ in range(2))
        async with provider.instance(task, spec_a) as a, provider.instance(task, spec_b) as b:
            address = (await b.exec(["sh", "-c", serve])).stdout.split()[0]
            own = (await b.exec(["python3", "-c", probe, address])).stdout.strip()
            direct = (await a.exec(["python3", "-c", probe, address])).stdout.strip()
            proxied = (await a.exec(["python3", "/fetch.py", f"http://{address}:8000/"])).stdout.strip()
            registry = (await a.exec(["python3", "/fetch.py", registry_url()])).stdout.strip()
            contacted = [await env.contacted_hosts() for env in (a, b)]  # type: ignore[attr-defined]
            return address, own, direct, proxied, registry, contacted

    address, own, direct, proxied, registry, (by_a, by_b) = asyncio.run(attack())
    assert own == "REACHED"  # the service answers on its shared address
    assert direct != "REACHED", "a trial connected to another trial's container"
    assert not proxied.endswith(" 200"), "the shared proxy fetched from another trial's container"
    assert registry.endswith(" 200"), registry  # while the internet stays reachable
    # The shared proxy's record, trial by trial: A's two requests are A's, and B made none.
    assert by_a == [f"{address}:8000", f"{host_of(registry_url())}:443"] and by_b == []


def test_the_shared_proxy_outlives_a_trial_that_dies(tmp_path: Path) -> None:
    task = write_task(tmp_path / "task", solve="sleep 600")
    provider = DockerEnvironmentProvider(BuildRecords(tmp_path / "builds"))
    after = spec_for(tmp_path, task, command(f"python3 /fetch.py {registry_url()}"))

    async def die_then_fetch() -> tuple[list[str], TrialOutcome]:
        dying = spec_for(tmp_path, task, {"AGENT_NAME": "oracle"})
        running = asyncio.ensure_future(ShellRunner(provider).run(dying))
        await command_running(dying.trial_id, "sleep 600")
        before = proxies()
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
        return before, await ShellRunner(provider).run(after)

    before, outcome = asyncio.run(die_then_fetch())
    assert before and proxies() == before
    assert outcome.error is None, outcome.error
    fetched = (after.artifacts_dir / "agent" / "stdout.txt").read_text()
    assert fetched.strip().endswith(" 200"), fetched


def test_a_workers_shared_bridges_and_proxies_go_when_it_exits_or_dies(tmp_path: Path) -> None:
    task = write_task(tmp_path / "task", solve="sleep 600")
    fetch = command(f"python3 /fetch.py {registry_url()}")
    done, identity = run_worker(tmp_path, spec_for(tmp_path, task, fetch))
    assert done.wait(timeout=240) == 0
    assert leftovers(identity) == []  # removed by the process on its way out

    killed = spec_for(tmp_path, task, {"AGENT_NAME": "oracle"})
    dying, identity = run_worker(tmp_path, killed)
    asyncio.run(command_running(killed.trial_id, "sleep 600"))
    assert len(labelled("network", f"envloop.worker={identity}")) == 1 and rules_of(identity)
    os.kill(dying.pid, signal.SIGKILL)
    dying.wait(timeout=30)
    time.sleep(0.5)
    asyncio.run(sweep_orphans())  # what the next worker does when it starts
    asyncio.run(sweep_rules())
    assert leftovers(identity) == []


def test_a_trial_cannot_speak_to_the_shared_proxy_from_another_trials_address(tmp_path: Path) -> None:
    # Root in its container, trial A crafts SYNs to the proxy from B's address (to be charged to B,
    # or, with B's answers redirected, to act as B). Its own address, crafted the same way, is
    # answered: the forged one never reaches the proxy, so B hears nothing.
    root = write_task(tmp_path / "task")
    (root / "environment" / "raw.py").write_text(RAW)
    dockerfile = "FROM python:3.11-slim\nCOPY fetch.py raw.py /\nWORKDIR /app\n"
    (root / "environment" / "Dockerfile").write_text(dockerfile)
    task = load_harbor_task(root)
    provider = DockerEnvironmentProvider(BuildRecords(tmp_path / "builds"))

    def listening(port: int) -> list[str]:
        return ["sh", "-c", f"nohup python3 /raw.py listen {port} 6 > /tmp/heard 2>&1 & sleep 1"]

    async def forge() -> tuple[str, str]:
        spec_a, spec_b = (spec_for(tmp_path, root, {}) for _ in range(2))
        async with provider.instance(task, spec_a) as a, provider.instance(task, spec_b) as b:
            own = (await a.exec(["hostname", "-i"])).stdout.split()[0]
            theirs = (await b.exec(["hostname", "-i"])).stdout.split()[0]
            await a.exec(listening(41001))
            await b.exec(listening(41002))
            await a.exec(["python3", "/raw.py", "send", own, "41001"])
            await a.exec(["python3", "/raw.py", "send", theirs, "41002"])
            await a.exec(["sleep", "6"])
            return (await a.exec(["cat", "/tmp/heard"])).stdout.strip(), (
                await b.exec(["cat", "/tmp/heard"])
            ).stdout.strip()

    by_a, by_b = asyncio.run(forge())
    assert by_a == "ANSWERED", "the crafted SYN from the trial's own address went unanswered"
    assert by_b == "SILENT", "a SYN forged from another trial's address reached the proxy"


def test_a_trial_cannot_take_the_shared_proxys_address_from_another_trial(tmp_path: Path) -> None:
    # Trial A keeps telling the bridge, in ARP, that the proxy's address is its own, so that B's
    # packets for the proxy come to A (which could only drop them: the proxy is reached through its
    # own bridge port alone). B still fetches through the proxy.
    root = write_task(tmp_path / "task")
    (root / "environment" / "raw.py").write_text(RAW)
    (root / "environment" / "Dockerfile").write_text(
        "FROM python:3.11-slim\nCOPY fetch.py raw.py /\nWORKDIR /app\n"
    )
    task = load_harbor_task(root)
    provider = DockerEnvironmentProvider(BuildRecords(tmp_path / "builds"))

    async def poison() -> str:
        spec_a, spec_b = (spec_for(tmp_path, root, {}) for _ in range(2))
        async with provider.instance(task, spec_a) as a, provider.instance(task, spec_b) as b:
            theirs = (await b.exec(["hostname", "-i"])).stdout.split()[0]
            await a.exec(["sh", "-c", f"nohup python3 /raw.py poison {theirs} 20 >/dev/null 2>&1 & sleep 2"])
            return (await b.exec(["python3", "/fetch.py", registry_url()])).stdout.strip()

    fetched = asyncio.run(poison())
    assert fetched.endswith(" 200"), f"another trial's ARP took the proxy's address: {fetched}"
