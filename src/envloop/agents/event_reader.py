"""What every streaming CLI agent's event reader keeps (`codex_events.py`, `gemini_events.py`,
`opencode_events.py`, `qwen_events.py`): the trajectory it records into, the summary each model
step's request starts from, whether model steps are recorded at all (not when the model gateway
records the calls itself), the model step open now and how many messages the model has been sent."""

from envloop.core.trajectory import ModelRequestSummary, ModelStep, TrajectoryRecorder


class EventReader:
    """The state a reader of a CLI's event stream starts with, and how it opens a model step."""

    def __init__(self, recorder: TrajectoryRecorder, summary: ModelRequestSummary, model_steps: bool) -> None:
        self.recorder = recorder
        self.summary = summary
        self.model_steps = model_steps
        self.current: ModelStep | None = None
        self.messages = 1

    def open_model_step(self, stop: str | None = None) -> ModelStep:
        """A new current model step, sent the messages so far; recorded when model steps are."""
        self.current = ModelStep(
            request=self.summary.model_copy(update={"messages": self.messages}), stop=stop
        )
        if self.model_steps:
            self.recorder.add(self.current)
        return self.current
