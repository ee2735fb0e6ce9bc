"""The terminal Terminus-2 drives: one tmux session inside the trial's environment, reached only
through the Environment contract's `exec`.

Which tmux: the environment's own when it has one recent enough (3.2 or later, for a server in the
foreground, `-D`), as in the local sandbox, which shows the host's /usr. Otherwise the worker's
tmux, bundled once per version into the agent cache with every shared library it loads and the
dynamic loader that runs it (`lib/ld.so --library-path lib bin/tmux`), and copied into the
environment's /tmp like the other agents' trees: it then runs in any Linux image, whatever its C
library, with no package manager and no network (Harbor installs tmux with the image's package
manager instead, which a sandbox without network cannot). Only tmux itself runs from the bundle:
the shell it starts, and everything typed there, is the environment's own.

Why a server in the foreground: every `exec` of an environment is a command that is waited for, and
the local sandbox gives each its own process namespace, so a tmux server left behind by one command
would end with it. The server therefore is a command of its own, running for the whole agent phase
(`Terminal.open`) and killed when the agent ends (`close`, or the runner's cancellation); the
session, keystrokes and screen captures are short client commands talking to it over its socket.
"""

import asyncio
import contextlib
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from envloop.agents.base import AgentContext
from envloop.agents.cache import AgentCache, InstallCommand, Installed, InstallError
from envloop.agents.provision import make_visible
from envloop.agents.recipes import host_platform
from envloop.core.trajectory import ToolStep
from envloop.environments.base import ExecResult
from envloop.environments.contract import Environment

SESSION = "terminus"
CLIENT_TIMEOUT_SEC = 30.0
_START_WAIT_SEC = 20.0
_KEYS_CHUNK = 2000
"""Characters of keystrokes per `send-keys` (at most 8,000 bytes of UTF-8): tmux refuses a command
of more than about 16 KB."""
_HISTORY_LINES = 100_000
_SOCKET_PATH_MAX = 100
"""Bytes of a Unix socket's path that every kernel accepts (sun_path holds 108 with its NUL)."""

BUNDLE_SCRIPT = r"""set -eu
target=$1 program=$2
mkdir -p "$target/bin" "$target/lib"
cp -L "$program" "$target/bin/tmux"
ldd "$program" | while read -r first arrow path rest; do
  if [ "$arrow" = "=>" ]; then
    if [ -e "$path" ]; then cp -L "$path" "$target/lib/"; fi
  elif [ -e "$first" ]; then
    cp -L "$first" "$target/lib/ld.so"
  fi
done
"$target/lib/ld.so" --library-path "$target/lib" "$target/bin/tmux" -V
"""
"""Run on the worker by the agent cache: tmux, its libraries and its loader into one directory,
then a check that the bundle runs (a library `ldd` did not find fails the install here)."""


class TerminalError(RuntimeError):
    """The terminal could not be set up or stopped answering; the message is one line."""


@dataclass
class Terminal:
    """One tmux session inside the environment (see the module's docstring)."""

    environment: Environment
    tmux: list[str]
    socket: str
    width: int
    height: int
    server: "asyncio.Task[ExecResult] | None" = None
    last_history: str = ""
    """The whole scrollback at the last capture: where the next increment starts, and what the
    agent's logs keep of the terminal however the phase ends."""

    def _client(self, *args: str) -> list[str]:
        return [*self.tmux, "-S", self.socket, *args]

    async def open(self, env: dict[str, str], cwd: str) -> None:
        """Start the server (its variables are what the session's shell gets) and the session."""
        self.server = asyncio.create_task(
            self.environment.exec(self._client("-f", "/dev/null", "-D"), env=env, cwd=cwd)
        )
        # Only once the server listens: a client that finds no server starts one of its own, in its
        # own command's namespace, gone with that command.
        deadline = time.monotonic() + _START_WAIT_SEC
        while True:
            ready = await self.environment.exec(
                ["sh", "-c", 'test -S "$1"', "sh", self.socket], timeout=CLIENT_TIMEOUT_SEC
            )
            if ready.exit_code == 0:
                break
            if self.server.done() or time.monotonic() > deadline:
                raise TerminalError(f"tmux did not start: {_last_line(ready, self.server)}")
            await asyncio.sleep(0.05)
        started = await self._run(
            "set-option", "-g", "default-shell", "/bin/sh", ";",
            "set-option", "-g", "history-limit", str(_HISTORY_LINES), ";",
            "new-session", "-d", "-s", SESSION, "-x", str(self.width), "-y", str(self.height),
            "-c", cwd, "command -v bash >/dev/null 2>&1 && exec bash || exec sh",
        )  # fmt: skip
        if started.exit_code != 0:
            raise TerminalError(f"the tmux session did not start: {_last_line(started, self.server)}")
        await self._run("set-option", "-t", SESSION, "status", "off")

    async def close(self) -> None:
        """Kill the server and everything the session runs (cancelling its command kills its tree)."""
        if self.server is None:
            return
        self.server.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self.server
        if not self.socket.startswith(f"{self.environment.visible.tmp.rstrip('/')}/"):
            # A socket outside the instance's own /tmp (see socket_path) would outlive it.
            with contextlib.suppress(Exception):
                await self.environment.exec(["rm", "-f", self.socket], timeout=CLIENT_TIMEOUT_SEC)

    async def alive(self) -> bool:
        return (await self._run("has-session", "-t", SESSION)).exit_code == 0

    async def type(self, keys: str) -> None:
        """Type `keys` as the model wrote them: a lone key name presses that key; any other text is
        typed character by character (a newline runs the line)."""
        if not keys:
            return
        for start in range(0, len(keys), _KEYS_CHUNK):
            # After `--`, keystrokes that start with a dash are typed, not read as options.
            sent = await self._run("send-keys", "-t", SESSION, "--", keys[start : start + _KEYS_CHUNK])
            if sent.exit_code != 0:
                raise TerminalError(f"tmux did not take the keystrokes: {_last_line(sent, self.server)}")

    async def screen(self) -> str:
        """The visible screen, trailing blank lines left out."""
        shown = await self._run("capture-pane", "-p", "-t", SESSION)
        return shown.stdout.rstrip() if shown.exit_code == 0 else ""

    async def increment(self) -> tuple[str, bool]:
        """What appeared since the last capture (see `continuation`): (that text, True), or (the
        screen, False) when nothing did or the scrollback no longer continues the one seen last (the
        screen was cleared, the history limit reached)."""
        previous = self.last_history
        new = continuation(previous, await self.capture())
        return (new, True) if new is not None else (await self.screen(), False)

    async def capture(self) -> str:
        """The whole scrollback, wrapped lines joined, trailing blank lines left out; kept as
        `last_history`."""
        # Through a file of the worker: a command's result keeps only the tail of a long output.
        with tempfile.TemporaryDirectory(prefix="envloop-terminus-") as scratch:
            path = Path(scratch) / "history"
            captured = await self.environment.exec(
                self._client("capture-pane", "-p", "-J", "-S", "-", "-t", SESSION),
                timeout=CLIENT_TIMEOUT_SEC,
                stdout_path=path,
            )
            data = path.read_bytes() if captured.exit_code == 0 and path.exists() else b""
        self.last_history = data.decode("utf-8", errors="replace").rstrip()
        return self.last_history

    async def _run(self, *args: str) -> ExecResult:
        return await self.environment.exec(self._client(*args), timeout=CLIENT_TIMEOUT_SEC)


def socket_path(environment: Environment, trial_id: str) -> str:
    """Where the server listens: in the instance's /tmp, unless that path is too long for a Unix
    socket (a plain process group's /tmp is a deep host directory), then in the system's /tmp
    under the trial's id."""
    inside = f"{environment.visible.tmp.rstrip('/')}/terminus-2.tmux"
    return inside if len(inside.encode()) <= _SOCKET_PATH_MAX else f"/tmp/envloop-terminus-{trial_id}.tmux"


def continuation(previous: str, history: str) -> str | None:
    """What `history` adds to `previous`, from the start of the last line seen (a command typed
    after a prompt shows with its prompt); None when it adds nothing or does not continue it."""
    if history == previous or not history.startswith(previous):
        return None
    return history[previous.rfind("\n") + 1 :]


def _last_line(result: ExecResult, server: "asyncio.Task[ExecResult] | None") -> str:
    """The clearest one-line reason available: the server's own last words when it ended."""
    if server is not None and server.done() and not server.cancelled() and server.exception() is None:
        ended = server.result()
        text = (ended.stderr or ended.stdout).strip()
        if text:
            return text.splitlines()[-1][:300]
        return f"its server exited with code {ended.exit_code}"
    text = (result.stderr or result.stdout).strip()
    return text.splitlines()[-1][:300] if text else f"exit code {result.exit_code}"


async def find_tmux(ctx: AgentContext) -> list[str]:
    """The command that runs tmux inside the environment: its own tmux when recent enough, else
    the worker's bundle, made visible there (recorded as an `install` step). TerminalError when
    there is neither."""
    environment = ctx.environment
    own = await environment.exec(["sh", "-c", "tmux -V"], timeout=CLIENT_TIMEOUT_SEC)
    if own.exit_code == 0 and supports_foreground(own.stdout):
        return ["tmux"]
    step = ToolStep(call_id="install", tool="install", command="tmux from the worker")
    started = time.monotonic()
    try:
        installed = await asyncio.to_thread(bundle_tmux)
        inside = await make_visible(environment, installed, probe_timeout=CLIENT_TIMEOUT_SEC)
    except (InstallError, TerminalError) as exc:
        step.exit_code, step.error = 1, str(exc)
        step.duration_ms = (time.monotonic() - started) * 1000
        ctx.recorder.add(step)
        raise TerminalError(str(exc)) from None
    made = f"bundled in {installed.install_sec:.1f} s" if installed.install_sec else "found in the cache"
    found = own.stdout.strip() or "none"
    step.exit_code = 0
    step.stdout = f"{installed.key}: {made}; at {inside} (the environment's tmux: {found})\n"
    step.duration_ms = (time.monotonic() - started) * 1000
    ctx.recorder.add(step)
    return [f"{inside}/lib/ld.so", "--library-path", f"{inside}/lib", f"{inside}/bin/tmux"]


def supports_foreground(version_line: str) -> bool:
    """Whether `tmux -V` names a tmux with `-D` (3.2 or later; `next-…` builds are newer still)."""
    words = version_line.split()
    if len(words) < 2:
        return False
    version = words[1].removeprefix("next-")
    digits = version.rstrip("abcdefghijklmnopqrstuvwxyz").split(".")[:2]
    if len(digits) < 2 or not all(d.isdigit() for d in digits):
        return False
    return (int(digits[0]), int(digits[1])) >= (3, 2)


def bundle_tmux(cache_root: Path | None = None) -> Installed:
    """The worker's tmux in the agent cache (see BUNDLE_SCRIPT). Blocks: call it on a thread."""
    program = shutil.which("tmux")
    if program is None:
        raise TerminalError("terminus-2 needs tmux: the environment has no tmux 3.2+ and the worker has none")
    version = subprocess.run([program, "-V"], capture_output=True, text=True, check=False, timeout=30)
    words = version.stdout.split()
    if version.returncode != 0 or len(words) < 2 or not supports_foreground(version.stdout):
        raise TerminalError(f"the worker's tmux is not 3.2 or later: {version.stdout.strip() or program}")
    command = InstallCommand(("sh", "-c", BUNDLE_SCRIPT, "sh", "{target}", str(Path(program).resolve())))
    name = f"tmux-{words[1]}-{host_platform()}"
    return AgentCache(cache_root).ensure(name, [command], ["bin/tmux", "lib/ld.so"])
