"""Property-based requests over the served OpenAPI document: no 5xx, no response outside the schema.

Every operation gets a bounded number of generated requests (valid and invalid ones) with a valid
API key, against a real server whose store already holds a dataset, a profile and a job. A request
that fits the schema may still be refused with 400 (a reference that does not parse, a name with
characters the store refuses): that is the API's documented answer to bad input, so 400 counts as
an accepted outcome for schema-valid requests, alongside 2xx, 404 and 409. Invalid requests are
sent too (every check of 5xx and of response conformance applies to them), but the check that each
must be refused is off: like most HTTP APIs this one ignores query parameters it does not know.
"""

import os
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, settings

from envloop.services.jobs import JobRequest
from envloop.services.profiles import read_profile_file
from tests.api_server import Server
from tests.conftest import make_task, write_profile

EXAMPLES_PER_OPERATION = int(os.environ.get("ENVLOOP_API_FUZZ_EXAMPLES") or 25)
"""25 in CI; bench/api_fuzz.py runs the same test with many more."""

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900 * max(1, EXAMPLES_PER_OPERATION // 25))]
CONFIG = schemathesis.Config.from_dict(
    {
        "checks": {
            "positive_data_acceptance": {"expected-statuses": ["2xx", "400", "404", "409"]},
            "negative_data_rejection": {"enabled": False},
        }
    }
)


@pytest.fixture
def api_schema(server: Server, tmp_path: Path) -> schemathesis.BaseSchema:
    client = server.client()
    make_task(tmp_path / "tasks", "t0", solve="touch done")
    ref = client.push_dataset(tmp_path / "tasks", "seeded").ref
    document = read_profile_file(write_profile(tmp_path / "p.json", {"AGENT_NAME": "nop"}))
    client.create_profile("seeded", "1", document)
    client.submit_job(JobRequest(dataset=ref, profiles=["seeded@1"]))
    return schemathesis.openapi.from_url(f"{server.url}/openapi.json", config=CONFIG)


schema = schemathesis.pytest.from_fixture("api_schema")


@schema.parametrize()
@settings(
    max_examples=EXAMPLES_PER_OPERATION,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
    phases=[Phase.explicit, Phase.generate],
)
def test_generated_requests_get_no_server_error_and_no_response_outside_the_schema(
    case: schemathesis.Case, server: Server
) -> None:
    case.call_and_validate(headers={"Authorization": f"Bearer {server.key}"}, timeout=30)
