"""Demo step of live traces: an ingest key for the demo project, printed with the endpoint, so an
OpenTelemetry exporter can be pointed at the running demo at once (the key is the demo's; a real
key is shown once on the project's Live traces page and stored only as its hash)."""

from __future__ import annotations

from traces.live.keys import ingest_key_create

NAME = "demo exporter"


def seed(ctx) -> None:
    project = ctx.project
    slug = project.slug
    if project.ingest_keys.filter(name=NAME).exists():
        ctx.say(f"Live traces: key “{NAME}” already there (shown once when created); /p/{slug}/settings/live/")
        return
    _, plain = ingest_key_create(project=project, name=NAME, by=ctx.users["manager"])
    ctx.say(
        f"Live traces: OTEL_EXPORTER_OTLP_ENDPOINT=<site>/otlp with OTEL_EXPORTER_OTLP_HEADERS="
        f"Authorization=Bearer%20{plain} sends spans to the demo project; keys and live traces at "
        f"/p/{slug}/settings/live/"
    )
