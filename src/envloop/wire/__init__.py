"""The models that cross a boundary: requests and answers of the service layer, the HTTP API, the
HTTP client and the in-process client, and the CLI's JSON output.

They import only pydantic and the pure core (`envloop.core`), so code that only talks to envloop
(`envloop.Client`, the CLI's help, a notebook) never loads the store, the sandbox or a model SDK.
The service modules re-export the models they return, so `envloop.services.jobs.JobView` and
`envloop.wire.JobView` are the same class.
"""

from envloop.wire.access import (
    ApiKeyView,
    CreatedKey,
    CreatedShare,
    CreateKey,
    CreateShare,
    RevokeKey,
    RevokeShare,
    ShareView,
)
from envloop.wire.breakdown import Breakdown, BreakdownGroup, GroupMetrics, JobBreakdown
from envloop.wire.compare import CompareRuns, Comparison, DimensionComparison, Excluded, Side
from envloop.wire.datasets import ENVIRONMENTS, DatasetView, EnvironmentName, MemberView, TaskFeature
from envloop.wire.diagnosis import (
    FailureGroup,
    FailureKind,
    FlagGroup,
    JobDiagnosis,
    NotRunGroup,
    WarningGroup,
)
from envloop.wire.jobs import (
    JOB_CONFIG_SCHEMA,
    MAX_ATTEMPTS,
    TRIAL_STATUSES,
    JobProgress,
    JobRequest,
    JobView,
    SkippedTask,
    SubmitJob,
    SubmitResult,
)
from envloop.wire.leaderboard import AddToLeaderboard, BoardEntry, BoardRow, RunSummary, ShowLeaderboard
from envloop.wire.planning import Plan, PlanComparison, PlanOption
from envloop.wire.profiles import PROFILE_SCHEMA, CreateProfile, ProfileDocument, ProfileSpec, ProfileView
from envloop.wire.request import JobId, NoArguments, Ref, TrialId
from envloop.wire.results import JobResult, ProfileResult
from envloop.wire.rollouts import (
    JobEvent,
    ProgressEvent,
    RolloutRequest,
    RolloutView,
    StartRollout,
    TrialEvent,
)
from envloop.wire.runners import ComponentInfo, Origin, RunnerInfo, TaskKind
from envloop.wire.samples import JobSamples, Sample, SamplePage, SampleQuery
from envloop.wire.trials import (
    ARTIFACT_PAGE,
    LOG_FILES,
    LOG_PAGE_BYTES,
    PAGE_STEPS,
    ArtifactInfo,
    ArtifactPage,
    InvalidateTrial,
    ListTrials,
    LogPhase,
    StepPage,
    TrialLogs,
    TrialStepPage,
    TrialView,
)
from envloop.wire.usage import JobUsage, Latency, ProfileUsage

__all__ = [
    "ARTIFACT_PAGE",
    "ENVIRONMENTS",
    "JOB_CONFIG_SCHEMA",
    "LOG_FILES",
    "LOG_PAGE_BYTES",
    "MAX_ATTEMPTS",
    "PAGE_STEPS",
    "PROFILE_SCHEMA",
    "TRIAL_STATUSES",
    "AddToLeaderboard",
    "ApiKeyView",
    "ArtifactInfo",
    "ArtifactPage",
    "BoardEntry",
    "BoardRow",
    "Breakdown",
    "BreakdownGroup",
    "CompareRuns",
    "Comparison",
    "ComponentInfo",
    "CreateKey",
    "CreateProfile",
    "CreateShare",
    "CreatedKey",
    "CreatedShare",
    "DatasetView",
    "DimensionComparison",
    "EnvironmentName",
    "Excluded",
    "FailureGroup",
    "FailureKind",
    "FlagGroup",
    "GroupMetrics",
    "InvalidateTrial",
    "JobBreakdown",
    "JobDiagnosis",
    "JobEvent",
    "JobId",
    "JobProgress",
    "JobRequest",
    "JobResult",
    "JobSamples",
    "JobUsage",
    "JobView",
    "Latency",
    "ListTrials",
    "LogPhase",
    "MemberView",
    "NoArguments",
    "NotRunGroup",
    "Origin",
    "Plan",
    "PlanComparison",
    "PlanOption",
    "ProfileDocument",
    "ProfileResult",
    "ProfileSpec",
    "ProfileUsage",
    "ProfileView",
    "ProgressEvent",
    "Ref",
    "RevokeKey",
    "RevokeShare",
    "RolloutRequest",
    "RolloutView",
    "RunSummary",
    "RunnerInfo",
    "Sample",
    "SamplePage",
    "SampleQuery",
    "ShareView",
    "ShowLeaderboard",
    "Side",
    "SkippedTask",
    "StartRollout",
    "StepPage",
    "SubmitJob",
    "SubmitResult",
    "TaskFeature",
    "TaskKind",
    "TrialEvent",
    "TrialId",
    "TrialLogs",
    "TrialStepPage",
    "TrialView",
    "WarningGroup",
]
