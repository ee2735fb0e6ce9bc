"""The operations on one attempt: a trial's record, files and trajectory, and rollouts.

Declared once each; `envloop.operations.declared` gathers them (see there).
"""

from typing import cast

from envloop.operations import services
from envloop.operations.kinds import PROGRESS_STREAM, Download, Events
from envloop.operations.operation import Operation
from envloop.wire.deferred import (
    ArtifactInfo,
    ArtifactPath,
    InvalidateTrial,
    ProgressEvent,
    RolloutView,
    StartRollout,
    StepPage,
    TrialId,
    TrialLogs,
    TrialStepPage,
    TrialTrajectory,
    TrialView,
)


class TrialOperations:
    """Trials and rollouts: one attempt's record, files and trajectory."""

    # -- trials -------------------------------------------------------------------------------

    get_trial = Operation(
        "GET",
        "/v1/trials/{trial_id}",
        TrialId,
        TrialView,
        service=services.trial_reads.get_trial,
        tag="trials",
        scope="trial",
        doc="Status, error type and exit code, reward, dimensions, phases, sandbox mode.",
    )
    trial_logs = Operation(
        "GET",
        "/v1/trials/{trial_id}/logs",
        TrialLogs,
        dict[str, str],
        service=services.trial_reads.trial_logs,
        tag="trials",
        scope="trial",
        doc="The captured output of a phase, by stream, one page at a time (secrets were masked when they\n"
        "were kept); a phase that kept no output gives an empty object. A whole log streams from its\n"
        "artifact (`agent/stdout.txt`, …), which also answers HTTP Range requests.",
    )
    trial_step_page = Operation(
        "GET",
        "/v1/trials/{trial_id}/steps/page",
        TrialStepPage,
        StepPage,
        service=services.trace.step_page,
        tag="trials",
        scope="trial",
        doc="A page of the trial's trajectory: its steps from `offset` (at most `limit`, and at most "
        "4 MiB of\nthem), its other fields, and where the next page starts.",
    )
    trajectory_json = Download(
        "/v1/trials/{trial_id}/steps",
        TrialTrajectory,
        service=services.trace.trajectory_json,
        tag="trials",
        scope="trial",
        route_name="trial_steps",
        media_type="application/json",
        schema="envloop.trajectories.atif:TrajectoryDocument",
        answer_doc="The whole trajectory, streamed; null when its runner kept none",
        doc="The trial's whole trajectory, step by step (model messages, tool calls, environment changes),\n"
        "streamed as it is read, never held whole; null when its runner kept none. Secrets are masked in\n"
        "both formats. `/steps/page` reads it a page at a time.",
    )
    list_artifacts = Operation(
        "GET",
        "/v1/trials/{trial_id}/artifacts",
        TrialId,
        list[ArtifactInfo],
        service=services.trial_reads.list_artifacts,
        tag="trials",
        scope="trial",
    )
    read_artifact = Download(
        "/v1/trials/{trial_id}/artifacts/{path:path}",
        ArtifactPath,
        service=services.trial_reads.artifact_file,
        tag="trials",
        scope="trial",
        route_name="download_artifact",
        doc="One kept file, by its path within the trial (as the artifact list gives it).",
    )
    invalidate_trial = Operation(
        "POST",
        "/v1/trials/{trial_id}/invalidate",
        InvalidateTrial,
        TrialView,
        service=services.trials.invalidate_trial,
        tag="trials",
        body="InvalidateRequest",
        doc="Exclude the trial's reward from every aggregate, keeping its record (or, with undo, count it "
        "again).",
    )

    # -- rollouts -----------------------------------------------------------------------------

    start_rollout = Operation(
        "POST",
        "/v1/rollouts",
        StartRollout,
        RolloutView,
        service=services.rollouts.start_rollout,
        tag="rollouts",
        status_code=201,
        queued_status=lambda started: started.trial.status,
        doc="Queue one attempt (a one-trial job tagged rollout=true); its trial ID is the rollout's ID.",
    )
    get_rollout = Operation(
        "GET",
        "/v1/rollouts/{trial_id}",
        TrialId,
        RolloutView,
        service=services.rollouts.get_rollout,
        tag="rollouts",
        scope="trial",
    )
    watch_rollout = Events(
        "/v1/rollouts/{trial_id}/events",
        TrialId,
        cast("type[ProgressEvent]", ProgressEvent),
        service=services.rollouts.watch_rollout,
        tag="rollouts",
        scope="trial",
        route_name="rollout_events",
        stream_doc=PROGRESS_STREAM,
        doc="The rollout's status changes as server-sent events, until it ends.",
    )
