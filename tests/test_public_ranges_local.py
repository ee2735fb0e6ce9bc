"""`public` means the internet in the local sandbox too: pasta, which connects on the trial's behalf
as the trial's own uid, reaches none of the networks this host is on and no reserved range, while
the internet (here: a package registry) stays reachable.

The networks attacked are the test's own (`tests.neighbours`): nothing leaves this machine.
"""

import asyncio
from pathlib import Path

import pytest

from envloop.core.ids import new_id
from envloop.core.trial import TrialSpec
from envloop.environments.local import LocalEnvironmentProvider
from envloop.environments.local.bwrap import bwrap_executable, pasta_executable
from envloop.environments.local.identity import can_switch_user
from envloop.runners import ShellRunner
from tests.neighbours import host_reaches, neighbour
from tests.registries import registry_url

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(bwrap_executable()[0] is None, reason="bwrap cannot create a sandbox on this host"),
    pytest.mark.skipif(pasta_executable()[0] is None, reason="pasta (passt) is not installed"),
    pytest.mark.skipif(not can_switch_user(), reason="trials get uids of their own under a root worker only"),
]

FETCH = "import sys, urllib.request as u; print(sys.argv[1], u.urlopen(sys.argv[2], timeout=20).status)"


def test_a_local_public_trial_reaches_the_internet_but_neither_the_hosts_networks_nor_reserved_ranges(
    tmp_path: Path,
) -> None:
    task = tmp_path / "task"
    (task / "tests").mkdir(parents=True)
    (task / "environment").mkdir()
    (task / "task.toml").write_text('version = "1.0"\n[environment]\nnetwork_mode = "public"\n')
    (task / "instruction.md").write_text("Probe the network.\n")
    (task / "tests" / "test.sh").write_text('echo 0 > "${ENVLOOP_LOGS_DIR:-/logs}/verifier/reward.txt"\n')
    with neighbour() as near:
        for address in (near.reserved, near.on_link, near.unique_local):
            assert host_reaches(address, near.port), address
        probes = "; ".join(
            f"timeout 5 bash -c 'exec 3<>/dev/tcp/{to}/{near.port}' 2>/dev/null && echo REACHED {to}"
            for to in (near.reserved, near.on_link, near.unique_local)
        )
        command = f"{probes}; python3 -c '{FETCH}' registry {registry_url()}; true"
        spec = TrialSpec(
            job_id="job_public_local",
            trial_id=new_id("trl"),
            task_name="task",
            attempt=1,
            profile_ref="team/p@1",
            runner="envloop/shell@1",
            params={"AGENT_NAME": "command", "AGENT_COMMAND": command},
            task_dir=task,
            instance_root=tmp_path / "instances",
            artifacts_dir=tmp_path / "artifacts",
        )
        outcome = asyncio.run(ShellRunner(LocalEnvironmentProvider("bwrap")).run(spec))
        peers = near.peers()
    said = (tmp_path / "artifacts" / "agent" / "stdout.txt").read_text()
    assert outcome.error is None, outcome.error
    assert "REACHED" not in said
    assert "registry 200" in said, said
    assert peers == [near.reserved_host, near.on_link_host, near.unique_local_host], (
        "the trial's pasta connected"
    )
