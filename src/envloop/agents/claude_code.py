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
from pathlib import Path
from typing import Literal

from envloop.agents.base import (
    AgentContext,
    AgentInfo,
    AgentResult,
    StepBudgetParams,
    read_outputs,
)
from envloop.agents.claude_code_stream import StreamTranslator
from envloop.agents.mcp import claude_mcp_config
from envloop.core.params import param, read_params, secret_param
from envloop.core.trajectory import ModelRequestSummary, ToolStep, UserStep
from envloop.models.settings import HttpUrlText

PACKAGE = "@anthropic-ai/claude-code"
DEFAULT_VERSION = "2.1.285"
INSTALL_TIMEOUT_SEC = 900.0
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
install() {
  npm install --global --prefix "$CLAUDE_CODE_PREFIX" --globalconfig "$globalconfig" --no-audit --no-fund \
    --update-notifier=false --loglevel=error "$CLAUDE_CODE_PACKAGE@$want" >&2
}
install || exit $?
# npm leaves out an optional dependency it could not fetch and still succeeds; Claude Code's native
# binary is one. A CLI that does not start is installed once more, from nothing.
if ! "$CLAUDE_CODE_PREFIX/bin/claude" --version >/dev/null 2>&1; then
  echo "the installed claude does not start; installing it again" >&2
  rm -rf "$CLAUDE_CODE_PREFIX"
  install || exit $?
fi
"$CLAUDE_CODE_PREFIX/bin/claude" --version >&2 || exit $?
echo "$CLAUDE_CODE_PREFIX/bin/claude"
"""

RUN_SCRIPT = (
    'exec "$0" -p --output-format stream-json --verbose --include-partial-messages '
    '--dangerously-skip-permissions --model "$ANTHROPIC_MODEL" --max-turns "$1" '
    '${ENVLOOP_MCP_CONFIG:+--mcp-config "$ENVLOOP_MCP_CONFIG"} < "$ENVLOOP_INSTRUCTION_FILE"'
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


class ClaudeCodeParams(StepBudgetParams):
    """The Messages endpoint, the CLI's version and the settings passed through to it."""

    MODEL_PROTOCOL: Literal["anthropic"] | None = param(
        "the protocol: claude-code speaks only anthropic (Messages)",
        expect="anthropic (claude-code speaks the Messages protocol only)",
    )
    MODEL_BASE_URL: HttpUrlText = param(
        "the Messages endpoint's root URL", default=..., expect="an http:// or https:// URL"
    )
    MODEL_NAME: str = param("the model every role of the CLI is pointed at", default=...)
    MODEL_API_KEY: str | None = secret_param("the endpoint's credential")
    AGENT_VERSION: str = param(
        "the @anthropic-ai/claude-code version to run",
        default=DEFAULT_VERSION,
        pattern=r"^[0-9A-Za-z][0-9A-Za-z.+-]{0,63}$",
        expect=f"an npm version such as {DEFAULT_VERSION}",
    )
    CLAUDE_CODE_MAX_OUTPUT_TOKENS: int | None = param("passed through to the CLI", ge=1)
    CLAUDE_CODE_EFFORT_LEVEL: Literal["low", "medium", "high", "xhigh", "max"] | None = param(
        "passed through to the CLI"
    )

    def passed_through(self) -> dict[str, str]:
        """The CLI's own settings that are set, by their variable names."""
        named = {
            "CLAUDE_CODE_MAX_OUTPUT_TOKENS": self.CLAUDE_CODE_MAX_OUTPUT_TOKENS,
            "CLAUDE_CODE_EFFORT_LEVEL": self.CLAUDE_CODE_EFFORT_LEVEL,
        }
        return {name: str(value) for name, value in named.items() if value is not None}


class ClaudeCodeAgent:
    info = AgentInfo(
        name="claude-code",
        description="the Claude Code CLI, installed in the environment, against the profile's endpoint",
        records_steps=True,
        speaks_mcp=True,
    )
    params_model = ClaudeCodeParams

    async def run(self, ctx: AgentContext) -> AgentResult:
        params, problems = read_params(ClaudeCodeParams, ctx.spec.params)
        if params is None:
            return AgentResult(exit_code=None, error="; ".join(problems))
        version = params.AGENT_VERSION
        ctx.recorder.trajectory.protocol = "anthropic"
        ctx.recorder.add(UserStep(text=ctx.task.instruction))
        environment = ctx.environment
        if environment.mode != "plain" and environment.network.mode == "no-network":
            return AgentResult(
                exit_code=None,
                error="claude-code needs network to install the CLI and reach MODEL_BASE_URL, and this "
                f"{environment.mode} environment has none: set NETWORK=host in the profile",
            )
        claude, problem = await self._install(ctx, version)
        if claude is None:
            return AgentResult(
                exit_code=None, error=f"could not install Claude Code {version}: {problem}", attempted=False
            )
        return await self._run(ctx, params, claude)

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

    def _variables(self, ctx: AgentContext, params: ClaudeCodeParams) -> dict[str, str]:
        variables = {**ctx.env, **QUIET, **dict.fromkeys(MODEL_ROLES, params.MODEL_NAME)}
        variables["ANTHROPIC_BASE_URL"] = params.MODEL_BASE_URL.rstrip("/")
        # Claude Code insists on a credential; an endpoint without authentication ignores this one.
        variables["ANTHROPIC_API_KEY"] = params.MODEL_API_KEY or "no-key"
        variables.update(params.passed_through())
        return variables

    async def _run(self, ctx: AgentContext, params: ClaudeCodeParams, claude: str) -> AgentResult:
        environment = ctx.environment
        max_turns = ctx.max_steps(params.MAX_STEPS)
        settings: dict[str, object] = {"agent_version": params.AGENT_VERSION, "max_turns": max_turns}
        settings.update({name.lower(): value for name, value in params.passed_through().items()})
        summary = ModelRequestSummary(
            protocol="anthropic",
            endpoint=params.MODEL_BASE_URL,
            model=params.MODEL_NAME,
            messages=1,
            params=settings,
        )
        translator = StreamTranslator(ctx.recorder, summary, environment)
        await translator.start()
        variables = self._variables(ctx, params)
        servers = ctx.task.config.environment.mcp_servers
        if servers:
            config = f"{environment.visible.home}/.envloop/mcp.json"
            await environment.write_file(config, claude_mcp_config(servers).encode())
            variables["ENVLOOP_MCP_CONFIG"] = config
        logs = ctx.logs_dir
        stream = _StreamFile(logs / "claude-code.jsonl", translator)
        done = asyncio.Event()
        follower = asyncio.create_task(stream.follow(done))
        try:
            result = await environment.exec(
                ["bash", "-c", RUN_SCRIPT, claude, str(max_turns)],
                env=variables,
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
