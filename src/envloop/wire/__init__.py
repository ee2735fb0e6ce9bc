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
    ListKeys,
    ListShares,
    RevokeKey,
    RevokeShare,
    ShareView,
)
from envloop.wire.breakdown import Breakdown, BreakdownGroup, GroupMetrics
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
    SubmitResult,
)
from envloop.wire.leaderboard import AddToLeaderboard, BoardEntry, BoardRow, RunSummary, ShowLeaderboard
from envloop.wire.planning import Plan, PlanComparison, PlanOption
from envloop.wire.profiles import PROFILE_SCHEMA, ProfileDocument, ProfileSpec, ProfileView
from envloop.wire.results import JobResult, ProfileResult
from envloop.wire.rollouts import JobEvent, ProgressEvent, RolloutRequest, RolloutView, TrialEvent
from envloop.wire.runners import ComponentInfo, Origin, RunnerInfo, TaskKind
from envloop.wire.samples import Sample, SamplePage, SampleQuery
from envloop.wire.trials import (
    ARTIFACT_PAGE,
    LOG_FILES,
    LOG_PAGE_BYTES,
    PAGE_STEPS,
    ArtifactInfo,
    ArtifactPage,
    LogPhase,
    StepPage,
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
    "JobDiagnosis",
    "JobEvent",
    "JobProgress",
    "JobRequest",
    "JobResult",
    "JobUsage",
    "JobView",
    "Latency",
    "ListKeys",
    "ListShares",
    "LogPhase",
    "MemberView",
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
    "StepPage",
    "SubmitResult",
    "TaskFeature",
    "TaskKind",
    "TrialEvent",
    "TrialView",
    "WarningGroup",
]
