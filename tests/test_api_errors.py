"""The API's one error shape: bad query values are 400s naming the parameter; the schema documents errors."""

import pytest
from rest_framework.test import APIClient


@pytest.fixture
def client_as(annotator):
    c = APIClient()
    c.force_authenticate(annotator)
    return c


@pytest.mark.parametrize("value", ["abc", "0", "-1", "1.5"])
def test_a_malformed_page_is_a_400_naming_the_parameter(client_as, project, value):
    response = client_as.get("/api/projects/", {"page": value})
    assert response.status_code == 400
    body = response.json()
    assert "page" in body["errors"] and "'page'" in body["detail"]


def test_a_page_past_the_last_is_still_404(client_as, project):
    assert client_as.get("/api/projects/", {"page": "99"}).status_code == 404


def test_a_good_page_answers(client_as, project):
    assert client_as.get("/api/projects/", {"page": "1"}).status_code == 200


def test_every_operation_documents_its_error_answers(client_as):
    schema = client_as.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    operations = [op for item in schema["paths"].values() for m, op in item.items() if m in ("get", "post")]
    assert len(operations) > 30
    for op in operations:
        assert {"400", "401", "403", "404"} <= set(op["responses"]), op.get("operationId")
