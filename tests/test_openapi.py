"""The OpenAPI schema is complete and clean: every endpoint documented, no generator warnings."""

import yaml
from django.core.management import call_command


def test_schema_generates_and_validates_without_warnings(db, tmp_path):
    out = tmp_path / "schema.yaml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(out))
    schema = yaml.safe_load(out.read_text())
    paths = schema["paths"]
    for expected in (
        "/api/projects/",
        "/api/projects/{slug}/traces/",
        "/api/projects/{slug}/imports/",
        "/api/queue/",
        "/api/projects/{slug}/traces/{id}/annotation/",
        "/api/rounds/{id}/agreement/",
        "/api/projects/{slug}/judge-runs/",
        "/api/projects/{slug}/releases/",
    ):
        assert any(p.startswith(expected.split("{id}")[0]) for p in paths), expected


def test_docs_page_is_served_offline(client, annotator):
    client.force_login(annotator)
    html = client.get("/api/docs/").content.decode()
    assert "swagger-ui" in html
    assert "cdn." not in html and "unpkg" not in html  # assets come from the sidecar package
