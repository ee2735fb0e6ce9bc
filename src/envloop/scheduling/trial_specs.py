"""What a worker hands its executor for a claimed trial: the TrialSpec built from the trial's job,
profile and (for JSONL datasets) row, each read from the store once per worker and kept (jobs,
profiles and dataset revisions never change once a trial can be claimed).

Building a spec reads the store and touches the disk (the run's staging directory): the worker
calls `build` in a thread, never on its event loop.
"""

import shutil
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select

from envloop.core.trial import EnvironmentChoice, TrialSpec, VerifierEnvironment
from envloop.store.context import Context
from envloop.store.queue import ClaimedTrial
from envloop.store.secrets import resolved_params
from envloop.store.tables import Dataset, DatasetMember, Job, Profile


@dataclass
class _JobInfo:
    runner: str
    agent_timeout_sec: float | None
    verifier_timeout_sec: float | None
    agent_setup_timeout_sec: float | None
    max_steps: int | None
    dataset_id: str
    scorer: str | None
    """Set for JSONL datasets, whose trials carry their row instead of a task directory."""
    environment: EnvironmentChoice | None = None
    verifier_environment: VerifierEnvironment = "task"


@dataclass
class _ProfileInfo:
    ref: str
    params: dict[str, str]
    secrets: tuple[str, ...]


class TrialSpecs:
    def __init__(self, ctx: Context, environment: EnvironmentChoice) -> None:
        self.ctx = ctx
        self.environment = environment
        """Where trials of jobs that chose no environment run (`el worker --environment`)."""
        self._jobs: dict[str, _JobInfo] = {}
        self._profiles: dict[str, _ProfileInfo] = {}
        self._rows: dict[str, dict[str, dict[str, Any]]] = {}

    def build(self, claimed: ClaimedTrial, run_id: str) -> TrialSpec:
        """The spec of one run of the trial, with a fresh, empty staging directory for its files."""
        job = self._job(claimed.job_id)
        profile = self._profile(claimed.profile_id)
        artifacts_dir = self.ctx.artifacts.staging_dir(run_id)
        if artifacts_dir.exists():  # left over from a worker that died before this run started
            shutil.rmtree(artifacts_dir)
        artifacts_dir.mkdir(parents=True)
        self.ctx.instances_dir.mkdir(parents=True, exist_ok=True)
        chat = job.scorer is not None
        return TrialSpec(
            job_id=claimed.job_id,
            trial_id=claimed.trial_id,
            task_name=claimed.task_name,
            attempt=claimed.attempt,
            profile_ref=profile.ref,
            runner=job.runner,
            params=profile.params,
            secret_values=profile.secrets,
            task_dir=None,  # fetched by the trial's task, off the event loop
            row=self._dataset_rows(job.dataset_id)[claimed.task_name] if chat else None,
            scorer=job.scorer,
            instance_root=self.ctx.instances_dir,
            artifacts_dir=artifacts_dir,
            agent_timeout_sec=job.agent_timeout_sec,
            verifier_timeout_sec=job.verifier_timeout_sec,
            agent_setup_timeout_sec=job.agent_setup_timeout_sec,
            max_steps=job.max_steps,
            run=claimed.lease_token,
            environment=job.environment or self.environment,
            builds_dir=self.ctx.artifacts.root / "builds",
            verifier_environment=job.verifier_environment,
        )

    def _job(self, job_id: str) -> _JobInfo:
        if job_id not in self._jobs:
            with self.ctx.store.read() as session:
                job = session.get(Job, job_id)
                assert job is not None
                dataset = session.get(Dataset, job.dataset_id)
                assert dataset is not None
                self._jobs[job_id] = _JobInfo(
                    job.runner,
                    job.agent_timeout_sec,
                    job.verifier_timeout_sec,
                    job.agent_setup_timeout_sec,
                    job.max_steps,
                    dataset.id,
                    dataset.scorer if dataset.kind == "jsonl" else None,
                    job.environment,
                    "separate" if job.verifier_environment == "separate" else "task",
                )
        return self._jobs[job_id]

    def _dataset_rows(self, dataset_id: str) -> dict[str, dict[str, Any]]:
        """A JSONL revision's rows by member name, read once per worker (revisions never change)."""
        if dataset_id not in self._rows:
            with self.ctx.store.read() as session:
                query = select(DatasetMember.name, DatasetMember.row)
                members = session.execute(query.where(DatasetMember.dataset_id == dataset_id)).all()
            self._rows[dataset_id] = {name: row for name, row in members if row is not None}
        return self._rows[dataset_id]

    def _profile(self, profile_id: str) -> _ProfileInfo:
        if profile_id not in self._profiles:
            with self.ctx.store.read() as session:
                profile = session.scalar(select(Profile).where(Profile.id == profile_id))
                assert profile is not None
                params = resolved_params(session, profile, self.ctx.home)
                secrets = tuple(params[name] for name in profile.secret_names if params.get(name))
                self._profiles[profile_id] = _ProfileInfo(
                    f"{profile.name}@{profile.version}", params, secrets
                )
        return self._profiles[profile_id]
