"""`terminus-2`: Harbor's reference agent, written for envloop from its published description. A
model drives a tmux session inside the trial's environment with keystrokes, as a person at a
terminal would: it reads the screen, types, waits, and reads the screen again.

One turn is one model call, made from the worker (no key ever enters the sandbox) through the
worker's model gateway like every CLI agent's (runners/model_route.py): the gateway records each
call as a model step, also one in progress when the agent phase is cut by its timeout. The model
answers with one JSON object (agents/terminus_reply.py): its analysis, its plan, the keystrokes to
type with how long to wait after each (at most MAX_WAIT_SEC), and whether the task is complete.
Each entry is typed into the session, the agent waits, then reads what appeared since its last look
(`capture-pane` of the whole scrollback; when the scrollback no longer continues the last one, the
visible screen instead). The model sees at most OUTPUT_LIMIT characters of it (head and tail); the
trajectory keeps it whole, one `keystrokes` tool step per entry with the working directory's
changes, and every model call as a model step with its tokens (the gateway's; this agent records
them itself only when run without one). The first `task_complete` is answered with the screen and a
request to confirm; the second one in a row ends the loop (`done`). An answer that cannot be read is
answered with what was wrong, and costs a turn.

The loop also ends when the step budget is spent (`max_steps`: the job's `--max-steps`, else the
profile's MAX_STEPS), when the session's shell exits (`done`), or when the endpoint fails for good
(`model_error`). The agent timeout is the runner's; the steps recorded up to it stay.

Long attempts: with CONTEXT_TOKENS (the model's context window) set, once a call's prompt and answer
come within a quarter of it (at most 8,000 tokens), and whenever the endpoint refuses a request as
too long, the model is asked to summarise its progress, and the conversation starts again from the
first prompt, that summary and the current screen (the summary call is a model step of its own and
does not count as a turn).
"""

import asyncio
import re
import time

from envloop.agents.base import DEFAULT_MAX_STEPS, AgentContext, AgentInfo, AgentResult
from envloop.agents.envloop_agent import clip_for_model
from envloop.agents.terminus_reply import (
    CONFIRM_PROMPT,
    FIRST_PROMPT,
    KEY_NAMES,
    RESUME_PROMPT,
    SUMMARY_REQUEST,
    Keystrokes,
    feedback,
    read_reply,
    retry_prompt,
)
from envloop.agents.terminus_tmux import Terminal, TerminalError, continuation, find_tmux, socket_path
from envloop.core.clock import utc_now
from envloop.core.masking import mask_text
from envloop.core.params import param, read_params
from envloop.core.status import ErrorType
from envloop.core.trajectory import StopReason, ToolStep, UserStep
from envloop.models import (
    Message,
    ModelClient,
    ModelError,
    ModelParams,
    ModelRequest,
    ModelResponse,
    model_client,
)
from envloop.trajectories import Snapshot, changes_between
from envloop.trajectories.model_steps import model_step, request_summary

DEFAULT_MAX_WAIT_SEC = 60.0
DEFAULT_OUTPUT_LIMIT = 10_000
_SUMMARY_RESERVE_TOKENS = 8_000
_TOO_LONG = re.compile(r"context|too long|too many tokens|maximum.{0,40}tokens", re.IGNORECASE)


class TerminusParams(ModelParams):
    """The endpoint's params, the step budget, and how the terminal is shown and waited on."""

    MAX_STEPS: int | None = param(
        f"the step budget when the job gives no --max-steps (default {DEFAULT_MAX_STEPS})", ge=1
    )
    MAX_WAIT_SEC: float = param(
        "the longest wait after one entry of keystrokes, in seconds", default=DEFAULT_MAX_WAIT_SEC, gt=0
    )
    OUTPUT_LIMIT: int = param(
        "characters of terminal output the model sees per turn (head and tail)",
        default=DEFAULT_OUTPUT_LIMIT,
        gt=0,
    )
    PANE_WIDTH: int = param("the terminal's width in columns", default=160, ge=20, le=1000)
    PANE_HEIGHT: int = param("the terminal's height in lines", default=40, ge=5, le=1000)
    CONTEXT_TOKENS: int | None = param(
        "the model's context window: summarise the conversation before it fills (unset: only when "
        "the endpoint refuses a request as too long)",
        ge=1000,
    )


class TerminusAgent:
    info = AgentInfo(
        name="terminus-2",
        description="Harbor's reference agent: a model types keystrokes into a tmux session",
        records_steps=True,
        calls_model_inside="openai",
        model_calls_from="worker",
    )
    params_model = TerminusParams

    async def run(self, ctx: AgentContext) -> AgentResult:
        params, problems = read_params(TerminusParams, ctx.spec.params)
        if params is None:
            return AgentResult(exit_code=None, error="; ".join(problems), error_type=ErrorType.MODEL_ERROR)
        try:
            tmux = await find_tmux(ctx)
        except TerminalError as exc:
            return _not_started(str(exc))
        terminal = Terminal(
            environment=ctx.environment,
            tmux=tmux,
            socket=socket_path(ctx.environment, ctx.spec.trial_id),
            width=params.PANE_WIDTH,
            height=params.PANE_HEIGHT,
        )
        try:
            try:
                await terminal.open(dict(ctx.env), ctx.environment.visible.app)
            except TerminalError as exc:
                return _not_started(str(exc))
            return await _Turns(ctx, params, terminal).run()
        finally:
            _keep(ctx, terminal)
            await terminal.close()


def _not_started(message: str) -> AgentResult:
    """No terminal, no attempt: the verifier does not run, and the trial has no reward."""
    return AgentResult(exit_code=None, error=message, error_type=ErrorType.ENVIRONMENT_ERROR, attempted=False)


def _keep(ctx: AgentContext, terminal: Terminal) -> None:
    """The terminal's scrollback as last read, with the agent's logs (also when the phase was cut)."""
    path = ctx.log_path("terminal.txt")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(mask_text(terminal.last_history, ctx.spec.secret_values) + "\n")


class _Turns:
    """One attempt's conversation: a prompt, the model's keystrokes typed, the terminal read back."""

    def __init__(self, ctx: AgentContext, params: TerminusParams, terminal: Terminal) -> None:
        self.ctx = ctx
        self.terminal = terminal
        self.settings = params.settings()
        self.client: ModelClient = model_client(self.settings)
        self.max_steps = ctx.max_steps(params.MAX_STEPS)
        self.max_wait = params.MAX_WAIT_SEC
        self.output_limit = params.OUTPUT_LIMIT
        self.context_tokens = params.CONTEXT_TOKENS
        self.secrets = ctx.spec.secret_values
        self.messages: list[Message] = []
        self.state: Snapshot = {}

    def _first_prompt(self, screen: str) -> str:
        return FIRST_PROMPT.format(
            instruction=self.ctx.task.instruction.strip(),
            keys=", ".join(KEY_NAMES),
            max_duration=self.max_wait,
            screen=screen,
        )

    async def run(self) -> AgentResult:
        self.state = await self.ctx.environment.snapshot()
        prompt = self._first_prompt(await self._look())
        self.ctx.recorder.add(UserStep(text=prompt))
        confirming = False
        for turn in range(1, self.max_steps + 1):
            if not await self.terminal.alive():
                return AgentResult(stop_reason="done")
            response = await self._ask(prompt)
            if isinstance(response, ModelError):
                return _model_failure(response, self.secrets)
            reading = read_reply(response.text, self.max_wait)
            if reading.error is not None:
                cut = " (your answer was cut by the output token limit: keep it shorter)"
                prompt = retry_prompt(reading.error + (cut if response.stop == "length" else ""))
                continue
            output, stop = await self._type(reading.commands, turn)
            if stop is not None:
                return AgentResult(stop_reason=stop)
            if reading.task_complete and confirming:
                return AgentResult(stop_reason="done")
            confirming = reading.task_complete
            note = feedback(reading)
            if confirming:
                prompt = CONFIRM_PROMPT.format(screen=output)
            else:
                prompt = f"{note}\n\n{output}" if note else output
            if self._near_the_limit(response):
                prompt = await self._summarised() or prompt
        return AgentResult(stop_reason="max_steps")

    async def _look(self) -> str:
        """The screen now, and the point the next increment starts from."""
        await self.terminal.capture()
        return await self.terminal.screen()

    async def _ask(self, prompt: str) -> ModelResponse | ModelError:
        """One turn's call; a request the endpoint refuses as too long is summarised and sent again."""
        self.messages.append(Message(role="user", content=mask_text(prompt, self.secrets)))
        response = await self._call(self.messages)
        if isinstance(response, ModelError) and _too_long(response) and len(self.messages) > 2:
            resumed = await self._summarised(drop_last=True)
            if resumed is not None:
                self.messages.append(Message(role="user", content=mask_text(resumed, self.secrets)))
                response = await self._call(self.messages)
        if isinstance(response, ModelResponse):
            self.messages.append(response.message)
        return response

    async def _call(self, messages: list[Message]) -> ModelResponse | ModelError:
        request = ModelRequest(messages=list(messages), system=self.settings.system_prompt)
        summary = request_summary(self.settings, request)
        started = utc_now()
        try:
            response = await self.client.complete(request)
        except ModelError as exc:
            if not self.ctx.model_gateway:
                self.ctx.recorder.add(model_step(started, summary, None, exc.message, exc.attempts))
            return exc
        if not self.ctx.model_gateway:
            self.ctx.recorder.add(model_step(started, summary, response))
        return response

    async def _type(self, commands: list[Keystrokes], turn: int) -> tuple[str, StopReason | None]:
        """Type each entry, wait, read; what the model is shown next (and a stop reason when the
        terminal is gone). Each entry is a tool step with what appeared after it."""
        before = self.terminal.last_history
        for index, command in enumerate(commands, start=1):
            step = ToolStep(
                call_id=f"call_{turn}_{index}",
                tool="keystrokes",
                arguments={"keystrokes": command.keys, "duration": command.duration_sec},
                command=command.keys,
            )
            clock = time.perf_counter()
            try:
                await self.terminal.type(command.keys)
                await asyncio.sleep(command.duration_sec)
                text, _ = await self.terminal.increment()
            except TerminalError as exc:
                step.error = str(exc)
                await self._record(step, clock)
                return "", "done"
            except BaseException:
                step.error = "interrupted: the agent phase ended while the keystrokes ran"
                await self._record(step, clock, cancelled=True)
                raise
            step.stdout = text
            await self._record(step, clock)
        if not commands:
            await self.terminal.capture()
        new = continuation(before, self.terminal.last_history)
        if new is not None:
            shown = "New Terminal Output:\n" + new
        else:
            shown = "Current Terminal Screen:\n" + await self.terminal.screen()
        return mask_text(clip_for_model(shown, self.output_limit), self.secrets), None

    async def _record(self, step: ToolStep, clock: float, *, cancelled: bool = False) -> None:
        """The step with its duration and the working directory's changes since the last one."""
        step.duration_ms = (time.perf_counter() - clock) * 1000
        try:
            after = await self.ctx.environment.snapshot(self.state)
        except Exception:
            if not cancelled:
                raise
            after = self.state  # the cancellation goes on whatever the snapshot met
        step.changes, self.state = changes_between(self.state, after), after
        self.ctx.recorder.add(step)

    def _near_the_limit(self, response: ModelResponse) -> bool:
        if self.context_tokens is None:
            return False
        reserve = min(_SUMMARY_RESERVE_TOKENS, self.context_tokens // 4)
        used = response.usage.input_tokens + response.usage.output_tokens
        return used > self.context_tokens - reserve

    async def _summarised(self, *, drop_last: bool = False) -> str | None:
        """Ask for a summary of the conversation and start a new one from it: the next prompt, or
        None when no summary could be had (the conversation then goes on as it was). `drop_last`
        leaves out the prompt the endpoint just refused."""
        history = self.messages[:-1] if drop_last else list(self.messages)
        keep = len(history)
        while keep >= 1:
            response = await self._call(_summary_request(history, keep))
            if isinstance(response, ModelResponse):
                break
            if not _too_long(response):
                return None
            keep //= 2  # even the summary's request is too long: the oldest turns go first
        else:
            return None
        prompt = RESUME_PROMPT.format(
            first=self._first_prompt(await self._look()), summary=response.text.strip()
        )
        self.ctx.recorder.add(UserStep(text=prompt))
        self.messages = []
        return prompt


def _summary_request(history: list[Message], keep: int) -> list[Message]:
    """The first prompt, the last turns (`keep` messages in all) and the request for a summary."""
    tail = history[len(history) - keep + 1 :] if keep < len(history) else history[1:]
    if tail and tail[0].role == "user":
        tail = tail[1:]
    asked = [*history[:1], *tail]
    if asked[-1].role == "user":
        return [*asked[:-1], Message(role="user", content=f"{asked[-1].content}\n\n{SUMMARY_REQUEST}")]
    return [*asked, Message(role="user", content=SUMMARY_REQUEST)]


def _too_long(error: ModelError) -> bool:
    return error.kind == "bad_request" and _TOO_LONG.search(error.message) is not None


def _model_failure(error: ModelError, secrets: tuple[str, ...]) -> AgentResult:
    return AgentResult(
        exit_code=None,
        error=mask_text(error.message, secrets),
        error_type=ErrorType.MODEL_ERROR,
        stop_reason="model_error",
    )


__all__ = ["TerminusAgent", "TerminusParams"]
