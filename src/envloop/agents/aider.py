"""`aider`: Aider, non-interactive inside the trial's environment (`--message-file`, every question
answered yes), against the profile's endpoint over Chat Completions (through litellm's `openai/`
provider).

Install (the trial's agent setup phase): `aider-chat` at AGENT_VERSION from PyPI, as wheels for the
environment's own `python3` (3.10 to 3.12, as Aider requires) compiled to bytecode, once per worker
and Python, into the agent cache.

Run: `python3 -m aider` with the instruction as its one message, no git (the task's verifier judges
the working directory, not commits), no repository map, no update check, analytics, URL detection
or download of litellm's model table (a model metadata file names the model), and no offer of its
release notes (every trial's home is new, so each run is Aider's first: answered yes, the offer
opens a browser, a console one where the image has one); the model
`openai/MODEL_NAME` at MODEL_BASE_URL, AIDER_EDIT_FORMAT, REASONING_EFFORT and TEMPERATURE (through
a model settings file). Aider does not call tools: it answers with edits, which
it applies, and may run the shell commands it suggests. Its LLM history (`aider.llm-history.txt`)
gives a model step per response; each "Applied edit to FILE" it prints is an `edit` tool step, and
the working directory's changes follow as a state step. Its chat history is kept too. A run cut
short (its timeout, a cancelled trial) keeps what Aider recorded up to then.
"""

import contextlib
import json
import re

from envloop.agents.base import AgentContext, AgentInfo, AgentResult
from envloop.agents.cli_agent import (
    CliAgent,
    CliStart,
    OpenAICliParams,
    cli_result,
    read_lines,
    record_changes,
    run_cli,
    version_param,
    write_config,
)
from envloop.agents.recipes import PipRecipe, site_dir
from envloop.core.params import param
from envloop.core.trajectory import ModelRequestSummary, ModelStep, ToolStep, TrajectoryRecorder

DEFAULT_VERSION = "0.86.2"
RECIPE = PipRecipe(
    label="aider", package="aider-chat", module="aider", min_python=(3, 10), max_python=(3, 12)
)
RUN_SCRIPT = (
    'exec "$@" --message-file "$ENVLOOP_INSTRUCTION_FILE" --model "openai/$ENVLOOP_AIDER_MODEL" '
    '--openai-api-base "$ENVLOOP_AIDER_BASE" --yes-always --no-git --no-auto-commits --no-dirty-commits '
    "--map-tokens 0 --no-check-update --analytics-disable --no-detect-urls --no-show-model-warnings "
    "--no-show-release-notes "
    '--no-pretty --no-fancy-input --no-stream --model-settings-file "$ENVLOOP_AIDER_SETTINGS" '
    '--llm-history-file "$ENVLOOP_AIDER_LOGS/aider.llm-history.txt" '
    '--chat-history-file "$ENVLOOP_AIDER_LOGS/aider.chat-history.md" '
    '--input-history-file "$ENVLOOP_AIDER_LOGS/aider.input-history.txt" '
    '${ENVLOOP_AIDER_EDIT_FORMAT:+--edit-format "$ENVLOOP_AIDER_EDIT_FORMAT"} '
    '${ENVLOOP_AIDER_EFFORT:+--reasoning-effort "$ENVLOOP_AIDER_EFFORT"}'
)
_APPLIED = re.compile(r"^Applied edit to (.+)$")
_RESPONSE = "LLM RESPONSE "
_REQUEST = "TO LLM "
_FAILURES = ("litellm.", "APIConnectionError", "AuthenticationError", "NotFoundError", "BadRequestError")


class AiderParams(OpenAICliParams):
    """The endpoint, the package's version, the edit format, reasoning effort and temperature."""

    AGENT_VERSION: str = version_param("aider-chat", DEFAULT_VERSION)
    AIDER_EDIT_FORMAT: str | None = param(
        "Aider's --edit-format (whole, diff, udiff, …); Aider's choice for the model when unset",
        pattern=r"^[a-z-]{1,32}$",
        expect="an edit format such as whole or diff",
    )
    REASONING_EFFORT: str | None = param(
        "Aider's --reasoning-effort", pattern=r"^[a-z]{1,16}$", expect="an effort such as low or high"
    )
    TEMPERATURE: float | None = param("the sampling temperature; Aider's default (0) when unset", ge=0)


def model_settings(params: AiderParams) -> str:
    """Aider's model settings for the profile's model (JSON is YAML)."""
    settings: dict[str, object] = {"name": f"openai/{params.MODEL_NAME}"}
    if params.TEMPERATURE is not None:
        settings["use_temperature"] = params.TEMPERATURE
    return json.dumps([settings])


def model_metadata(params: AiderParams) -> str:
    """What Aider knows of the profile's model without asking the network: an OpenAI-compatible
    chat model. Without an entry Aider downloads litellm's table of models at every start, which in
    a sandbox without network waits for name resolution to give up, in the agent's time."""
    return json.dumps({f"openai/{params.MODEL_NAME}": {"litellm_provider": "openai", "mode": "chat"}})


def read_llm_history(
    lines: list[str], recorder: TrajectoryRecorder, summary: ModelRequestSummary, model_steps: bool
) -> int:
    """A model step per response in Aider's LLM history (a failed call logs an empty one); returns
    how many responses said something."""
    answers: list[tuple[int, list[str]]] = []
    messages, answering = 1, False
    for line in lines:
        if line.startswith(_RESPONSE):
            answers.append((messages, []))
            answering = True
        elif line.startswith(_REQUEST):
            messages += 1
            answering = False
        elif answering:
            answers[-1][1].append(line)
    said = 0
    for count, answer in answers:
        text = "\n".join(line.removeprefix("ASSISTANT ") for line in answer).strip()
        said += bool(text)
        if model_steps:
            request = summary.model_copy(update={"messages": count})
            recorder.add(ModelStep(request=request, text=text, stop="end" if text else "other"))
    return said


async def _read_record(ctx: AgentContext, summary: ModelRequestSummary) -> tuple[int, list[str]]:
    """Aider's record of its run as steps: its LLM history (model steps unless the gateway records
    the calls) and each edit it printed as applied. How many responses said something, and its
    output's lines."""
    logs = ctx.environment.visible.agent_logs
    history = await ctx.environment.read_file(f"{logs}/aider.llm-history.txt", 64 << 20)
    lines = (history or b"").decode(errors="replace").splitlines()
    said = read_llm_history(lines, ctx.recorder, summary, not ctx.model_gateway)
    output = read_lines(ctx.log_path("aider.stdout.txt"))
    for number, line in enumerate(output):
        applied = _APPLIED.match(line.strip())
        if applied:
            path = applied.group(1)
            ctx.recorder.add(
                ToolStep(call_id=f"edit-{number}", tool="edit", arguments={"path": path}, stdout=line)
            )
    return said, output


class AiderAgent(CliAgent[AiderParams]):
    info = AgentInfo(
        name="aider",
        description="Aider (edits answered in text, applied to the working directory) over Chat Completions",
        records_steps=True,
        calls_model_inside="openai",
        steps_limited_by_gateway=True,
    )
    params_model = AiderParams
    recipe = RECIPE

    async def drive(self, ctx: AgentContext, started: CliStart[AiderParams]) -> AgentResult:
        params, inside = started.params, started.provisioned.inside
        environment = ctx.environment
        logs = environment.visible.agent_logs
        settings = await write_config(ctx, "aider.model.settings.yml", model_settings(params))
        metadata = await write_config(ctx, "aider.model.metadata.json", model_metadata(params))
        variables = {
            "PYTHONPATH": site_dir(inside),
            "PYTHONDONTWRITEBYTECODE": "1",
            "OPENAI_API_KEY": params.MODEL_API_KEY or "no-key",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            # Else litellm's import looks for a .env file from the task's directory up and loads it.
            "LITELLM_MODE": "PRODUCTION",
            "ENVLOOP_AIDER_MODEL": params.MODEL_NAME,
            "ENVLOOP_AIDER_BASE": params.MODEL_BASE_URL.rstrip("/"),
            "ENVLOOP_AIDER_SETTINGS": settings,
            "ENVLOOP_AIDER_LOGS": logs,
            "ENVLOOP_AIDER_EDIT_FORMAT": params.AIDER_EDIT_FORMAT or "",
            "ENVLOOP_AIDER_EFFORT": params.REASONING_EFFORT or "",
        }
        argv = ["bash", "-c", RUN_SCRIPT, "aider", *RECIPE.argv(), "--model-metadata-file", metadata]
        summary = params.request_summary(
            {"edit_format": params.AIDER_EDIT_FORMAT, "temperature": params.TEMPERATURE}
        )
        try:
            result = await run_cli(ctx, argv, variables, "aider.stdout.txt", "aider.stderr.txt")
        except BaseException:
            # Cut short (its timeout, a cancelled trial): what Aider recorded so far is kept.
            with contextlib.suppress(Exception):
                await _read_record(ctx, summary)
            raise
        said, output = await _read_record(ctx, summary)
        await record_changes(ctx, started.before, "aider")
        failure = next(
            (line for line in output + result.stderr.splitlines() if line.startswith(_FAILURES)), None
        )
        if failure is not None and said == 0:
            return cli_result(result, "model_error", f"the model endpoint failed: {failure[:400]}", "aider")
        return cli_result(result, "done" if result.exit_code == 0 else None, None, "aider")
