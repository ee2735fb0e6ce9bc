"""The Harbor fixture task runs as written inside a bubblewrap sandbox with only host system files.

The sandbox offers /app, /logs/verifier, /tests and /solution and the host's /usr, /bin, /lib (and
/lib64 where the dynamic loader lives there) and /etc; no network. This guards the fixture that other
suites run end to end: its scripts need nothing beyond bash, coreutils and grep.
"""

import shutil
import subprocess
from pathlib import Path

import pytest

from envloop.core.reward import parse_reward
from envloop.tasks.harbor import load_harbor_task

FIXTURE = Path(__file__).parent / "fixtures" / "tasks" / "harbor-hello-world"


def _bwrap_works() -> bool:
    if shutil.which("bwrap") is None:
        return False
    probe = subprocess.run(
        ["bwrap", "--ro-bind", "/", "/", "--unshare-all", "--", "true"], capture_output=True, check=False
    )
    return probe.returncode == 0


pytestmark = pytest.mark.skipif(not _bwrap_works(), reason="bubblewrap is not usable here")


def _run(tmp_path: Path, script: str) -> subprocess.CompletedProcess[str]:
    task = load_harbor_task(FIXTURE)
    app = tmp_path / "app"
    logs = tmp_path / "logs" / "verifier"
    app.mkdir(exist_ok=True)
    logs.mkdir(parents=True, exist_ok=True)
    command = [
        "bwrap",
        "--unshare-all",
        "--die-with-parent",
        "--clearenv",
        "--setenv", "PATH", "/usr/bin:/bin",
        "--ro-bind", "/usr", "/usr",
        "--ro-bind", "/bin", "/bin",
        "--ro-bind", "/lib", "/lib",
        "--ro-bind-try", "/lib64", "/lib64",
        "--ro-bind", "/etc", "/etc",
        "--proc", "/proc",
        "--dev", "/dev",
        "--tmpfs", "/tmp",
        "--bind", str(app), "/app",
        "--bind", str(logs), "/logs/verifier",
        "--ro-bind", str(task.tests_dir), "/tests",
        "--ro-bind", str(task.solution_dir), "/solution",
        "--chdir", "/app",
        "--", "bash", "-c", script,
    ]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


def _reward(tmp_path: Path) -> float | None:
    reward_txt = tmp_path / "logs" / "verifier" / "reward.txt"
    return parse_reward(reward_txt.read_text() if reward_txt.exists() else None, None).reward


def test_oracle_solution_passes_the_verifier(tmp_path: Path) -> None:
    result = _run(tmp_path, "bash /solution/solve.sh && bash /tests/test.sh")

    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASS" in result.stdout
    assert _reward(tmp_path) == 1.0


def test_doing_nothing_scores_zero(tmp_path: Path) -> None:
    result = _run(tmp_path, "bash /tests/test.sh")

    assert result.returncode == 1
    assert _reward(tmp_path) == 0.0


def test_wrong_content_scores_zero(tmp_path: Path) -> None:
    result = _run(tmp_path, "printf 'Hello, world!\\n\\nextra\\n' > /app/hello.txt; bash /tests/test.sh")

    assert result.returncode == 1
    assert _reward(tmp_path) == 0.0
