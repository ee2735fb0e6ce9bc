"""`claude-code`: the Claude Code CLI, run non-interactively inside the trial's environment against
the profile's Messages endpoint.

Install: unless `claude` at the profile's AGENT_VERSION (default 2.1.285) is already on the
environment's PATH, `npm install` puts `@anthropic-ai/claude-code@AGENT_VERSION` (the npm package
and its native binary) under the instance's home. That needs network, as does the endpoint, even
one on the host's loopback: in the bubblewrap sandbox the profile must set `NETWORK=host` (or the
task allow internet access); the agent refuses to start otherwise, saying so.

Run: `claude -p` reads the instruction on stdin, with `--output-format stream-json --verbose
--include-partial-messages`, permission prompts skipped (the sandbox is the boundary) and
`--max-turns` from the step budget. The endpoint comes from MODEL_BASE_URL (the root URL, as the
Messages protocol takes it), MODEL_NAME (every model role the CLI knows is pointed at it, so no
request names a model the endpoint lacks) and MODEL_API_KEY; CLAUDE_CODE_MAX_OUTPUT_TOKENS and
CLAUDE_CODE_EFFORT_LEVEL are passed through. Telemetry, error reporting, auto-update and other
non-essential traffic are switched off.

The stream becomes the trajectory while it arrives (`claude_code_stream`); the raw stream stays in
the agent's logs as `claude-code.jsonl`, masked like every artifact.
"""

import asyncio
import contextlib
import re
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

from envloop.agents.base import (
    MAX_STEPS_PARAM,
    AgentContext,
    AgentInfo,
    AgentResult,
    max_steps_problems,
    read_outputs,
)
from envloop.agents.claude_code_stream import StreamTranslator
from envloop.core.trajectory import ModelRequestSummary, ToolStep, UserStep

PACKAGE = "@anthropic-ai/claude-code"
DEFAULT_VERSION = "2.1.285"
EFFORT_LEVELS = ("low", "medium", "high", "xhigh", "max")
INSTALL_TIMEOUT_SEC = 900.0
_VERSION = re.compile(r"^[0-9A-Za-z][0-9A-Za-z.+-]{0,63}$")
_POLL_SEC = 0.05

# Prints the path of a `claude` at the wanted version, installing it first when none is found.
INSTALL_SCRIPT = r"""
want="$CLAUDE_CODE_VERSION"
for candidate in "$CLAUDE_CODE_PREFIX/bin/claude" "$(command -v claude || true)"; do
  if [ -n "$candidate" ] && [ -x "$candidate" ] &&
     [ "$("$candidate" --version 2>/dev/null | cut -d' ' -f1)" = "$want" ]; then
    echo "claude $want found at $candidate" >&2
    echo "$candidate"
    exit 0
  fi
done
command -v npm >/dev/null || { echo "npm is not installed in the environment" >&2; exit 127; }
echo "installing $CLAUDE_CODE_PACKAGE@$want" >&2
# --prefix moves npm's global config too; keep the machine's (registry, proxy, certificates).
globalconfig="$(npm config get globalconfig)"
npm install --global --prefix "$CLAUDE_CODE_PREFIX" --globalconfig "$globalconfig" --no-audit --no-fund \
  --update-notifier=false --loglevel=error "$CLAUDE_CODE_PACKAGE@$want" >&2 || exit $?
"$CLAUDE_CODE_PREFIX/bin/claude" --version >&2 || exit $?
echo "$CLAUDE_CODE_PREFIX/bin/claude"
"""

RUN_SCRIPT = (
    'exec "$0" -p --output-format stream-json --verbose --include-partial-messages '
    '--dangerously-skip-permissions --model "$ANTHROPIC_MODEL" --max-turns "$1" < "$ENVLOOP_INSTRUCTION_FILE"'
)

QUIET = {
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_BUG_COMMAND": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "IS_SANDBOX": "1",  # allows skipping permission prompts as root: the sandbox is the boundary
}
MODEL_ROLES = (
    "ANTHROPIC_MODEL",
    "ANTHROPIC_SMALL_FAST_MODEL",
    "ANTHROPIC_DEFAULT_HAIKU_MODEL",
    "ANTHROPIC_DEFAULT_SONNET_MODEL",
    "ANTHROPIC_DEFAULT_OPUS_MODEL",
    "CLAUDE_CODE_SUBAGENT_MODEL",
)


def _param(params: Mapping[str, str], name: str) -> str:
    return params.get(name, "").strip()


class ClaudeCodeAgent:
    info = AgentInfo(
        name="claude-code",
        description="the Claude Code CLI, installed in the environment, against the profile's endpoint",
        required_params=("MODEL_BASE_URL", "MODEL_NAME"),
        optional_params=(
            "MODEL_PROTOCOL",
            "MODEL_API_KEY",
            "AGENT_VERSION",
            "CLAUDE_CODE_MAX_OUTPUT_TOKENS",
            "CLAUDE_CODE_EFFORT_LEVEL",
            MAX_STEPS_PARAM,
        ),
        records_steps=True,
    )

    def check_params(self, params: Mapping[str, str]) -> list[str]:
        problems = max_steps_problems(params)
        protocol = _param(params, "MODEL_PROTOCOL")
        if protocol and protocol != "anthropic":
            problems.append(
                f"claude-code speaks the anthropic protocol, not MODEL_PROTOCOL={protocol[:40]!r}"
            )
        url = urlsplit(_param(params, "MODEL_BASE_URL"))
        if url.scheme not in ("http", "https") or not url.netloc:
            problems.append("MODEL_BASE_URL must be an http:// or https:// URL")
        version = _param(params, "AGENT_VERSION")
        if version and not _VERSION.match(version):
            problems.append(
                f"AGENT_VERSION must be an npm version such as {DEFAULT_VERSION}, not {version[:40]!r}"
            )
        tokens = _param(params, "CLAUDE_CODE_MAX_OUTPUT_TOKENS")
        if tokens and not (tokens.isdigit() and int(tokens) >= 1):
            problems.append(f"CLAUDE_CODE_MAX_OUTPUT_TOKENS must be a whole number ≥ 1, not {tokens[:40]!r}")
        effort = _param(params, "CLAUDE_CODE_EFFORT_LEVEL")
        if effort and effort not in EFFORT_LEVELS:
            problems.append(
                f"CLAUDE_CODE_EFFORT_LEVEL must be one of {', '.join(EFFORT_LEVELS)}, not {effort[:40]!r}"
            )
        return problems

    async def run(self, ctx: AgentContext) -> AgentResult:
        params = ctx.spec.params
        version = _param(params, "AGENT_VERSION") or DEFAULT_VERSION
        ctx.recorder.trajectory.protocol = "anthropic"
        ctx.recorder.add(UserStep(text=ctx.task.instruction))
        environment = ctx.environment
        if environment.mode != "plain" and not environment.limits.network:
            return AgentResult(
                exit_code=None,
                error="claude-code needs network to install the CLI and reach MODEL_BASE_URL, and this "
                f"{environment.mode} environment has none: set NETWORK=host in the profile",
            )
        claude, problem = await self._install(ctx, version)
        if claude is None:
            return AgentResult(exit_code=None, error=f"could not install Claude Code {version}: {problem}")
        return await self._run(ctx, claude, version)

    async def _install(self, ctx: AgentContext, version: str) -> tuple[str | None, str]:
        environment = ctx.environment
        out_path, err_path = ctx.log_path("install.stdout.txt"), ctx.log_path("install.stderr.txt")
        prefix = f"{environment.visible.home}/.envloop/claude-code-{version}"
        variables = {
            **ctx.env,
            "CLAUDE_CODE_VERSION": version,
            "CLAUDE_CODE_PREFIX": prefix,
            "CLAUDE_CODE_PACKAGE": PACKAGE,
        }
        step = ToolStep(
            call_id="install", tool="install", command=f"npm install --global {PACKAGE}@{version}"
        )
        result = await environment.exec(
            ["bash", "-c", INSTALL_SCRIPT],
            env=variables,
            timeout=INSTALL_TIMEOUT_SEC,
            stdout_path=out_path,
            stderr_path=err_path,
        )
        step.duration_ms = result.duration_sec * 1000
        step.exit_code, step.timed_out = result.exit_code, result.timed_out
        step.stdout, step.stderr, step.output_truncated = read_outputs(out_path, err_path, result)
        ctx.recorder.add(step)
        lines = step.stdout.strip().splitlines()
        if result.exit_code == 0 and lines:
            return lines[-1], ""
        # npm ends with a pointer to its debug log (inside the instance, gone at teardown): skip it.
        tail = [line for line in step.stderr.strip().splitlines() if "complete log of this run" not in line]
        reason = tail[-1] if tail else f"exit code {result.exit_code}"
        return None, "timed out" if result.timed_out else reason

    def _variables(self, ctx: AgentContext) -> dict[str, str]:
        params = ctx.spec.params
        model = _param(params, "MODEL_NAME")
        variables = {**ctx.env, **QUIET, **dict.fromkeys(MODEL_ROLES, model)}
        variables["ANTHROPIC_BASE_URL"] = _param(params, "MODEL_BASE_URL").rstrip("/")
        # Claude Code insists on a credential; an endpoint without authentication ignores this one.
        variables["ANTHROPIC_API_KEY"] = params.get("MODEL_API_KEY") or "no-key"
        for name in ("CLAUDE_CODE_MAX_OUTPUT_TOKENS", "CLAUDE_CODE_EFFORT_LEVEL"):
            if _param(params, name):
                variables[name] = _param(params, name)
        return variables

    async def _run(self, ctx: AgentContext, claude: str, version: str) -> AgentResult:
        environment = ctx.environment
        params = ctx.spec.params
        settings: dict[str, object] = {"agent_version": version, "max_turns": ctx.max_steps()}
        for name in ("CLAUDE_CODE_MAX_OUTPUT_TOKENS", "CLAUDE_CODE_EFFORT_LEVEL"):
            if _param(params, name):
                settings[name.lower()] = _param(params, name)
        summary = ModelRequestSummary(
            protocol="anthropic",
            endpoint=_param(params, "MODEL_BASE_URL"),
            model=_param(params, "MODEL_NAME"),
            messages=1,
            params=settings,
        )
        translator = StreamTranslator(ctx.recorder, summary, environment)
        await translator.start()
        logs = ctx.logs_dir
        stream = _StreamFile(logs / "claude-code.jsonl", translator)
        done = asyncio.Event()
        follower = asyncio.create_task(stream.follow(done))
        try:
            result = await environment.exec(
                ["bash", "-c", RUN_SCRIPT, claude, str(ctx.max_steps())],
                env=self._variables(ctx),
                stdout_path=stream.path,
                stderr_path=logs / "claude-code.stderr.txt",
            )
        finally:
            # Also on the agent timeout: the steps streamed so far still reach the trajectory.
            done.set()
            await follower
        stop, error = translator.finish()
        if stop is None and error is None:
            stderr = result.stderr.strip().splitlines()
            why = stderr[-1] if stderr else "no output"
            error = f"Claude Code exited with code {result.exit_code} without a result ({why})"
        if error is not None:
            kind = "model_error" if stop == "model_error" else "agent_error"
            return AgentResult(exit_code=result.exit_code, error=error, error_type=kind, stop_reason=stop)
        return AgentResult(exit_code=result.exit_code, stop_reason=stop)


class _StreamFile:
    """The CLI's stdout file, read while it grows: each complete line goes to the translator."""

    def __init__(self, path: Path, translator: StreamTranslator) -> None:
        self.path = path
        self.translator = translator
        self.offset = 0
        self.partial = b""
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()

    def read_new(self, final: bool = False) -> list[str]:
        """The complete lines written since the last call (with `final`, the unfinished one too)."""
        with self.path.open("rb") as handle:
            handle.seek(self.offset)
            data = handle.read()
        self.offset += len(data)
        lines = (self.partial + data).split(b"\n")
        self.partial = b"" if final else lines.pop()
        return [line.decode("utf-8", errors="replace") for line in lines if line.strip()]

    async def follow(self, done: asyncio.Event) -> None:
        """Read every poll interval until `done`, then read the rest (never cancelled half-way)."""
        while not done.is_set():
            for line in await asyncio.to_thread(self.read_new):
                await self.translator.feed(line)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), _POLL_SEC)
        for line in await asyncio.to_thread(self.read_new, True):
            await self.translator.feed(line)
