"""What the agent CLIs cost: the install into the worker's agent cache (once per version and
platform), and each trial's overhead once the cache holds it.

For each agent (`--agents`, default all six):

- cold install: `AgentCache.ensure` into an empty cache directory (registry downloads included, so
  the figure depends on the network; the package manager's own download cache is left as it is);
- warm lookup: the same call once the entry exists (what every later trial pays on the worker);
- size of the entry, and how long making it visible in one local sandbox instance takes
  (`put_dir` until providers offer `mount_readonly`);
- a whole trial against an echoing scripted endpoint through the worker's model gateway, with no
  network in the sandbox (`--trials` of them: install step, the CLI's start-up and one model call,
  the verifier), beside the same trial with the `nop` agent: the
  difference is the agent's per-trial overhead.

    .venv/bin/python bench/agent_clis.py [--agents codex,opencode] [--trials 3] [--cache DIR]
"""

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from agents import hello_task

from envloop.agents import find_agent
from envloop.agents.aider import RECIPE as AIDER
from envloop.agents.cache import CACHE_VARIABLE, AgentCache, InstallCommand
from envloop.agents.claude_code import RECIPE as CLAUDE_CODE
from envloop.agents.codex import RECIPE as CODEX
from envloop.agents.mini_swe_agent import RECIPE as MINI_SWE_AGENT
from envloop.agents.opencode import RECIPE as OPENCODE
from envloop.agents.qwen_code import RECIPE as QWEN_CODE
from envloop.agents.recipes import PYTHON_PROBE, NpmRecipe, PipRecipe, PythonTarget
from envloop.core.ids import new_id
from envloop.core.trial import TrialSpec
from envloop.runners import ShellRunner
from envloop.testing import Received, Reply, ScriptedServer

RECIPES: dict[str, NpmRecipe | PipRecipe] = {
    "claude-code": CLAUDE_CODE,
    "codex": CODEX,
    "opencode": OPENCODE,
    "qwen-code": QWEN_CODE,
    "mini-swe-agent": MINI_SWE_AGENT,
    "aider": AIDER,
}


def _sandbox_python() -> PythonTarget:
    """The local sandbox's python3: the host's /usr/bin/python3, probed as an agent probes it."""
    fields = subprocess.run(
        ["/usr/bin/python3", "-c", PYTHON_PROBE], capture_output=True, text=True, check=True
    ).stdout.split()
    libc_version = [int(part) for part in fields[4].split(".")[:2]]
    return PythonTarget(
        int(fields[0]), int(fields[1]), fields[2], fields[3], (libc_version[0], libc_version[1])
    )


def _install_args(agent: str) -> tuple[str, list[InstallCommand], list[str]]:
    version = str(find_agent(agent).component.params_model.model_fields["AGENT_VERSION"].default)
    recipe = RECIPES[agent]
    if isinstance(recipe, NpmRecipe):
        return recipe.name(version), recipe.commands(version), recipe.checks(version)
    target = _sandbox_python()
    return recipe.name(version, target), recipe.commands(version, target), recipe.checks()


def _size_mb(path: Path) -> float:
    total = sum(p.lstat().st_size for p in path.rglob("*") if not p.is_symlink() and p.is_file())
    return total / 1e6


def _trial_sec(agent: str, url: str, task: Path, root: Path) -> tuple[float, str]:
    params = {"AGENT_NAME": agent, "MODEL_BASE_URL": url, "MODEL_NAME": "bench"}
    if agent == "claude-code":
        params |= {"MODEL_PROTOCOL": "anthropic", "MAX_STEPS": "1"}
    elif agent != "nop":
        params |= {"MODEL_PROTOCOL": "openai", "MAX_STEPS": "1"}
    trial_id = new_id("trl")
    spec = TrialSpec(
        job_id="job_bench",
        trial_id=trial_id,
        task_name=task.name,
        attempt=1,
        profile_ref="bench/agent@1",
        runner="envloop/shell@1",
        params=params,
        task_dir=task,
        instance_root=root / "instances",
        artifacts_dir=root / trial_id,
        agent_timeout_sec=600,
    )
    started = time.monotonic()
    outcome = asyncio.run(ShellRunner().run(spec))
    return time.monotonic() - started, outcome.error.message if outcome.error else "ok"


def _echo(received: Received) -> Reply:
    return Reply(text="hello")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--agents", default="claude-code,codex,opencode,qwen-code,mini-swe-agent,aider")
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--cache", type=Path, help="keep the installs here (default: a temporary directory)")
    args = parser.parse_args()
    agents = [a.strip() for a in args.agents.split(",") if a.strip()]
    with tempfile.TemporaryDirectory(prefix="bench-agents-") as scratch:
        root = Path(scratch)
        cache_dir = args.cache or root / "cache"
        os.environ[CACHE_VARIABLE] = str(cache_dir)
        task = hello_task(root)
        print(
            f"{'agent':<15} {'cold install':>13} {'warm lookup':>12} {'entry':>9} {'copy in':>8} {'trial':>8}"
        )
        with ScriptedServer(default=_echo) as server:
            base = statistics.median(
                _trial_sec("nop", server.openai_url, task, root)[0] for _ in range(args.trials)
            )
            print(f"{'nop':<15} {'':>13} {'':>12} {'':>9} {'':>8} {base:>7.2f}s")
            for agent in agents:
                name, commands, checks = _install_args(agent)
                cache = AgentCache(cache_dir)
                started = time.monotonic()
                installed = cache.ensure(name, commands, checks)
                cold = time.monotonic() - started
                started = time.monotonic()
                cache.ensure(name, commands, checks)
                warm = time.monotonic() - started
                copy_dir = root / "copy"
                started = time.monotonic()
                shutil.copytree(installed.path, copy_dir, symlinks=True, copy_function=shutil.copy)
                copied = time.monotonic() - started
                shutil.rmtree(copy_dir)
                url = server.anthropic_url if agent == "claude-code" else server.openai_url
                runs = [_trial_sec(agent, url, task, root) for _ in range(args.trials)]
                trial = statistics.median(sec for sec, _ in runs)
                errors = {why for _, why in runs if why != "ok"}
                note = f"  ({'; '.join(sorted(errors))[:80]})" if errors else ""
                print(
                    f"{agent:<15} {cold:>12.1f}s {warm * 1000:>10.1f}ms {_size_mb(installed.path):>7.0f}MB "
                    f"{copied:>7.2f}s {trial:>7.2f}s{note}"
                )
        print(f"per-trial overhead = trial − nop ({base:.2f}s); copy in = the tree copied once on this disk")


if __name__ == "__main__":
    main()
