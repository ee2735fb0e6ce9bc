"""The operations on jobs: submitted, watched, read and summarised.

Declared once each; `envloop.operations.declared` gathers them (see there).
"""

from typing import cast

from envloop.operations import services
from envloop.operations.kinds import PROGRESS_STREAM, Events
from envloop.operations.operation import Operation
from envloop.wire.deferred import (
    Breakdown,
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
    ProgressEvent,
    SamplePage,
    SubmitJob,
    SubmitResult,
    TrialView,
)


class JobOperations:
    """Jobs: submitted, watched, read, summarised."""

    # -- jobs ---------------------------------------------------------------------------------

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
        service=services.job_submission.submit_job,
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
