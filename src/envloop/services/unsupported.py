"""Submission-time refusal of tasks whose features the job's environment choice cannot honour.

Features are found when a task is pushed (environments/features.py) and kept on the revision's
members. A job that could only run such a task without what it needs is refused, naming the tasks
and the feature, before anything is created; with `skip_unsupported` the other tasks run, and the
job keeps which tasks it left out and why (they get no trial, so never a reward of 0).
"""

from envloop.core.trial import EnvironmentChoice
from envloop.core.words import not_run_line
from envloop.errors import UserError
from envloop.services.datasets import member_features
from envloop.store.tables import DatasetMember
from envloop.wire.datasets import ENVIRONMENTS
from envloop.wire.jobs import SkippedTask


def unsupported_tasks(
    members: list[DatasetMember],
    choice: EnvironmentChoice | None,
    skip_unsupported: bool,
    warnings: list[str],
) -> list[SkippedTask]:
    """The tasks needing a feature the job's environment choice cannot honour: the job is refused
    naming them, or (with skip_unsupported) they are left out. A job that leaves the choice to its
    workers is refused only what no environment honours, and warned of what only some do.
    Features that tasks merely run without are added to `warnings`."""
    # Imported here, by submission: reading a job's diagnosis must not load the sandbox.
    from envloop.environments.features import refused_in  # noqa: PLC0415

    shown = f"--environment {choice}" if choice is not None else "any environment"
    unsupported: list[SkippedTask] = []
    degraded: dict[str, list[str]] = {}
    for member in members:
        features = member_features(member) or []
        builtin = next((name for name in ENVIRONMENTS if name == choice), None)
        if builtin is not None:
            missing = refused_in(features, builtin)
        else:  # auto, the workers' choice, or a plugin's environment: only what none can give
            missing = [f for f in features if f.required and not f.environments]
        if missing:
            labels = "; ".join(dict.fromkeys(f.label for f in missing))
            unsupported.append(
                SkippedTask(task=member.name, reason=f"needs {labels}, which {shown} cannot give")
            )
            continue
        for feature in features:
            if choice is None and feature.required and feature.environments:
                where = " or ".join(feature.environments)
                degraded.setdefault(
                    f"{feature.label}: only --environment {where} (or auto) honours it, and this job "
                    "leaves the environment to its workers",
                    [],
                ).append(member.name)
            elif not feature.required and not any(feature.honoured_by(e) for e in ENVIRONMENTS):
                degraded.setdefault(f"{feature.label}: the task runs without it", []).append(member.name)
    for text, names in degraded.items():
        warnings.append(f"{_listed(names)}: {text}")
    groups: dict[str, list[str]] = {}
    for item in unsupported:
        groups.setdefault(item.reason, []).append(item.task)
    if unsupported and not skip_unsupported:
        reasons = "; ".join(
            f"{_listed(names)} {reason if len(names) == 1 else reason.replace('needs ', 'need ', 1)}"
            for reason, names in groups.items()
        )
        raise UserError(
            f"{len(unsupported)} task(s) cannot run as their authors meant: {reasons} "
            "(choose another --environment, or pass --skip-unsupported to run the other tasks)"
        )
    warnings += [f"{not_run_line(len(names), reason)} ({_listed(names)})" for reason, names in groups.items()]
    return unsupported


def _listed(names: list[str], limit: int = 5) -> str:
    shown = ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")
    return f"task {shown}" if len(names) == 1 else f"tasks {shown}"
