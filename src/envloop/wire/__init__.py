"""The models that cross a boundary: requests and answers of the service layer, the HTTP API, the
HTTP client and the in-process client, and the CLI's JSON output.

They import only pydantic and the pure core (`envloop.core`), so code that only talks to envloop
(`envloop.Client`, the CLI's help, a notebook) never loads the store, the sandbox or a model SDK.
The service modules re-export the models they return, so `envloop.services.jobs.JobView` and
`envloop.wire.JobView` are the same class.
"""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

_MODULE_OF = {
    "ARTIFACT_PAGE": "trials",
    "AddToLeaderboard": "leaderboard",
    "ApiKeyView": "access",
    "ArtifactInfo": "trials",
    "ArtifactPage": "trials",
    "BoardEntry": "leaderboard",
    "BoardRow": "leaderboard",
    "Breakdown": "breakdown",
    "BreakdownGroup": "breakdown",
    "CompareRuns": "compare",
    "Comparison": "compare",
    "ComponentInfo": "runners",
    "CreateKey": "access",
    "CreateProfile": "profiles",
    "CreateShare": "access",
    "CreatedKey": "access",
    "CreatedShare": "access",
    "DatasetView": "datasets",
    "DimensionComparison": "compare",
    "ENVIRONMENTS": "datasets",
    "EnvironmentName": "datasets",
    "Excluded": "compare",
    "FailureGroup": "diagnosis",
    "FailureKind": "diagnosis",
    "FlagGroup": "diagnosis",
    "GroupMetrics": "breakdown",
    "InvalidateTrial": "trials",
    "JOB_CONFIG_SCHEMA": "jobs",
    "JobBreakdown": "breakdown",
    "JobDiagnosis": "diagnosis",
    "JobEvent": "rollouts",
    "JobId": "request",
    "JobProgress": "jobs",
    "JobRequest": "jobs",
    "JobResult": "results",
    "JobSamples": "samples",
    "JobUsage": "usage",
    "JobView": "jobs",
    "LOG_FILES": "trials",
    "LOG_PAGE_BYTES": "trials",
    "Latency": "usage",
    "ListTrials": "trials",
    "LogPhase": "trials",
    "MAX_ATTEMPTS": "jobs",
    "MemberView": "datasets",
    "NoArguments": "request",
    "NotRunGroup": "diagnosis",
    "Origin": "runners",
    "PAGE_STEPS": "trials",
    "PROFILE_SCHEMA": "profiles",
    "Plan": "planning",
    "PlanComparison": "planning",
    "PlanOption": "planning",
    "ProfileDocument": "profiles",
    "ProfileResult": "results",
    "ProfileSpec": "profiles",
    "ProfileUsage": "usage",
    "ProfileView": "profiles",
    "ProgressEvent": "rollouts",
    "Ref": "request",
    "RevokeKey": "access",
    "RevokeShare": "access",
    "RolloutRequest": "rollouts",
    "RolloutView": "rollouts",
    "RunSummary": "leaderboard",
    "RunnerInfo": "runners",
    "Sample": "samples",
    "SamplePage": "samples",
    "SampleQuery": "samples",
    "ShareView": "access",
    "ShowLeaderboard": "leaderboard",
    "Side": "compare",
    "SkippedTask": "jobs",
    "StartRollout": "rollouts",
    "StepPage": "trials",
    "SubmitJob": "jobs",
    "SubmitResult": "jobs",
    "TaskFeature": "datasets",
    "TaskKind": "runners",
    "TrialEvent": "rollouts",
    "TrialId": "request",
    "TrialLogs": "trials",
    "TrialStepPage": "trials",
    "TrialView": "trials",
    "WarningGroup": "diagnosis",
}
"""The submodule that defines each name: a name is imported with its module on first use
(`from envloop.wire import JobView` loads `envloop.wire.jobs` alone), so a command that reads one
model does not build the others."""


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'envloop.wire' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"envloop.wire.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "ARTIFACT_PAGE",
    "ENVIRONMENTS",
    "JOB_CONFIG_SCHEMA",
    "LOG_FILES",
    "LOG_PAGE_BYTES",
    "MAX_ATTEMPTS",
    "PAGE_STEPS",
    "PROFILE_SCHEMA",
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
