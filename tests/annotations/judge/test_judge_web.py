"""Judge pages and API: managers only, the blind rule, query counts, the quality figures, the command."""

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from annotations.judge.baseline import baseline_run_execute
from annotations.judge.runs import judge_run_create, judge_run_start
from annotations.judge.selectors import binary_scores, judge_quality
from annotations.labels.visibility import annotations_visible_to
from annotations.models import Adjudication, Annotation, JudgeRun, Rater, Round, RoundAnnotator, RoundTrace
from tests.annotations.conftest import drive, make_judge_traces, post_run_form

pytestmark = pytest.mark.django_db


def llm_run(project, manager, server, **kw):
    return drive(
        judge_run_create(
            project=project,
            by=manager,
            provider="openai",
            base_url=server.url,
            model="test-model",
            start=False,
            timeout=5,
            **kw,
        )
    )


def closed_round(project, traces, present: dict[int, set[str]], name="Closed"):
    rnd = Round.objects.create(project=project, name=name, taxonomy_version=project.taxonomy_version, state="closed")
    from django.utils import timezone

    rnd.closed_at = timezone.now()
    rnd.save()
    modes = list(project.taxonomy_version.modes.all())
    for i, t in enumerate(traces):
        RoundTrace.objects.create(round=rnd, trace=t, order=i)
        Adjudication.objects.bulk_create(
            Adjudication(
                round=rnd,
                trace=t,
                mode=m,
                basis="unanimous",
                decision="present" if m.code in present.get(t.pk, set()) else "absent",
            )
            for m in modes
        )
    return rnd


# ---------------------------------------------------------------- permissions


@pytest.mark.parametrize("name", ["annotations:judge_list", "annotations:judge_run_new", "annotations:judge_prompt"])
def test_annotator_and_viewer_are_refused_and_outsider_sees_nothing(client, project, annotator, viewer, outsider, name):
    url = reverse(name, kwargs={"slug": project.slug})
    for user, code in ((annotator, 403), (viewer, 403), (outsider, 404)):
        client.force_login(user)
        assert client.get(url).status_code == code


def test_api_refuses_non_managers(client, project, annotator, outsider):
    client.force_login(annotator)
    assert client.get(f"/api/projects/{project.slug}/judge-runs/").status_code == 403
    client.force_login(outsider)
    assert client.get(f"/api/projects/{project.slug}/judge-runs/").status_code == 404


def test_anonymous_is_sent_to_login(client, project):
    resp = client.get(reverse("annotations:judge_list", kwargs={"slug": project.slug}))
    assert resp.status_code == 302 and "/login/" in resp["Location"]


# ---------------------------------------------------------------- pages


def test_manager_creates_a_run_from_the_form(client, project, manager, llm_server):
    make_judge_traces(project, 2)
    client.force_login(manager)
    resp = post_run_form(client, project, base_url=llm_server.url, model="m", api_key_env="")
    run = JudgeRun.objects.get()
    assert resp.status_code == 302 and resp["Location"].endswith(f"/judge/runs/{run.pk}/")
    assert run.n_total == 2 and run.state == "queued"


def test_form_shows_the_field_that_is_wrong(client, project, manager):
    make_judge_traces(project, 1)
    client.force_login(manager)
    resp = post_run_form(client, project, base_url="not a url", model="")
    assert resp.status_code == 200
    assert "http(s) URL" in resp.content.decode() and not JudgeRun.objects.exists()


def test_run_page_shows_progress_and_trace_content_escaped(client, project, manager, llm_server, fast_retries):
    traces = make_judge_traces(project, 2)
    traces[0].title = "<script>alert(1)</script>"
    traces[0].save()
    run = llm_run(project, manager, llm_server)
    client.force_login(manager)
    html = client.get(
        reverse("annotations:judge_run", kwargs={"slug": project.slug, "run_id": run.pk})
    ).content.decode()
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;" in html
    assert 'data-stat="done">2<' in html


def test_progress_fragment_polls_only_while_active(client, project, manager, llm_server, fast_retries):
    make_judge_traces(project, 1)
    run = judge_run_create(
        project=project, by=manager, provider="openai", base_url=llm_server.url, model="m", start=False
    )
    client.force_login(manager)
    url = reverse("annotations:judge_progress", kwargs={"slug": project.slug, "run_id": run.pk})
    live = client.get(url, headers={"HX-Request": "true"}).content.decode()
    assert 'hx-trigger="every 1s"' in live and '<span class="badge">pending</span>' in live
    drive(run)
    done = client.get(url, headers={"HX-Request": "true"})
    html = done.content.decode()
    # The last poll carries the items table too: no reload needed for "pending" to become "done".
    assert "hx-trigger" not in html and "HX-Refresh" not in done
    assert 'badge-ok">done' in html and '<span class="badge">pending</span>' not in html


def test_cancel_and_resume_from_the_page(client, project, manager, llm_server):
    make_judge_traces(project, 2)
    run = judge_run_create(
        project=project, by=manager, provider="openai", base_url=llm_server.url, model="m", start=False
    )
    client.force_login(manager)
    base = {"slug": project.slug, "run_id": run.pk}
    client.post(reverse("annotations:judge_run_action", kwargs={**base, "action": "cancel"}))
    run.refresh_from_db()
    assert run.state == "paused"
    client.post(reverse("annotations:judge_run_action", kwargs={**base, "action": "resume"}))
    run.refresh_from_db()
    assert run.state == "queued"


def test_prompt_page_saves_a_new_version(client, project, manager):
    client.force_login(manager)
    url = reverse("annotations:judge_prompt", kwargs={"slug": project.slug})
    text = client.get(url).context["form"].initial["text"]
    client.post(url, {"text": text + "\nExtra rule.", "notes": "stricter"})
    html = client.get(url).content.decode()
    assert "v2" in html and "stricter" in html


def test_list_page_query_count_does_not_grow_with_runs(client, project, manager, llm_server, django_assert_num_queries):
    make_judge_traces(project, 1)
    client.force_login(manager)
    url = reverse("annotations:judge_list", kwargs={"slug": project.slug})
    for _ in range(2):
        judge_run_create(
            project=project, by=manager, provider="openai", base_url=llm_server.url, model="m", start=False
        )
    client.get(url)
    with CaptureQueriesContext(connection) as few:
        client.get(url)
    for _ in range(8):
        judge_run_create(
            project=project, by=manager, provider="openai", base_url=llm_server.url, model="m", start=False
        )
    with django_assert_num_queries(len(few)):
        client.get(url)


# ---------------------------------------------------------------- API


def test_api_creates_lists_and_reads_a_run(client, project, manager, llm_server):
    make_judge_traces(project, 3)
    client.force_login(manager)
    resp = client.post(
        f"/api/projects/{project.slug}/judge-runs/",
        {
            "provider": "openai",
            "base_url": llm_server.url,
            "model": "m",
            "concurrency": 2,
        },
        content_type="application/json",
    )
    assert resp.status_code == 201, resp.content
    run_id = resp.json()["id"]
    listed = client.get(f"/api/projects/{project.slug}/judge-runs/").json()
    assert listed["count"] == 1 and listed["results"][0]["id"] == run_id
    detail = client.get(f"/api/projects/{project.slug}/judge-runs/{run_id}/").json()
    assert detail["progress"]["total"] == 3 and detail["progress"]["remaining"] == 3


def test_api_bad_input_says_which_field(client, project, manager):
    make_judge_traces(project, 1)
    client.force_login(manager)
    resp = client.post(
        f"/api/projects/{project.slug}/judge-runs/",
        {"provider": "openai", "base_url": "x"},
        content_type="application/json",
    )
    assert resp.status_code == 400 and "base_url" in resp.json()["errors"] and "model" in resp.json()["errors"]


def test_api_items_list_is_paginated_with_constant_queries(
    client, project, manager, llm_server, fast_retries, django_assert_num_queries
):
    make_judge_traces(project, 6)
    run = llm_run(project, manager, llm_server)
    client.force_login(manager)
    url = f"/api/projects/{project.slug}/judge-runs/{run.pk}/items/"
    client.get(url)
    with CaptureQueriesContext(connection) as ctx:
        data = client.get(url).json()
    assert data["count"] == 6 and data["results"][0]["raw_answer"]
    make_judge_traces(project, 6, start=100)
    run2 = llm_run(project, manager, llm_server)
    with django_assert_num_queries(len(ctx)):
        client.get(f"/api/projects/{project.slug}/judge-runs/{run2.pk}/items/")


def test_api_cancel_of_a_finished_run_is_a_conflict(client, project, manager, llm_server, fast_retries):
    make_judge_traces(project, 1)
    run = llm_run(project, manager, llm_server)
    client.force_login(manager)
    resp = client.post(f"/api/projects/{project.slug}/judge-runs/{run.pk}/cancel/")
    assert resp.status_code == 409


def test_api_prompt_versions(client, project, manager):
    client.force_login(manager)
    url = f"/api/projects/{project.slug}/judge-prompts/"
    first = client.get(url).json()["results"][0]
    resp = client.post(url, {"text": first["text"] + "\nMore."}, content_type="application/json")
    assert resp.status_code == 201 and resp.json()["number"] == 2
    assert client.post(url, {"text": "nothing"}, content_type="application/json").status_code == 400


# ---------------------------------------------------------------- quality


def test_binary_scores_match_hand_counts():
    s = binary_scores([(1, 1), (1, 0), (0, 1), (0, 0), (0, 0)])
    assert (s["tp"], s["fp"], s["fn"], s["tn"]) == (1, 1, 1, 2)
    assert s["accuracy"]["value"] == pytest.approx(0.6)
    assert s["precision"]["value"] == pytest.approx(0.5) and s["recall"]["value"] == pytest.approx(0.5)
    assert s["kappa"]["value"] == pytest.approx(1 / 6)


def test_precision_is_undefined_when_the_judge_never_says_present():
    s = binary_scores([(1, 0), (0, 0)])
    assert s["precision"]["value"] is None and "never said present" in s["precision"]["undefined"]


def test_quality_compares_with_agreed_labels_and_lists_disagreements(
    client, project, manager, llm_server, fast_retries
):
    traces = make_judge_traces(project, 3)
    # the scripted judge says 1.1 present everywhere; humans agree on trace 0 only, and add 2.1 on trace 1
    closed_round(project, traces, {traces[0].pk: {"1.1"}, traces[1].pk: {"2.1"}})
    run = llm_run(project, manager, llm_server)
    q = judge_quality(run=run, user=manager)
    m11 = next(m for m in q["modes"] if m["code"] == "1.1")
    assert (m11["tp"], m11["fp"], m11["fn"], m11["tn"]) == (1, 2, 0, 0)
    assert q["overall"]["n"] == 3 * 14
    worst = q["disagreements"][0]
    assert worst["trace_id"] == traces[1].pk and worst["n"] == 2
    client.force_login(manager)
    data = client.get(f"/api/projects/{project.slug}/judge-runs/{run.pk}/quality/").json()
    assert data["overall"]["tp"] == 1
    html = client.get(reverse("annotations:judge_quality", kwargs={"slug": project.slug, "run_id": run.pk})).content
    assert b"Worst disagreements" in html
    assert f"?raters=humans%2B{run.rater_id}".encode() in html  # the judge as one more rater in the round report


def test_quality_hides_judge_labels_of_a_managers_own_open_round(project, manager, llm_server, fast_retries):
    traces = make_judge_traces(project, 2)
    closed_round(project, traces, {})
    run = llm_run(project, manager, llm_server)
    assert judge_quality(run=run, user=manager)["overall"]["n"] == 28
    open_round = Round.objects.create(
        project=project, name="Open", taxonomy_version=project.taxonomy_version, state="open"
    )
    RoundTrace.objects.create(round=open_round, trace=traces[0])
    RoundAnnotator.objects.create(round=open_round, user=manager)
    assert judge_quality(run=run, user=manager)["overall"]["n"] == 14


def test_judge_labels_are_hidden_from_annotators_in_blind_rounds(project, manager, annotator, llm_server, fast_retries):
    traces = make_judge_traces(project, 2)
    project.reveal_suggestions = True
    project.save()
    run = llm_run(project, manager, llm_server)
    rnd = Round.objects.create(project=project, name="Blind", taxonomy_version=project.taxonomy_version, state="open")
    RoundTrace.objects.create(round=rnd, trace=traces[0])
    visible = annotations_visible_to(user=annotator, project=project).filter(rater=run.rater)
    assert list(visible.values_list("trace_id", flat=True)) == [traces[1].pk]


def test_judge_labels_stay_hidden_without_reveal_suggestions(project, manager, annotator, llm_server, fast_retries):
    make_judge_traces(project, 1)
    run = llm_run(project, manager, llm_server)
    assert not annotations_visible_to(user=annotator, project=project).filter(rater=run.rater).exists()


# ---------------------------------------------------------------- baseline + command


def imported_labels(project, traces, keyword_present):
    rater, _ = Rater.objects.get_or_create(name="MAST-Data judge", defaults={"kind": "imported"})
    modes = {m.code: m for m in project.taxonomy_version.modes.all()}
    from annotations.models import ModeLabel

    for t in traces:
        ann = Annotation.objects.create(
            trace=t, rater=rater, taxonomy_version=project.taxonomy_version, state="submitted"
        )
        present = keyword_present(t)
        ModeLabel.objects.bulk_create(
            ModeLabel(annotation=ann, mode=m, decision="present" if (code == "1.1" and present) else "absent")
            for code, m in modes.items()
        )
    return rater


def test_baseline_run_trains_on_an_imported_rater_and_labels_every_trace(project, manager):
    traces = make_judge_traces(project, 12, words="plain") + make_judge_traces(
        project, 12, words="crash traceback", start=50
    )
    imported_labels(project, traces, lambda t: "crash" in t.raw_text)
    run = judge_run_create(project=project, by=manager, provider="baseline", start=False)
    judge_run_start(run_id=run.pk)
    run.refresh_from_db()
    assert run.state == "done" and run.n_done == 24
    assert run.rater.kind == "baseline" and run.rater.name == "baseline tf-idf+logreg · MAST-Data judge"
    assert run.baseline_info["modes"][0]["code"] == "1.1"
    label = Annotation.objects.filter(rater=run.rater, trace=traces[-1]).get().labels.get(mode__code="1.1")
    assert label.decision == "present" and 0.5 <= label.confidence <= 1
    assert baseline_run_execute(run_id=run.pk).n_done == 24  # again: nothing changes


def test_baseline_without_any_labels_fails_with_a_reason(project, manager):
    make_judge_traces(project, 3)
    run = judge_run_create(project=project, by=manager, provider="baseline", start=False)
    judge_run_start(run_id=run.pk)
    run.refresh_from_db()
    assert run.state == "failed" and "Nothing to train" in run.error


@pytest.mark.django_db(transaction=True)
def test_prelabel_command_inline_runs_to_the_end(project, llm_server, fast_retries, capsys):
    make_judge_traces(project, 3)
    call_command(
        "prelabel",
        "--project",
        project.slug,
        "--provider",
        "openai",
        "--base-url",
        llm_server.url,
        "--model",
        "cli-model",
        "--concurrency",
        "2",
        "--inline",
    )
    out = capsys.readouterr().out
    assert "done: 3 labelled, 0 failed" in out and "100%" in out


@pytest.mark.django_db(transaction=True)
def test_prelabel_command_exits_non_zero_when_the_run_fails(project, llm_server, fast_retries):
    from tests.llm_server import Status

    make_judge_traces(project, 1)
    llm_server.push(Status(401))
    with pytest.raises(CommandError, match="failed"):
        call_command("prelabel", "--project", project.slug, "--base-url", llm_server.url, "--model", "m", "--inline")


def test_prelabel_command_rejects_an_unknown_project(db):
    with pytest.raises(CommandError, match="No project"):
        call_command("prelabel", "--project", "nope", "--base-url", "http://x", "--model", "m")
