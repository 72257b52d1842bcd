"""Shared parts of the property-based API tests (test_api_fuzz_manager.py, test_api_fuzz_annotator.py,
two modules so the suite's two processes run them side by side): Schemathesis generates requests
for every operation of the OpenAPI schema, as a manager and as an annotator (token auth), against
the real WSGI app on PostgreSQL. No answer may be a 5xx, and every answer must match the schema
(status documented, body valid).

Bounded: a handful of examples per operation (``MAST_FUZZ_EXAMPLES``, default 8), no deadline,
derandomized (set ``MAST_FUZZ_EXAMPLES`` higher locally to explore more). Path parameters point
at real objects half of the time, so the operations do more than answer 404.
"""

from __future__ import annotations

import os

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, settings
from rest_framework.authtoken.models import Token
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance, status_code_conformance

from tests.annotations.releases_factories import closed_round
from tests.annotations.workspace_factories import make_round, make_trace

EXAMPLES = int(os.environ.get("MAST_FUZZ_EXAMPLES", "8"))
CHECKS = [not_a_server_error, status_code_conformance, response_schema_conformance]


@pytest.fixture
def api_schema(db):
    """The schema, served by the real WSGI app. As Django's test client does, requests must not close
    the test's database connection (it holds the test transaction)."""
    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections

    from mast_site.wsgi import application

    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield schemathesis.openapi.from_wsgi("/api/schema/", application)
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


schema = schemathesis.pytest.from_fixture("api_schema")


@pytest.fixture
def fuzz_world(project, manager, annotator, annotator2, settings):
    settings.MAST_API_TOKEN_RATE = ""  # the fuzzer's calls are not a leaked token in a loop
    traces = [make_trace(project, title=f"fuzz {i}") for i in range(3)]
    closed_round(project, project.taxonomy_version, {traces[0]: {"1.1"}}, name="Closed fuzz round")
    rnd = make_round(project, traces=traces[1:], annotators=[annotator, annotator2], name="Open fuzz round")
    return {"project": project, "trace": traces[1], "round": rnd}


def _aim(case, world) -> None:
    """Point path parameters at real objects (every other example), so the handlers do real work."""
    params = case.path_parameters or {}
    if "slug" in params:
        params["slug"] = world["project"].slug
    if hash(repr(case.query)) % 2 == 0:
        for key in ("pk", "trace_id"):
            if key in params:
                params[key] = world["round"].pk if case.path.startswith("/api/rounds/") else world["trace"].pk


def run_case(case, world, user) -> None:
    token, _ = Token.objects.get_or_create(user=user)
    _aim(case, world)
    response = case.call(headers={"Authorization": f"Token {token.key}"})
    case.validate_response(response, checks=CHECKS)


FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
    database=None,
    derandomize=True,  # the same examples every run: a failure in CI reproduces locally
)
