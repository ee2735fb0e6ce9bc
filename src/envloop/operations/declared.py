"""The declared operations: one `Operation` each (see `envloop.operations.operation`).

Each is a method of both clients (`envloop.operations.Operations`), a route of the HTTP API, and a
call of its service function in process. Adding an operation is one declaration here, its request
in `envloop.wire` when no existing one fits, and its service function (named through
`envloop.operations.services`); docs/design/operations.md lists the files it touches.

The models are named through `envloop.wire.deferred`: an operation imports its request and answer
when first called, so a client that makes one call (an `el` command) builds only that call's models.
"""

from typing import Any, cast

from envloop.operations import services
from envloop.operations.kinds import Download, Events, Upload
from envloop.operations.operation import Operation
from envloop.wire.deferred import (
    AddToLeaderboard,
    ApiKeyView,
    ArtifactInfo,
    ArtifactPath,
    BoardRow,
    Breakdown,
    CheckDataset,
    CompareRuns,
    Comparison,
    CreatedKey,
    CreatedShare,
    CreateKey,
    CreateProfile,
    CreateShare,
    DatasetHealth,
    DatasetView,
    InvalidateTrial,
    JobBreakdown,
    JobDiagnosis,
    JobId,
    JobProgress,
    JobRequest,
    JobResult,
    JobSamples,
    JobUsage,
    JobView,
    ListJobs,
    ListTrials,
    NoArguments,
    Plan,
    PlanComparison,
    ProfileView,
    ProgressEvent,
    PushDataset,
    Ref,
    RevokeKey,
    RevokeShare,
    RolloutView,
    RunnerInfo,
    SamplePage,
    ShareView,
    ShowLeaderboard,
    StartRollout,
    StepPage,
    SubmitJob,
    SubmitResult,
    TrialId,
    TrialLogs,
    TrialStepPage,
    TrialTrajectory,
    TrialView,
)

PROGRESS_STREAM = "A stream of `job` and `trial` events, then `end` (data: the final job)"


class Declarations:
    """The operations declared once; `envloop.operations.Operations` inherits them as methods."""

    # -- datasets, profiles, runners ----------------------------------------------------------------

    list_datasets = Operation(
        "GET",
        "/v1/datasets",
        NoArguments,
        list[DatasetView],
        service=services.datasets.list_datasets,
        tag="datasets",
    )
    push_dataset = Upload(
        "/v1/datasets",
        PushDataset,
        DatasetView,
        file="path",
        part="archive",
        service=services.datasets.push_dataset,
        tag="datasets",
        status_code=201,
        existing=lambda view: not view.created,
        existing_doc="Identical content: the existing revision",
        doc="Freeze the uploaded tasks as a new revision (identical content returns the existing one).",
    )
    get_dataset = Operation(
        "GET",
        "/v1/datasets/{ref:path}",
        Ref,
        DatasetView,
        service=services.datasets.get_dataset,
        tag="datasets",
        doc="One revision (NAME@N or NAME@latest) with its members and digests.",
    )
    check_dataset = Operation(
        "POST",
        "/v1/dataset-checks",
        CheckDataset,
        SubmitResult,
        service=services.dataset_checks.check_dataset,
        tag="datasets",
        body="DatasetCheckRequest",
        status_code=201,
        queued_status=lambda submitted: submitted.job.status,
        doc="Check a revision's health: a job (tagged health-check=NAME@N) of the built-in oracle and nop "
        "profiles, ATTEMPTS runs each on every task; read its verdicts with get_dataset_check.",
    )
    get_dataset_check = Operation(
        "GET",
        "/v1/dataset-checks/{job_id}",
        JobId,
        DatasetHealth,
        service=services.dataset_checks.dataset_check,
        tag="datasets",
        scope="job",
        doc="The verdict on every task of a check job: healthy, or each problem named.",
    )
    latest_dataset_check = Operation(
        "GET",
        "/v1/dataset-checks/latest/{ref:path}",
        Ref,
        DatasetHealth,
        service=services.dataset_checks.latest_dataset_check,
        tag="datasets",
        doc="The newest check of a revision (404 when it was never checked).",
    )
    list_profiles = Operation(
        "GET",
        "/v1/profiles",
        NoArguments,
        list[ProfileView],
        service=services.profiles.list_profiles,
        tag="profiles",
    )
    create_profile = Operation(
        "POST",
        "/v1/profiles",
        CreateProfile,
        ProfileView,
        service=services.profiles.create_profile,
        tag="profiles",
        body="ProfileCreate",
        status_code=201,
        existing=lambda view: not view.created,
        existing_doc="Identical content: the existing version",
        doc="Publish NAME@VERSION; the same content again is a no-op, different content is refused (409).",
    )
    get_profile = Operation(
        "GET",
        "/v1/profiles/{ref:path}",
        Ref,
        ProfileView,
        service=services.profiles.get_profile,
        tag="profiles",
    )
    list_runners = Operation(
        "GET",
        "/v1/runners",
        NoArguments,
        list[RunnerInfo],
        service=services.components.list_runners,
        tag="runners",
        doc="Runners this server can run, with the profile params each reads and requires.",
    )

    # -- jobs ---------------------------------------------------------------------------------------

    list_jobs = Operation(
        "GET",
        "/v1/jobs",
        ListJobs,
        list[JobView],
        service=services.jobs.list_jobs,
        tag="jobs",
        doc="Jobs, newest first, one page at a time (filtered, ordered and paged in the database).",
    )
    submit_job = Operation(
        "POST",
        "/v1/jobs",
        SubmitJob,
        SubmitResult,
        service=services.jobs.submit_job,
        tag="jobs",
        status_code=201,
        existing=lambda submitted: submitted.existing,
        existing_doc="The request ID matched an earlier submission",
        queued_status=lambda submitted: submitted.job.status,
        doc="Validate everything, then create every trial pending at once (or nothing, on error).",
    )
    get_job = Operation(
        "GET",
        "/v1/jobs/{job_id}",
        JobId,
        JobView,
        service=services.job_reads.get_job,
        tag="jobs",
        scope="job",
    )
    job_progress = Operation(
        "GET",
        "/v1/jobs/{job_id}",
        JobId,
        JobProgress,
        service=services.jobs.job_progress,
        tag="jobs",
        scope="job",
        routed=False,
        doc="The job's status and trial counts: what a follower polls.",
    )
    watch_job = Events(
        "/v1/jobs/{job_id}/events",
        JobId,
        cast("type[ProgressEvent]", ProgressEvent),
        service=services.rollouts.watch_job,
        tag="jobs",
        scope="job",
        route_name="job_events",
        stream_doc=PROGRESS_STREAM,
        doc="Status changes of the job and its trials as server-sent events, until the job ends.",
    )
    job_result = Operation(
        "GET",
        "/v1/jobs/{job_id}/result",
        JobId,
        JobResult,
        service=services.results.job_result,
        tag="jobs",
        scope="job",
        doc="Coverage, score, pass, pass@k, pass^k, curve and per-task rows, per profile.",
    )
    job_diagnosis = Operation(
        "GET",
        "/v1/jobs/{job_id}/diagnosis",
        JobId,
        JobDiagnosis,
        service=services.diagnosis.job_diagnosis,
        tag="jobs",
        scope="job",
        doc="Why attempts are missing (failures by reason), how trials were isolated, and their warnings.",
    )
    cancel_job = Operation(
        "POST",
        "/v1/jobs/{job_id}/cancel",
        JobId,
        JobView,
        service=services.jobs.cancel_job,
        tag="jobs",
        doc="Pending trials are cancelled at once; running ones are stopped by their workers shortly.",
    )
    export_job = Operation(
        "GET",
        "/v1/jobs/{job_id}/export",
        JobId,
        JobRequest,
        service=services.jobs.export_job,
        tag="jobs",
        scope="job",
        doc="The job's configuration, which POST /v1/jobs accepts to run it again (never secret values).",
    )
    list_trials = Operation(
        "GET",
        "/v1/jobs/{job_id}/trials",
        ListTrials,
        list[TrialView],
        service=services.trial_reads.list_trials,
        tag="jobs",
        scope="job",
        doc="The job's trials by profile, task and attempt; `limit` and `offset` page through big jobs.",
    )
    job_breakdown = Operation(
        "GET",
        "/v1/jobs/{job_id}/breakdown",
        JobBreakdown,
        Breakdown,
        service=services.breakdown.job_breakdown,
        tag="jobs",
        scope="job",
        doc="Score and coverage per group of tasks sharing a value of a metadata field, per profile.",
    )
    job_usage = Operation(
        "GET",
        "/v1/jobs/{job_id}/usage",
        JobId,
        JobUsage,
        service=services.usage.job_usage,
        tag="jobs",
        scope="job",
        doc="Model calls and tokens, their cost under the operator's price table, and trial durations.",
    )
    job_samples = Operation(
        "GET",
        "/v1/jobs/{job_id}/samples",
        JobSamples,
        SamplePage,
        service=services.samples.job_samples,
        tag="jobs",
        scope="job",
        doc="One row per attempt (input, target, output, reward, status, tokens, duration), filtered,\n"
        "searched (`q`), sorted and paged in the store.",
    )

    # -- trials -------------------------------------------------------------------------------------

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

    # -- rollouts -----------------------------------------------------------------------------------

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

    # -- across runs --------------------------------------------------------------------------------

    show_leaderboard = Operation(
        "GET",
        "/v1/leaderboard",
        ShowLeaderboard,
        list[BoardRow],
        service=services.leaderboard.show_leaderboard,
        tag="leaderboard",
        doc="Ranked rows (job, profile) of the project's boards, each with its coverage.",
    )
    add_to_leaderboard = Operation(
        "POST",
        "/v1/leaderboard",
        AddToLeaderboard,
        list[BoardRow],
        service=services.leaderboard.add_to_leaderboard,
        tag="leaderboard",
        body="LeaderboardAdd",
        doc="Save a finished job's rows; adding it again returns the saved rows unchanged.",
    )
    compare_runs = Operation(
        "GET",
        "/v1/compare",
        CompareRuns,
        Comparison,
        service=services.compare.compare_runs,
        tag="compare",
        doc="Paired comparison B - A on the tasks both scored: difference, s.e., 95% CI, correlation.",
    )
    plan_comparison = Operation(
        "GET",
        "/v1/jobs/{job_id}/plan",
        PlanComparison,
        Plan,
        service=services.planning.plan_comparison,
        tag="compare",
        scope="job",
        doc="Tasks and attempts a comparison needs to detect `effect`, from this job's variance.",
    )

    # -- access -------------------------------------------------------------------------------------

    list_keys = Operation(
        "GET",
        "/v1/keys",
        NoArguments,
        list[ApiKeyView],
        service=services.keys.list_keys,
        tag="keys",
        doc="The calling project's keys, revoked ones included; secrets are never shown again.",
    )
    create_key = Operation(
        "POST",
        "/v1/keys",
        CreateKey,
        CreatedKey,
        service=services.keys.create_key,
        tag="keys",
        status_code=201,
        body="KeyRequest",
        doc="Another key for the calling project; the response is the only time its secret is shown.",
    )
    revoke_key = Operation(
        "POST",
        "/v1/keys/{key_id}/revoke",
        RevokeKey,
        ApiKeyView,
        service=services.keys.revoke_key,
        tag="keys",
    )
    create_share = Operation(
        "POST",
        "/v1/jobs/{job_id}/shares",
        CreateShare,
        CreatedShare,
        service=services.shares.create_share,
        tag="shares",
        status_code=201,
        body="ShareRequest",
        doc="A read-only token for this job; the response is the only time the token is shown.",
    )
    list_shares = Operation(
        "GET",
        "/v1/jobs/{job_id}/shares",
        JobId,
        list[ShareView],
        service=services.shares.list_shares,
        tag="shares",
    )
    revoke_share = Operation(
        "POST",
        "/v1/shares/{share_id}/revoke",
        RevokeShare,
        ShareView,
        service=services.shares.revoke_share,
        tag="shares",
    )


def declared_operations() -> list[Operation[..., Any, Any]]:
    """Every declared operation, in declaration order."""
    return [value for value in vars(Declarations).values() if isinstance(value, Operation)]
