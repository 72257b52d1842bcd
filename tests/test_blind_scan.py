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
from django.utils import timezone
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


# ------------------------------------------------------------------------------------------------
# Issue 27: one rule, walked everywhere. Every role, every state of a round, and traces shared
# between an earlier closed round and the one being labelled now.
# ------------------------------------------------------------------------------------------------

# Planted by ann2 (and the manager's adjudication and comment) in the EARLIER, closed round on the
# trace that the later round labels again: hidden from every non-manager while that round is
# draft or open.
EARLIER = ("ZQXEARLYRATIONALE", "ZQXEARLYNOTES", "zqxearlycode", "ZQXADJNOTE", "ZQXCOMMENTBODY")
# Planted by ann2 in the round being labelled now: hidden while it is draft or open.
NOW = ("ZQXNOWRATIONALE", "ZQXNOWNOTES", "zqxnowcode")
# ann2's own labels outside rounds: other humans' labels outside rounds stay hidden from
# annotators and viewers whatever the state.
SOLO = ("ZQXSOLORATIONALE", "ZQXSOLONOTES", "zqxsolocode")


def _labels_with(version, *, present: str, rationale: str) -> list[dict]:
    return [
        {
            "code": m.code,
            "decision": "present" if m.code == present else "absent",
            "evidence": [],
            "rationale": rationale if m.code == present else "",
        }
        for m in version.modes.all()
    ]


def _plant(trace, user, version, *, round=None, marker: str, present="2.1"):
    """``user``'s submitted annotation of ``trace`` carrying ``marker`` in a rationale, the notes
    and an open code (written through the label services, as a person would)."""
    ann = annotation_get_or_create(trace=trace, user=user, taxonomy_version=version, round=round)
    ann = annotation_save(
        annotation=ann,
        by=user,
        base_revision=ann.revision,
        labels=_labels_with(version, present=present, rationale=f"{marker}RATIONALE" if marker else ""),
        task_success="no",
        notes=f"{marker}NOTES" if marker else "",
        open_codes=[f"{marker.lower()}code"] if marker else [],
    )
    return annotation_submit(annotation=ann, by=user, base_revision=ann.revision)


def _shared_world(project, manager, annotator, annotator2, annotator3, state: str) -> dict:
    """Trace ``shared`` was in the earlier round (closed, revealed to its members) and is in the
    round ``now`` (in ``state``); ``earlier_only`` was only in the earlier round; ``solo`` was
    labelled by ann2 outside rounds. ann1 and ann2 label ``now``; ann3 labelled the earlier round."""
    from annotations.models import Adjudication, DisagreementComment, Round, RoundAnnotator, RoundTrace
    from annotations.rounds.services import agreement_report_get

    version = project.taxonomy_version
    shared = make_trace(project, title="shared between rounds")
    earlier_only = make_trace(project, title="earlier round only")
    fresh = make_trace(project, title="only in the round now")
    solo = make_trace(project, title="labelled outside rounds")
    earlier = Round.objects.create(
        project=project, name="Earlier round", taxonomy_version=version, state="open", reveal_in_review=True
    )
    for i, t in enumerate([shared, earlier_only]):
        RoundTrace.objects.create(round=earlier, trace=t, order=i)
    for u in (annotator2, annotator3):
        RoundAnnotator.objects.create(round=earlier, user=u)
    _plant(shared, annotator2, version, round=earlier, marker="ZQXEARLY")
    _plant(shared, annotator3, version, round=earlier, marker="", present="1.1")
    _plant(earlier_only, annotator2, version, round=earlier, marker="")
    _plant(earlier_only, annotator3, version, round=earlier, marker="")
    mode21 = version.modes.get(code="2.1")
    for m in version.modes.all():
        for t in (shared, earlier_only):
            disputed = t == shared and m.code in ("2.1", "1.1")
            Adjudication.objects.create(
                round=earlier,
                trace=t,
                mode=m,
                decision="present" if (t == shared and m.code == "2.1") else "absent",
                basis="adjudicated" if disputed else "unanimous",
                note="ZQXADJNOTE" if disputed else "",
                by=manager if disputed else None,
            )
    DisagreementComment.objects.create(round=earlier, trace=shared, mode=mode21, author=manager, body="ZQXCOMMENTBODY")
    Round.objects.filter(pk=earlier.pk).update(state="closed", closed_at=timezone.now())
    earlier.refresh_from_db()
    agreement_report_get(round=earlier)  # stored, as closing a round leaves it
    _plant(solo, annotator2, version, marker="ZQXSOLO")
    # A release built before the round now began holds the earlier consensus of ``shared``.
    release_policy_set(project=project, by=manager, members_may_download=True)
    release = release_create(
        project=project,
        by=manager,
        selection=Release.Selection.AGREED,
        filters={},
        options={"raters": True, "judge": True, "evidence": True, "trace_text": True},
        enqueue=False,
    )
    release = release_build(release_id=release.pk)
    assert release.status == Release.Status.DONE, release.error
    now = make_round(
        project,
        traces=[shared, fresh],
        annotators=[annotator, annotator2],
        state="open" if state != "draft" else "draft",
        name="Round now",
    )
    if state != "draft":
        _plant(shared, annotator2, version, round=now, marker="ZQXNOW")
        _plant(fresh, annotator2, version, round=now, marker="")
    if state in ("review", "closed"):
        Round.objects.filter(pk=now.pk).update(state=state, closed_at=timezone.now() if state == "closed" else None)
        now.refresh_from_db()
    return {
        "shared": shared,
        "earlier_only": earlier_only,
        "fresh": fresh,
        "solo": solo,
        "earlier": earlier,
        "now": now,
        "state": state,
        "release": release,
    }


def _must_not_see(role: str, state: str) -> tuple[str, ...]:
    """The markers ``role`` must not find anywhere while the round now is in ``state``."""
    blind = state in ("draft", "open")
    if role == "manager":  # not an annotator of either round: she adjudicates, she sees all
        return ()
    if role == "manager in the round":  # blind on the round's traces like any annotator of it
        return (EARLIER + NOW) if blind else ()
    return SOLO + ((EARLIER + NOW) if blind else ())


def _api_urls(world, project) -> list[str]:
    """Every GET path of the schema, each round-scoped one for both rounds and each trace-scoped
    one for every trace of the world."""
    api = APIClient()
    schema = api.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    rounds = [world["earlier"].pk, world["now"].pk]
    traces = [world[k].pk for k in ("shared", "earlier_only", "fresh", "solo")]
    urls = []
    for path, item in schema["paths"].items():
        if "get" not in item:
            continue
        pks = rounds if path.startswith("/api/rounds/") else traces
        if path.startswith("/api/taxonomy-versions/"):
            pks = [project.taxonomy_version_id]
        ids = traces if "{trace_id}" in path else [None]
        for pk in pks if "{pk}" in path or "{id}" in path else [None]:
            for tid in ids:
                values = {"slug": project.slug, "pk": str(pk), "id": str(pk), "trace_id": str(tid), "code": "2.1"}
                url = re.sub(r"\{(\w+)\}", lambda m, v=values: v.get(m.group(1), "1"), path)
                urls.append(url)
                if "/traces/" in path and "{pk}" in path:
                    urls += [f"{url}?round={r}" for r in rounds]
    for r in rounds:
        urls.append(f"/api/projects/{project.slug}/judge-comparison/?s=rater:1&round={r}")
    urls.append(f"/api/projects/{project.slug}/traces/?labelled=yes")
    urls.append(f"/api/projects/{project.slug}/open-codes/?q=zqx")
    return urls


def _site_pages(world, project) -> list[str]:
    """Every HTML route (admin and API aside) with its arguments pointed at the world's rounds and
    traces, plus the query strings that change what a page shows."""
    from django.urls import URLPattern, URLResolver, get_resolver

    version = project.taxonomy_version
    rounds = [world["earlier"].pk, world["now"].pk]
    traces = [world[k].pk for k in ("shared", "earlier_only", "fresh", "solo")]

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
        pks = [None]
        if "pk" in params:
            pks = rounds if ":round" in name else traces
        tids = traces if "trace_id" in params else [None]
        for pk in pks:
            for tid in tids:
                kwargs = {}
                for k in params:
                    kwargs[k] = {"pk": pk, "trace_id": tid, "slug": project.slug, "code": "2.1"}.get(k, 1)
                    if k == "action":
                        kwargs[k] = "open"
                    if k == "name":
                        kwargs[k] = "data.jsonl"
                if name.startswith("taxonomy:"):
                    kwargs.update(
                        {
                            k: v
                            for k, v in {"slug": version.taxonomy.slug, "number": version.number}.items()
                            if k in kwargs
                        }
                    )
                urls.append(reverse(name, kwargs=kwargs))
    slug = project.slug
    for t in traces:
        for r in rounds:
            urls.append(reverse("annotations:workspace", args=[slug, t]) + f"?round={r}")
    for r in rounds:
        for suffix in ("", "?status=all", "?status=decided", "?format=csv"):
            urls.append(reverse("annotations:round_disagreements", args=[slug, r]) + suffix)
        urls.append(reverse("annotations:agreed_labels", args=[slug]) + f"?round={r}")
        urls.append(reverse("annotations:judge_compare", args=[slug]) + f"?s=rater:1&round={r}")
    urls.append(reverse("trace_list", args=[slug]) + "?labelled=yes")
    urls.append(reverse("annotations:dashboard", args=[slug]) + "?format=csv")
    urls.append(reverse("annotations:code_list", args=[slug]) + "?q=zqx")
    release = world["release"]
    for f in release.files.all():
        urls.append(reverse("annotations:release_file", args=[slug, release.number, f.name]))
    return urls


ROLES = ("manager", "annotator in the round", "annotator not in it", "viewer", "manager in the round")


def _manager_in(round_now, project):
    """A second manager who labels in the round now."""
    from annotations.models import RoundAnnotator
    from tests.factories import MembershipFactory, UserFactory

    user = UserFactory(username="lead")
    MembershipFactory(project=project, user=user, role="manager")
    RoundAnnotator.objects.create(round=round_now, user=user)
    return user


@pytest.fixture
def annotator3(project):
    from tests.factories import MembershipFactory, UserFactory

    user = UserFactory(username="ann3")
    MembershipFactory(project=project, user=user, role="annotator")
    return user


@pytest.mark.parametrize("state", ["draft", "open", "review", "closed"])
def test_every_url_and_page_keeps_the_blind_rule_for_every_role(
    state, project, manager, annotator, annotator2, annotator3, viewer, client
):
    """Every GET of the schema and every page, for each role, with markers planted in the earlier
    round (on a trace labelled again now), in the round now and outside rounds: none of them where
    the blind rule hides them."""
    world = _shared_world(project, manager, annotator, annotator2, annotator3, state)
    lead = _manager_in(world["now"], project)
    actors = dict(zip(ROLES, (manager, annotator, annotator3, viewer, lead), strict=True))
    api_urls, page_urls = _api_urls(world, project), _site_pages(world, project)
    assert len(api_urls) > 60 and len(page_urls) > 80
    found = {}
    for role, user in actors.items():
        secrets = _must_not_see(role, state)
        api = APIClient()
        api.force_authenticate(user)
        client.force_login(user)
        for kind, fetch, urls in (("api", api.get, api_urls), ("page", client.get, page_urls)):
            for url in urls:
                response = fetch(url)
                assert response.status_code < 500, (role, url, response.status_code)
                texts = _texts(response)
                if leaks := sorted({s for s in secrets for text in texts if s in text}):
                    found[f"{role} {kind} {url}"] = leaks
    assert found == {}, "\n".join(f"{k}: {v}" for k, v in sorted(found.items()))


def _earlier_round_rows(response, shared_id: int) -> bool:
    """Whether a JSON answer about the earlier round lists the shared trace (a row whose labels are
    all "hidden" still tells that the raters disagreed there, and the consensus shows what on)."""
    try:
        body = response.json()
    except (TypeError, ValueError):
        return False
    rows = body.get("results", body) if isinstance(body, dict) else body
    text = json.dumps(rows)
    return bool(re.search(rf'"trace(_id)?": {shared_id}[,}}]', text))


@pytest.mark.parametrize("state", ["draft", "open"])
def test_an_earlier_round_lists_no_row_and_no_report_of_a_trace_labelled_blind_now(
    state, project, manager, annotator, annotator2, annotator3, viewer
):
    """The earlier round's consensus, disagreements, comments and report are about the shared trace
    too: while it is labelled blind again, no row of it is listed and the report is withheld, for
    every member but a manager who does not label it."""
    world = _shared_world(project, manager, annotator, annotator2, annotator3, state)
    earlier, shared = world["earlier"].pk, world["shared"].pk
    found = {}
    lead = _manager_in(world["now"], project)
    for role, user in zip(ROLES, (manager, annotator, annotator3, viewer, lead), strict=True):
        api = APIClient()
        api.force_authenticate(user)
        for part in ("adjudications", "disagreements", "comments"):
            response = api.get(f"/api/rounds/{earlier}/{part}/")
            if response.status_code == 200 and _earlier_round_rows(response, shared) and role != "manager":
                found[f"{role} {part}"] = "lists the shared trace"
        report = api.get(f"/api/rounds/{earlier}/agreement/")
        if role != "manager" and report.status_code == 200:
            found[f"{role} agreement"] = "report shown"
        if role == "manager":
            assert report.status_code == 200
            assert _earlier_round_rows(api.get(f"/api/rounds/{earlier}/adjudications/"), shared)
    assert found == {}


# The round's progress (how many annotations are submitted, not what they say) is shown to its
# annotators by design: the one count allowed to follow another rater's work.
PROGRESS_KEYS = ("n_submitted",)


def _normalised(response):
    """A JSON answer without what changes from one request to the next (times, revisions) and
    without the round's progress."""
    try:
        body = response.json()
    except (TypeError, ValueError):
        return None

    def clean(v):
        if isinstance(v, dict):
            return {
                k: clean(x)
                for k, x in v.items()
                if not k.endswith(("_at", "_ms")) and k not in ("revision", "at", *PROGRESS_KEYS)
            }
        if isinstance(v, list):
            return [clean(x) for x in v]
        return v

    return clean(body)


def test_nothing_an_annotator_reads_changes_when_another_rater_labels_blind(
    project, manager, annotator, annotator2, annotator3
):
    """Counts compared between raters: ann1's every API answer is the same before and after ann2
    submits her label of the shared trace in the open round (beyond what the round's progress says)."""
    world = _shared_world(project, manager, annotator, annotator2, annotator3, "draft")
    from annotations.models import Round

    Round.objects.filter(pk=world["now"].pk).update(state="open")
    world["now"].refresh_from_db()
    urls = [u for u in _api_urls(world, project) if "/download/" not in u]
    api = APIClient()
    api.force_authenticate(annotator)
    before = {u: (r.status_code, _normalised(r)) for u in urls for r in [api.get(u)]}
    _plant(world["shared"], annotator2, project.taxonomy_version, round=world["now"], marker="ZQXNOW")
    after = {u: (r.status_code, _normalised(r)) for u in urls for r in [api.get(u)]}
    changed = sorted(u for u in urls if before[u] != after[u])
    assert changed == [], changed


def test_a_manager_labelling_blind_cannot_act_on_an_earlier_rounds_withheld_trace(
    project, manager, annotator, annotator2, annotator3
):
    """Commenting on (or adjudicating) the earlier round's unit of a trace she labels blind now
    would answer with what she may not see: refused, while its other traces stay open to her."""
    world = _shared_world(project, manager, annotator, annotator2, annotator3, "open")
    lead = _manager_in(world["now"], project)
    api = APIClient()
    api.force_authenticate(lead)
    url = f"/api/rounds/{world['earlier'].pk}/comments/"
    refused = api.post(url, {"trace_id": world["shared"].pk, "mode": "2.1", "body": "x"}, format="json")
    assert refused.status_code == 403 and "blind" in refused.json()["detail"]
    adjudicate = api.post(
        f"/api/rounds/{world['earlier'].pk}/adjudications/",
        {"trace_id": world["shared"].pk, "mode": "2.1", "decision": "absent"},
        format="json",
    )
    assert adjudicate.status_code == 403
    allowed = api.post(url, {"trace_id": world["earlier_only"].pk, "mode": "2.1", "body": "fine"}, format="json")
    assert allowed.status_code == 201, allowed.content


@pytest.mark.parametrize("state", ["open", "closed"])
def test_analytics_agreed_labels_leave_out_a_trace_labelled_blind_again(
    state, project, manager, annotator, annotator2, annotator3
):
    """The analytics' agreed labels (every chart, CSV and drill-down filter is made of them) hold
    the earlier consensus of the shared trace for the manager, and for its raters only once the
    round that labels it again is no longer blind."""
    from annotations.analytics.selectors import AGREED, label_matrix, labels_fingerprint

    world = _shared_world(project, manager, annotator, annotator2, annotator3, state)
    shared = world["shared"].pk
    rows = {
        u.username: set(label_matrix(user=u, project=project, source=AGREED).trace_ids.tolist())
        for u in (manager, annotator, annotator3)
    }
    assert shared in rows["manager"]
    assert (shared in rows["ann1"]) == (state == "closed") == (shared in rows["ann3"])
    key = {u: labels_fingerprint(user=u, project=project, source=AGREED) for u in (manager, annotator)}
    assert (key[manager] == key[annotator]) == (state == "closed")  # the cached matrix is not shared
