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
    from envloop.wire.access import ApiKeyView, CreatedKey, CreatedShare, ShareView
    from envloop.wire.breakdown import Breakdown, BreakdownGroup, GroupMetrics
    from envloop.wire.compare import Comparison, DimensionComparison, Excluded, Side
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
    from envloop.wire.leaderboard import BoardEntry, BoardRow, RunSummary
    from envloop.wire.planning import Plan, PlanOption
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

_MODULE_OF = {
    "ARTIFACT_PAGE": "trials",
    "ApiKeyView": "access",
    "ArtifactInfo": "trials",
    "ArtifactPage": "trials",
    "BoardEntry": "leaderboard",
    "BoardRow": "leaderboard",
    "Breakdown": "breakdown",
    "BreakdownGroup": "breakdown",
    "Comparison": "compare",
    "ComponentInfo": "runners",
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
    "JOB_CONFIG_SCHEMA": "jobs",
    "JobDiagnosis": "diagnosis",
    "JobEvent": "rollouts",
    "JobProgress": "jobs",
    "JobRequest": "jobs",
    "JobResult": "results",
    "JobUsage": "usage",
    "JobView": "jobs",
    "LOG_FILES": "trials",
    "LOG_PAGE_BYTES": "trials",
    "Latency": "usage",
    "LogPhase": "trials",
    "MAX_ATTEMPTS": "jobs",
    "MemberView": "datasets",
    "NotRunGroup": "diagnosis",
    "Origin": "runners",
    "PAGE_STEPS": "trials",
    "PROFILE_SCHEMA": "profiles",
    "Plan": "planning",
    "PlanOption": "planning",
    "ProfileDocument": "profiles",
    "ProfileResult": "results",
    "ProfileSpec": "profiles",
    "ProfileUsage": "usage",
    "ProfileView": "profiles",
    "ProgressEvent": "rollouts",
    "RolloutRequest": "rollouts",
    "RolloutView": "rollouts",
    "RunSummary": "leaderboard",
    "RunnerInfo": "runners",
    "Sample": "samples",
    "SamplePage": "samples",
    "SampleQuery": "samples",
    "ShareView": "access",
    "Side": "compare",
    "SkippedTask": "jobs",
    "StepPage": "trials",
    "SubmitResult": "jobs",
    "TRIAL_STATUSES": "jobs",
    "TaskFeature": "datasets",
    "TaskKind": "runners",
    "TrialEvent": "rollouts",
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
    "TRIAL_STATUSES",
    "ApiKeyView",
    "ArtifactInfo",
    "ArtifactPage",
    "BoardEntry",
    "BoardRow",
    "Breakdown",
    "BreakdownGroup",
    "Comparison",
    "ComponentInfo",
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
    "LogPhase",
    "MemberView",
    "NotRunGroup",
    "Origin",
    "Plan",
    "PlanOption",
    "ProfileDocument",
    "ProfileResult",
    "ProfileSpec",
    "ProfileUsage",
    "ProfileView",
    "ProgressEvent",
    "RolloutRequest",
    "RolloutView",
    "RunSummary",
    "RunnerInfo",
    "Sample",
    "SamplePage",
    "SampleQuery",
    "ShareView",
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
