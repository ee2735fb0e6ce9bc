"""`envloop/chat@1`: one JSONL row attempted by a model endpoint, the answer scored by the dataset's
scorer.

agent phase: the prompt (after the profile's `SYSTEM_PROMPT`, if any) goes to the endpoint named by
`MODEL_PROTOCOL` / `MODEL_BASE_URL` / `MODEL_NAME`, bounded by the job's agent timeout when it has
one → verifier phase: the answer is scored (`exact`, `includes`, `regex`, `numeric`, or a plugin's
scorer: a worker without it fails the trial before the model is called) → artifacts:
`trajectory.json` alone, secrets masked: its score step holds the scorer, the expected and the raw
answer, the reward and the explanation. A call that fails for good (after retries for rate limits
and transient errors) fails the trial as `model_error` with the server's message and no reward. An
answer cut short by the output token limit is still scored, and the trial's stop reason says
`length`.
"""

import asyncio
from collections.abc import Mapping

from envloop.core.clock import utc_now
from envloop.core.masking import mask_outcome, mask_text
from envloop.core.params import ParamReader
from envloop.core.reward import reward_problem
from envloop.core.status import ErrorType, Phase, TrialStatus
from envloop.core.trajectory import (
    ScoreStep,
    StopReason,
    SystemStep,
    TrajectoryRecorder,
    UserStep,
    usage_totals,
)
from envloop.core.trial import PhaseRecord, TrialError, TrialOutcome, TrialSpec, crashed
from envloop.models import (
    Message,
    ModelError,
    ModelParams,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    model_client,
    read_model_settings,
)
from envloop.plugins import ComponentError
from envloop.runners.base import ComponentInfo, TaskKind
from envloop.runners.params import missing_here
from envloop.tasks.model import ChatRow
from envloop.tasks.scorers import ScoreResult, find_scorer, score
from envloop.trajectories.files import write_trajectory
from envloop.trajectories.model_steps import model_step, request_summary


class ChatRunner:
    ref = "envloop/chat@1"
    task_kind: TaskKind = "chat"
    description = "JSONL rows: each prompt goes to a model endpoint, the dataset's scorer scores the answer"

    params_model = ModelParams

    def param_readers(self, params: Mapping[str, str]) -> list[ParamReader]:
        return [ParamReader(label=f"runner {self.ref}", model=ModelParams)]

    def components(self) -> list[ComponentInfo]:
        return []

    async def run(self, spec: TrialSpec) -> TrialOutcome:
        phases: list[PhaseRecord] = []
        try:
            outcome = await self._run(spec, phases)
        except Exception as exc:
            outcome = crashed(exc, phases)
        return mask_outcome(outcome, spec.secret_values)

    async def _run(self, spec: TrialSpec, phases: list[PhaseRecord]) -> TrialOutcome:
        if spec.row is None or spec.scorer is None:
            raise ValueError("a chat trial needs its dataset row and scorer")
        row, scorer = ChatRow.model_validate(spec.row), spec.scorer
        try:
            find_scorer(scorer)
        except ComponentError as exc:
            # The server had it at push time, so it is this worker that lacks it.
            return TrialOutcome(status=TrialStatus.FAILED, error=missing_here(exc))
        settings, problems = read_model_settings(spec.params)
        if settings is None:
            message = mask_text("; ".join(problems), spec.secret_values)
            return TrialOutcome(
                status=TrialStatus.FAILED, error=TrialError(type=ErrorType.MODEL_ERROR, message=message)
            )
        recorder = TrajectoryRecorder(
            spec.trial_id, self.ref, agent="chat", model=settings.model, protocol=settings.protocol
        )
        if settings.system_prompt:
            recorder.add(SystemStep(text=settings.system_prompt))
        recorder.add(UserStep(text=row.prompt))
        request = ModelRequest(
            messages=[Message(role="user", content=row.prompt)], system=settings.system_prompt
        )
        response, error = await self._agent_phase(spec, settings, request, recorder, phases)
        result = None if response is None else self._verifier_phase(scorer, row, response, recorder, phases)
        stop = self._stop_reason(response, error)
        trajectory = recorder.finish(stop)
        started = utc_now()
        spec.artifacts_dir.mkdir(parents=True, exist_ok=True)
        write_trajectory(spec.artifacts_dir, trajectory, spec.secret_values)
        phases.append(PhaseRecord(name=Phase.ARTIFACTS, started_at=started, ended_at=utc_now()))
        usage = usage_totals(trajectory)
        if result is None:
            return TrialOutcome(
                status=TrialStatus.FAILED,
                error=error,
                reward_note="the model gave no answer to score",
                phases=phases,
                usage=usage,
                stop_reason=stop,
            )
        problem = None if result.reward is None else reward_problem(result.reward)
        if result.reward is None or problem is not None:
            message = mask_text(problem or result.explanation, spec.secret_values)
            return TrialOutcome(
                status=TrialStatus.FAILED,
                error=TrialError(type=ErrorType.VERIFIER_ERROR, message=message),
                reward_note=message,
                phases=phases,
                usage=usage,
                stop_reason=stop,
            )
        return TrialOutcome(
            status=TrialStatus.COMPLETED, reward=result.reward, phases=phases, usage=usage, stop_reason=stop
        )

    @staticmethod
    def _verifier_phase(
        scorer: str,
        row: ChatRow,
        response: ModelResponse,
        recorder: TrajectoryRecorder,
        phases: list[PhaseRecord],
    ) -> ScoreResult:
        started = utc_now()
        result = score(scorer, response.text, row.answer)
        ended = utc_now()
        recorder.add(
            ScoreStep(
                at=started,
                duration_ms=(ended - started).total_seconds() * 1000,
                scorer=scorer,
                expected=row.answer,
                answer=response.text,
                reward=result.reward,
                explanation=result.explanation,
            )
        )
        phases.append(PhaseRecord(name=Phase.VERIFIER, started_at=started, ended_at=ended))
        return result

    async def _agent_phase(
        self,
        spec: TrialSpec,
        settings: ModelSettings,
        request: ModelRequest,
        recorder: TrajectoryRecorder,
        phases: list[PhaseRecord],
    ) -> tuple[ModelResponse | None, TrialError | None]:
        summary = request_summary(settings, request)
        started = utc_now()
        response: ModelResponse | None = None
        try:
            async with asyncio.timeout(spec.agent_timeout_sec) as deadline:
                response = await model_client(settings).complete(request)
        except TimeoutError:
            if not deadline.expired():
                raise
            recorder.add(model_step(started, summary, None, "no answer before the agent timeout"))
            phases.append(
                PhaseRecord(name=Phase.AGENT, started_at=started, ended_at=utc_now(), timed_out=True)
            )
            message = f"the model did not answer within the {spec.agent_timeout_sec:g} s agent timeout"
            return None, TrialError(type=ErrorType.AGENT_TIMEOUT, message=message)
        except ModelError as exc:
            recorder.add(model_step(started, summary, None, exc.message, exc.attempts))
            phases.append(PhaseRecord(name=Phase.AGENT, started_at=started, ended_at=utc_now()))
            return None, TrialError(
                type=ErrorType.MODEL_ERROR, message=mask_text(exc.message, spec.secret_values)
            )
        recorder.add(model_step(started, summary, response))
        phases.append(PhaseRecord(name=Phase.AGENT, started_at=started, ended_at=utc_now()))
        return response, None

    @staticmethod
    def _stop_reason(response: ModelResponse | None, error: TrialError | None) -> StopReason:
        if error is not None:
            return "timeout" if error.type == ErrorType.AGENT_TIMEOUT else "model_error"
        if response is not None and response.stop == "length":
            return "length"
        return "done"
