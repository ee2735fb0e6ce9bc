"""Network policies in the docker environment, as Harbor defines them and attacked from inside.

`public` reaches the internet (here: a package registry) and nothing of the host, on any of its
addresses; `allowlist` reaches only its hosts, and traffic that ignores the proxy goes nowhere;
`no-network` has loopback alone; phases switch between them; the operator's ceiling closes them all.
Each trial runs a probe in its agent phase and in its verifier, whose findings the tests read.
"""

import asyncio
import json
import secrets
import shlex
from pathlib import Path

import pytest

from envloop.core.ids import new_id
from envloop.core.trial import TrialOutcome, TrialSpec
from envloop.environments.docker.images import BuildRecords
from envloop.environments.docker.provider import DockerEnvironmentProvider
from envloop.runners import ShellRunner
from tests.docker_daemon import docker_daemon
from tests.registries import host_addresses, host_listener, host_of, other_registry_url, registry_url

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.usefixtures("docker_daemon")]
__all__ = ["docker_daemon"]

PROBE = """\
import json, socket, sys, urllib.request
from concurrent.futures import ThreadPoolExecutor
role, targets, port = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
lines = open("/proc/net/dev").read().splitlines()[2:]
found = {"role": role, "interfaces": sorted(line.split(":")[0].strip() for line in lines)}
direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))

def fetch(opener, url):
    try:
        return opener.open(url, timeout=15).status
    except Exception as exc:
        return type(exc).__name__

def connect(address):
    try:
        socket.create_connection((address, port), timeout=3).close()
        return "REACHED"
    except OSError as exc:
        return type(exc).__name__

gateway = ""
for line in open("/proc/net/route").read().splitlines()[1:]:
    fields = line.split()
    if fields[1] == "00000000":
        gateway = socket.inet_ntoa(bytes.fromhex(fields[2])[::-1])
# All at once: a dropped packet costs its whole timeout, and the probe waits for the longest alone.
with ThreadPoolExecutor(32) as pool:
    fetches = {
        name + how: pool.submit(fetch, opener, url)
        for name, url in targets.items()
        for how, opener in (("", urllib.request.build_opener()), (" direct", direct))
    }
    hosts = {"host " + a: pool.submit(connect, a) for a in [*sys.argv[4:], gateway] if a}
    found.update({key: future.result() for key, future in {**fetches, **hosts}.items()})
print(json.dumps(found))
"""


def write_task(root: Path, toml: str) -> Path:
    for sub in ("tests", "solution", "environment"):
        (root / sub).mkdir(parents=True)
    (root / "task.toml").write_text('version = "1.0"\n' + toml)
    (root / "instruction.md").write_text("Probe the network.\n")
    (root / "environment" / "probe.py").write_text(PROBE)
    (root / "environment" / "Dockerfile").write_text(
        f"FROM python:3.11-slim\nCOPY probe.py /probe.py\nWORKDIR /app\nLABEL token={secrets.token_hex(8)}\n"
    )
    (root / "tests" / "test.sh").write_text(
        '#!/usr/bin/env bash\npython3 /probe.py verifier "$PROBE_TARGETS" "$PROBE_PORT" $PROBE_HOSTS\n'
        "echo 1 > /logs/verifier/reward.txt\n"
    )
    return root


def run_probe(
    tmp_path: Path, toml: str, **more_targets: str
) -> tuple[TrialOutcome, dict[str, object], dict[str, object], list[str]]:
    """Run one trial whose agent and verifier both probe; (outcome, agent's, verifier's, peers the
    host's listener saw)."""
    targets = json.dumps({"registry": registry_url(), **more_targets})
    with host_listener() as listener:
        task = write_task(tmp_path / "task", toml + '\n[verifier.env]\nPROBE_TARGETS = "${PROBE_TARGETS}"\n'
                          'PROBE_PORT = "${PROBE_PORT}"\nPROBE_HOSTS = "${PROBE_HOSTS}"\n')  # fmt: skip
        probe = {
            "PROBE_TARGETS": targets,
            "PROBE_PORT": str(listener.port),
            "PROBE_HOSTS": " ".join(host_addresses()),
        }
        # The verifier's own params never reach the agent: its command names the same values itself.
        agent_probe = f"python3 /probe.py agent {shlex.quote(targets)} {listener.port} {probe['PROBE_HOSTS']}"
        params = {"AGENT_NAME": "command", "AGENT_COMMAND": agent_probe, **probe}
        spec = TrialSpec(
            job_id="job_networks",
            trial_id=new_id("trl"),
            task_name="task",
            attempt=1,
            profile_ref="team/p@1",
            runner="envloop/shell@1",
            params=params,
            task_dir=task,
            instance_root=tmp_path / "instances",
            artifacts_dir=tmp_path / "artifacts",
        )
        provider = DockerEnvironmentProvider(BuildRecords(tmp_path / "builds"))
        outcome = asyncio.run(ShellRunner(provider).run(spec))
        peers = list(listener.peers)
    agent = json.loads((tmp_path / "artifacts" / "agent" / "stdout.txt").read_text().splitlines()[-1])
    verifier = json.loads((tmp_path / "artifacts" / "verifier" / "stdout.txt").read_text().splitlines()[-1])
    return outcome, agent, verifier, peers


def host_probes(found: dict[str, object]) -> dict[str, object]:
    return {name: value for name, value in found.items() if name.startswith("host ")}


def test_public_reaches_a_package_registry_and_nothing_of_the_host(tmp_path: Path) -> None:
    # A name under a reserved domain exists nowhere: failing to reach it is not this machine's doing.
    toml = '[environment]\nnetwork_mode = "public"\n'
    outcome, agent, verifier, peers = run_probe(
        tmp_path,
        toml,
        nowhere="https://envloop.invalid/",
        plain=f"http://{host_of(registry_url())}/",
        closed="http://192.0.2.1/",  # a documentation address, refused to the proxy like any non-global one
    )
    assert outcome.error is None, outcome.error
    assert agent["registry"] == 200 and verifier["registry"] == 200
    # The trial's record: what went through its proxy, the agent's and the verifier's requests each
    # (what went around it, `direct`, is not the proxy's to see).
    assert outcome.destinations is not None and outcome.destinations.more_destinations == 0
    assert {one.label(): one.results for one in outcome.destinations.listed} == {
        f"{host_of(registry_url())}:443": {"reached": 2},
        "envloop.invalid:443": {"unresolved": 2},
        "192.0.2.1:80": {"unconnected": 2},
        f"{host_of(registry_url())}:80": {"reached": 2},  # plain HTTP: whatever the page, the host answered
    }
    assert agent["registry direct"] == 200 and agent["nowhere"] != 200
    assert len(host_probes(agent)) >= 2
    assert "REACHED" not in host_probes(agent).values() and "REACHED" not in host_probes(verifier).values()
    assert peers == [], "a service listening on every host address saw a trial connect"
    assert "network: agent public, verifier public" in (outcome.sandbox_note or "")


def test_no_network_has_loopback_alone(tmp_path: Path) -> None:
    outcome, agent, verifier, peers = run_probe(tmp_path, '[environment]\nnetwork_mode = "no-network"\n')
    assert outcome.error is None, outcome.error
    assert agent["interfaces"] == ["lo"] and verifier["interfaces"] == ["lo"]
    assert agent["registry"] != 200 and peers == []
    assert outcome.destinations is None  # no proxy observed it: nothing to record


def test_an_allowlist_reaches_only_its_host_and_nothing_around_its_proxy(tmp_path: Path) -> None:
    allowed = host_of(registry_url())
    toml = f'[environment]\nnetwork_mode = "allowlist"\nallowed_hosts = ["{allowed}"]\n'
    outcome, agent, _, peers = run_probe(tmp_path, toml, other=other_registry_url())
    assert outcome.error is None, outcome.error  # a refused host is not one this machine missed
    assert agent["registry"] == 200, agent
    assert agent["other"] != 200, "a host outside the allowlist was reached"
    assert outcome.destinations is not None
    assert {one.label(): one.results for one in outcome.destinations.listed} == {
        f"{host_of(registry_url())}:443": {"reached": 2},
        f"{host_of(other_registry_url())}:80": {"refused": 2},
    }
    assert agent["registry direct"] != 200, "the allowed host was reached around the proxy"
    assert "REACHED" not in host_probes(agent).values() and peers == []
    assert "allowlist" in (outcome.sandbox_note or "")


def test_an_allowed_host_this_machine_cannot_reach_leaves_the_trial_unscored_not_zero(tmp_path: Path) -> None:
    # The task's checks need a host the allowlist names but this machine cannot reach (here: a name
    # that never resolves): whatever the verifier reads then judges the machine, not the agent.
    allowed = host_of(registry_url())
    hosts = f'["{allowed}", "envloop-absent.invalid"]'
    toml = f'[environment]\nnetwork_mode = "allowlist"\nallowed_hosts = {hosts}\n'
    outcome, agent, verifier, _ = run_probe(tmp_path, toml, absent="https://envloop-absent.invalid/")
    assert agent["registry"] == 200 and agent["absent"] != 200 and verifier["absent"] != 200
    assert outcome.error is not None and outcome.error.type == "environment_error"
    assert outcome.error.message == (
        "agent phase: envloop-absent.invalid:443 could not be reached from this machine "
        "(the trial's proxy could not connect)"
    )
    assert outcome.reward is None  # the verifier wrote 1; not counted
    assert outcome.reward_note is not None and outcome.reward_note.startswith("not counted: agent phase")


def test_a_public_host_this_machine_cannot_reach_leaves_the_trial_unscored_not_zero(tmp_path: Path) -> None:
    # `public` on a machine without the internet: a task whose checks fetch a page would score the
    # oracle 0. The observing proxy sees the request fail (a name no resolver here knows), and the
    # task names the page (here in its task.toml), so it depends on it.
    toml = '# the checks fetch https://www.envloop-absent-host.zz/\n[environment]\nnetwork_mode = "public"\n'
    outcome, agent, _, _ = run_probe(tmp_path, toml, page="https://www.envloop-absent-host.zz/")
    assert agent["registry"] == 200 and agent["page"] != 200
    assert outcome.error is not None and outcome.error.type == "environment_error", outcome.error
    assert outcome.error.message == (
        "agent phase: www.envloop-absent-host.zz:443 could not be reached from this machine "
        "(the trial's proxy could not connect)"
    )
    assert outcome.reward is None


def test_phases_switch_between_policies(tmp_path: Path) -> None:
    toml = '[environment]\nnetwork_mode = "no-network"\n[agent]\nnetwork_mode = "public"\n'
    outcome, agent, verifier, peers = run_probe(tmp_path, toml)
    assert outcome.error is None, outcome.error
    assert agent["registry"] == 200
    assert verifier["interfaces"] == ["lo"] and verifier["registry"] != 200
    assert "network: agent public, verifier no-network" in (outcome.sandbox_note or "")
    assert peers == []


def test_the_operator_closes_every_phase(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENVLOOP_TRIAL_NETWORK", "none")
    outcome, agent, _, peers = run_probe(tmp_path, '[environment]\nnetwork_mode = "public"\n')
    assert agent["interfaces"] == ["lo"] and agent["registry"] != 200 and peers == []
    assert any("ENVLOOP_TRIAL_NETWORK=none" in warning for warning in outcome.warnings)
