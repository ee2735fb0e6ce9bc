"""The operations across runs (comparisons, leaderboards) and on access (API keys, shares).

Declared once each; `envloop.operations.declared` gathers them (see there).
"""

from envloop.operations import services
from envloop.operations.operation import Operation
from envloop.wire.deferred import (
    AddToLeaderboard,
    ApiKeyView,
    BoardRow,
    CompareRuns,
    Comparison,
    CreatedKey,
    CreatedShare,
    CreateKey,
    CreateShare,
    JobId,
    NoArguments,
    Plan,
    PlanComparison,
    RevokeKey,
    RevokeShare,
    ShareView,
    ShowLeaderboard,
)


class SharedOperations:
    """Across runs (comparisons, leaderboards) and access (API keys, shares)."""

    # -- across runs --------------------------------------------------------------------------

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

    # -- access -------------------------------------------------------------------------------

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
