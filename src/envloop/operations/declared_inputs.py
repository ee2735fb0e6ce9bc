"""The operations on what a job is made of: datasets, profiles and the runners that read them.

Declared once each; `envloop.operations.declared` gathers them (see there).
"""

from envloop.operations import services
from envloop.operations.kinds import Upload
from envloop.operations.operation import Operation
from envloop.wire.deferred import (
    CheckDataset,
    CreateProfile,
    DatasetHealth,
    DatasetView,
    JobId,
    NoArguments,
    ProfileView,
    PushDataset,
    Ref,
    RunnerInfo,
    SubmitResult,
)


class InputOperations:
    """Datasets, profiles and runners: what a job is made of."""

    # -- datasets, profiles, runners ----------------------------------------------------------

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
