"""The blind rule across the whole product: an annotator in an open round fetches every GET endpoint of
the OpenAPI schema and every page (release files unpacked, Parquet decoded) and finds none of the other
raters' words: not the other annotator's rationale, notes or open codes, not the LLM judge's rationale.

The world is built so that every leak path has something to leak: a suggestion-revealing project, a
judge annotation and a release (member downloads on) built while the round is open.
"""

from __future__ import annotations

import io
import json
import re
import zipfile

import pyarrow.parquet as pq
import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from annotations.labels.services import annotation_get_or_create, annotation_save, annotation_submit
from annotations.models import Annotation, Attribution, ModeLabel, Rater, Release
from annotations.releases.services import release_build, release_create, release_policy_set
from tests.annotations.releases_factories import closed_round
from tests.annotations.workspace_factories import make_round, make_trace

SECRETS = (
    "ZQXANN2RATIONALE",
    "ZQXANN2NOTES",
    "zqxann2code",
    "ZQXJUDGERATIONALE",
    "ZQXANN2ATTRIBUTION",
    "Zqxann2agent",
    "ZQXJUDGEATTRIBUTION",
)


@pytest.fixture
def world(project, manager, annotator, annotator2):
    project.reveal_suggestions = True
    project.save(update_fields=["reveal_suggestions"])
    blind = make_trace(project, title="in the open round")
    outside = make_trace(project, title="outside rounds")
    # Both traces have agreed labels from an earlier closed round, so a release holds them; the blind
    # one is labelled again in an open round (a calibration re-run).
    closed_round(project, project.taxonomy_version, {blind: {"1.1"}, outside: {"2.1"}}, name="Earlier round")
    rnd = make_round(project, traces=[blind], annotators=[annotator, annotator2])
    ann = annotation_get_or_create(trace=blind, user=annotator2, taxonomy_version=project.taxonomy_version, round=rnd)
    ann = annotation_save(
        annotation=ann,
        by=annotator2,
        base_revision=ann.revision,
        labels=[
            {
                "code": m.code,
                "decision": "present" if m.code == "2.1" else "absent",
                "evidence": [],
                "rationale": "ZQXANN2RATIONALE" if m.code == "2.1" else "",
            }
            for m in project.taxonomy_version.modes.all()
        ],
        task_success="no",
        notes="ZQXANN2NOTES",
        open_codes=["zqxann2code"],
        attribution={"step": 1, "agent": "Zqxann2agent", "modes": ["2.1"], "reason": "ZQXANN2ATTRIBUTION"},
    )
    annotation_submit(annotation=ann, by=annotator2, base_revision=ann.revision)
    judge = Rater.objects.create(name="judge-scan", kind=Rater.Kind.LLM)
    jann = Annotation.objects.create(
        trace=blind, rater=judge, taxonomy_version=project.taxonomy_version, state="submitted"
    )
    ModeLabel.objects.create(
        annotation=jann,
        mode=project.taxonomy_version.modes.get(code="1.1"),
        decision="present",
        rationale="ZQXJUDGERATIONALE",
    )
    Attribution.objects.create(annotation=jann, decisive_step=2, agent="Coder", reason="ZQXJUDGEATTRIBUTION")
    release_policy_set(project=project, by=manager, members_may_download=True)
    release = release_create(
        project=project,
        by=manager,
        selection=Release.Selection.FILTER,
        filters={"mas_name": [blind.mas_name]},
        options={"raters": True, "judge": True, "evidence": True, "trace_text": True},
        enqueue=False,
    )
    release = release_build(release_id=release.pk)
    assert release.status == Release.Status.DONE and release.n_traces >= 1, release.error
    return {"blind": blind, "outside": outside, "round": rnd, "release": release}


def _texts(response) -> list[str]:
    """The response's text, with zips unpacked and Parquet files decoded to JSON."""
    body = b"".join(response.streaming_content) if response.streaming else response.content
    out = [body.decode("utf-8", "replace")]
    if body[:2] == b"PK":
        with zipfile.ZipFile(io.BytesIO(body)) as zf:
            for name in zf.namelist():
                data = zf.read(name)
                if name.endswith(".parquet"):
                    out.append(json.dumps(pq.read_table(io.BytesIO(data)).to_pylist(), default=str))
                else:
                    out.append(data.decode("utf-8", "replace"))
    if body[:4] == b"PAR1":
        out.append(json.dumps(pq.read_table(io.BytesIO(body)).to_pylist(), default=str))
    return out


def _leaks(response) -> list[str]:
    texts = _texts(response)  # a streamed body can be read once
    return sorted({s for s in SECRETS for text in texts if s in text})


def _fill(path: str, world, project) -> str:
    rnd, blind, release = world["round"], world["blind"], world["release"]
    values = {
        "slug": project.slug,
        "number": str(release.number),
        "run_id": "1",
        "item_id": "1",
        "trace_id": str(blind.pk),
        "code": "2.1",
    }
    if path.startswith("/api/rounds/"):
        values["pk"] = str(rnd.pk)
    elif path.startswith("/api/taxonomy-versions/"):
        values["pk"] = str(project.taxonomy_version_id)
    else:
        values["pk"] = str(blind.pk)
    return re.sub(r"\{(\w+)\}", lambda m: values.get(m.group(1), "1"), path)


def test_no_get_endpoint_of_the_schema_shows_another_raters_words(world, project, annotator):
    api = APIClient()
    api.force_authenticate(annotator)
    schema = api.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    checked, found = 0, {}
    for path, item in schema["paths"].items():
        if "get" not in item:
            continue
        url = _fill(path, world, project)
        queries = [{}]
        if "{pk}" in path and "/traces/" in path:
            queries.append({"round": world["round"].pk})
        for query in queries:
            response = api.get(url, query)
            assert response.status_code < 500, (url, response.status_code)
            checked += 1
            if leaks := _leaks(response):
                found[f"{url} {query}"] = leaks
    assert checked > 25
    assert found == {}


def _page_urls(world, project) -> list[str]:
    """Every HTML route of the site (admin and API aside), its arguments pointed at the world's
    objects; a route added later is scanned without touching this test."""
    from django.urls import URLPattern, URLResolver, get_resolver

    args = {
        "slug": project.slug,
        "number": world["release"].number,
        "run_id": 1,
        "item_id": 1,
        "trace_id": world["blind"].pk,
        "code": "2.1",
        "action": "open",
        "name": "data.jsonl",
    }
    version = project.taxonomy_version
    taxonomy_args = {"slug": version.taxonomy.slug, "number": version.number, "code": "2.1"}

    def walk(patterns, namespace=""):
        for p in patterns:
            if isinstance(p, URLResolver):
                ns = ":".join(x for x in (namespace, p.namespace or "") if x)
                if str(p.pattern) not in ("admin/", "api/"):
                    yield from walk(p.url_patterns, ns)
            elif isinstance(p, URLPattern) and p.name:
                yield (f"{namespace}:{p.name}" if namespace else p.name), list(p.pattern.converters)

    urls = []
    for name, params in walk(get_resolver().url_patterns):
        if name in ("logout", "login"):
            continue
        if "pk" in params:
            targets = [world["round"].pk] if ":round" in name else [world["blind"].pk, world["outside"].pk]
        else:
            targets = [None]
        for target in targets:
            kwargs = {k: (target if k == "pk" else args.get(k, 1)) for k in params}
            if name.startswith("taxonomy:"):
                kwargs.update({k: v for k, v in taxonomy_args.items() if k in kwargs})
            urls.append(reverse(name, kwargs=kwargs))
    return urls


def test_no_page_shows_another_raters_words(client, world, project, annotator):
    client.force_login(annotator)
    urls = _page_urls(world, project)
    assert len(urls) > 40
    workspace = reverse("annotations:workspace", args=[project.slug, world["blind"].pk])
    urls.append(f"{workspace}?round={world['round'].pk}")
    urls.append(reverse("trace_list", args=[project.slug]) + "?labelled=yes")
    urls.append(reverse("annotations:dashboard", args=[project.slug]) + "?format=csv")
    for f in world["release"].files.all():
        urls.append(reverse("annotations:release_file", args=[project.slug, world["release"].number, f.name]))
    found = {}
    for url in urls:
        response = client.get(url)
        assert response.status_code < 500, (url, response.status_code)
        if leaks := _leaks(response):
            found[url] = leaks
    assert found == {}


def test_the_release_card_says_what_was_withheld(client, world, project, manager):
    client.force_login(manager)
    html = client.get(reverse("annotations:release_list", args=[project.slug])).content.decode()
    assert "withheld" in html.lower()


def test_labelled_filter_does_not_tell_that_another_annotator_finished_a_blind_trace(
    client, world, project, annotator, annotator2
):
    """Issue 12, finding 5: ann2 submitted the open round's trace; for ann1 it is still unlabelled."""
    blind = world["blind"]
    api = APIClient()
    api.force_authenticate(annotator)
    labelled = api.get(f"/api/projects/{project.slug}/traces/", {"labelled": "yes"}).json()
    assert blind.pk not in [t["id"] for t in labelled["results"]]
    rows = {t["id"]: t for t in api.get(f"/api/projects/{project.slug}/traces/").json()["results"]}
    assert rows[blind.pk]["is_labelled"] is False
    client.force_login(annotator)
    html = client.get(reverse("trace_list", args=[project.slug]), {"labelled": "yes"}).content.decode()
    assert "in the open round" not in html
    # ann2 sees her own submission as labelled.
    api.force_authenticate(annotator2)
    labelled = api.get(f"/api/projects/{project.slug}/traces/", {"labelled": "yes"}).json()
    assert blind.pk in [t["id"] for t in labelled["results"]]
