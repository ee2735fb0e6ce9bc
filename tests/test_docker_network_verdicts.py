"""An agent's own failure is its own: a verdict is set aside only on signals the agent cannot forge.

Each attack turns the agent's 0 into a missing attempt unless envloop tells whose failure it was:
asking for a host that does not exist (on a public task, and under an allowlist whose wildcard entry
lets the name through), and making a shared verifier's output read like a broken environment
(`ModuleNotFoundError`, `x: command not found`), or leaving out the module the tests import. Each
ends with the verifier's 0 standing. The same unreachable host named by the task itself (its
instruction) still leaves the trial unscored: the proxy's record of a host the task depends on is
the environment's failure, and this is what keeps Harbor's examples that need the internet
unscored here rather than 0.
"""

import asyncio
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from envloop.core.ids import new_id
from envloop.core.trial import TrialOutcome, TrialSpec
from envloop.environments.docker.images import BuildRecords
from envloop.environments.docker.provider import DockerEnvironmentProvider
from envloop.environments.docker.shared_egress import SHARED_LABEL
from envloop.environments.docker.squid import ACCESS_LOG, ACCESS_LOG_BYTES
from envloop.runners import ShellRunner
from tests.conftest import SHARED
from tests.docker_daemon import docker_daemon

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.usefixtures("docker_daemon")]
__all__ = ["docker_daemon"]

EXAMPLES = SHARED / "harbor-examples" / "tasks"
NOWHERE = "http://no-such-host-123.com/"
ASK_AND_GIVE_UP = f"""\
python3 -c 'import urllib.request; urllib.request.urlopen("{NOWHERE}", timeout=20)' || echo gave up
"""
ZERO = "#!/usr/bin/env bash\necho 0 > /logs/verifier/reward.txt\n"
IMPORTS_THE_AGENTS_MODULE = """\
#!/usr/bin/env bash
cd /app
if python3 -c 'import services; assert services.answer() == 42'; then r=1; else r=0; fi
echo $r > /logs/verifier/reward.txt
"""
FORGED_SIGNS = """\
cat > /app/services.py <<'EOF'
import sys
print("/tests/test.sh: line 3: uvx: command not found", file=sys.stderr)
print("bash: pytest: command not found")
raise ModuleNotFoundError("No module named 'numpy'")
EOF
"""


def run_trial(
    tmp_path: Path,
    toml: str,
    agent: str,
    verifier: str,
    instruction: str = "Do it.\n",
    trial_id: str | None = None,
) -> TrialOutcome:
    task = tmp_path / "task"
    (task / "tests").mkdir(parents=True)
    (task / "environment").mkdir()
    (task / "task.toml").write_text('version = "1.0"\n' + toml)
    (task / "instruction.md").write_text(instruction)
    (task / "tests" / "test.sh").write_text(verifier)
    (task / "environment" / "Dockerfile").write_text("FROM python:3.11-slim\nWORKDIR /app\n")
    params = {"AGENT_NAME": "command", "AGENT_COMMAND": agent} if agent else {"AGENT_NAME": "nop"}
    spec = TrialSpec(
        job_id="job_verdicts",
        trial_id=trial_id or new_id("trl"),
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
    return asyncio.run(ShellRunner(provider).run(spec))


@pytest.mark.parametrize(
    "toml",
    [
        '[environment]\nnetwork_mode = "public"\n',
        '[environment]\nnetwork_mode = "allowlist"\nallowed_hosts = ["*.com"]\n',
    ],
    ids=["public", "allowlist-wildcard"],
)
def test_a_host_only_the_agent_asked_for_leaves_its_zero_standing(tmp_path: Path, toml: str) -> None:
    own = run_trial(tmp_path / "own", toml, ASK_AND_GIVE_UP, ZERO)
    assert "gave up" in (tmp_path / "own" / "artifacts" / "agent" / "stdout.txt").read_text()
    assert (own.error, own.reward) == (None, 0.0), (own.error, own.reward_note)
    # The same failure on a host the task names is this machine's: the proxy saw it, unscored.
    named = run_trial(tmp_path / "named", toml, ASK_AND_GIVE_UP, ZERO, instruction=f"Fetch {NOWHERE}.\n")
    assert named.error is not None and named.error.type == "environment_error", named.error
    assert named.error.message.startswith("agent phase: no-such-host-123.com could not be reached")
    assert named.reward is None


def test_a_host_the_task_names_asked_for_on_another_port_leaves_the_zero_standing(tmp_path: Path) -> None:
    toml = '[environment]\nnetwork_mode = "public"\n'
    other_port = ASK_AND_GIVE_UP.replace("no-such-host-123.com/", "no-such-host-123.com:81/")
    outcome = run_trial(tmp_path, toml, other_port, ZERO, instruction=f"Fetch {NOWHERE}.\n")
    assert (outcome.error, outcome.reward) == (None, 0.0), (outcome.error, outcome.reward_note)


def test_the_verifiers_zero_stands_when_the_module_its_tests_import_was_never_written(tmp_path: Path) -> None:
    outcome = run_trial(tmp_path, "", "", IMPORTS_THE_AGENTS_MODULE)
    stderr = (tmp_path / "artifacts" / "verifier" / "stderr.txt").read_text()
    assert "ModuleNotFoundError: No module named 'services'" in stderr
    assert (outcome.error, outcome.reward) == (None, 0.0), (outcome.error, outcome.reward_note)


def test_the_verifiers_zero_stands_whatever_the_agents_code_prints(tmp_path: Path) -> None:
    outcome = run_trial(tmp_path, "", FORGED_SIGNS, IMPORTS_THE_AGENTS_MODULE)
    verifier = tmp_path / "artifacts" / "verifier"
    output = (verifier / "stderr.txt").read_text() + (verifier / "stdout.txt").read_text()
    assert "uvx: command not found" in output and "No module named 'numpy'" in output
    assert (outcome.error, outcome.reward) == (None, 0.0), (outcome.error, outcome.reward_note)


@pytest.mark.parametrize(
    ("task", "host"),
    [("hello-world", "astral.sh"), ("network-policy-matrix/static/e-default", "example.com")],
)
def test_harbors_examples_that_need_the_internet_never_score_their_oracle_zero(
    tmp_path: Path, task: str, host: str
) -> None:
    """Their checks fetch pages the task names (uv's installer, example.com): on a machine without
    the internet the trial is unscored with the host, never the oracle's 0; with it, a true 1."""
    copy = tmp_path / "task"
    shutil.copytree(EXAMPLES / task, copy)
    # The Python this machine has, as an operator's ENVLOOP_IMAGE_SUBSTITUTES would give it.
    dockerfile = copy / "environment" / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text().replace("python:3.12-slim", "python:3.13-slim"))
    spec = TrialSpec(
        job_id="job_verdicts",
        trial_id=new_id("trl"),
        task_name=copy.name,
        attempt=1,
        profile_ref="team/oracle@1",
        runner="envloop/shell@1",
        params={"AGENT_NAME": "oracle"},
        task_dir=copy,
        instance_root=tmp_path / "instances",
        artifacts_dir=tmp_path / "artifacts",
    )
    outcome = asyncio.run(ShellRunner(DockerEnvironmentProvider(BuildRecords(tmp_path / "builds"))).run(spec))
    if outcome.reward is not None:
        assert (outcome.error, outcome.reward) == (None, 1.0), outcome.error
        return
    assert outcome.error is not None and outcome.error.type == "environment_error", outcome.error
    assert f"{host}:443 could not be reached from this machine" in outcome.error.message


PROXY_FLOOD = r"""
python3 - <<'PY'
import os, socket, threading, time, urllib.parse
proxy = urllib.parse.urlsplit(os.environ["http_proxy"])
request = b"GET http://denied.example/" + b"a" * 7000 + b" HTTP/1.1\r\nHost: denied.example\r\n\r\n"
def flood():
    end = time.time() + 10
    while time.time() < end:
        try:
            with socket.create_connection((proxy.hostname, proxy.port), timeout=5) as connection:
                for _ in range(50):
                    connection.sendall(request)
                    if not connection.recv(65536):
                        break
        except OSError:
            time.sleep(0.01)
threads = [threading.Thread(target=flood) for _ in range(8)]
[thread.start() for thread in threads]
[thread.join() for thread in threads]
PY
"""
"""Denied requests of 7 KB, as fast as eight threads send them, for 10 s: each is a line of the
proxy's access log."""


def test_an_agent_flooding_its_proxy_keeps_its_zero_and_the_proxy_log_is_bounded(tmp_path: Path) -> None:
    """The proxy's access log grew by 300 MB on the host's disk in 20 s, and read back past its cap
    it failed the trial as the infrastructure's (reward none, not counted): now the shared proxy's
    log lives on a tmpfs of `ACCESS_LOG_BYTES` and squid drops what does not fit."""
    sizes: list[int] = []
    done = threading.Event()
    trial_id = new_id("trl")

    def watch() -> None:
        while not done.wait(0.5):
            listed = subprocess.run(
                ["docker", "ps", "-q", "--filter", f"label={SHARED_LABEL}=proxy"],
                capture_output=True,
                text=True,
                check=False,
            ).stdout.split()
            for container in listed:
                size = subprocess.run(
                    ["docker", "exec", container, "stat", "-c", "%s", ACCESS_LOG],
                    capture_output=True,
                    text=True,
                    check=False,
                ).stdout.strip()
                if size.isdigit():  # a worker's shared proxies (this trial's among them)
                    sizes.append(int(size))

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        toml = '[environment]\nnetwork_mode = "allowlist"\nallowed_hosts = ["pypi.org"]\n'
        outcome = run_trial(tmp_path, toml, PROXY_FLOOD, ZERO, trial_id=trial_id)
    finally:
        done.set()
        watcher.join(timeout=60)
    assert (outcome.reward, outcome.error) == (0.0, None), outcome.error
    assert sizes and max(sizes) <= ACCESS_LOG_BYTES, sizes[-3:]
