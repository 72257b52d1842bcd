"""Corpus search into the loop: the blind rule on label filters, a search turned into an open code,
a round sample and a draft mode's examples, each undone; the page's forms."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from annotations.corpus.selectors import CorpusQuery, QueryError, corpus_search
from annotations.corpus.services import (
    search_action_undo,
    search_code_apply,
    search_examples_apply,
    search_sample_apply,
)
from annotations.models import Annotation, AnnotationEvent, OpenCode, Round, RoundTrace
from tests.annotations.releases_factories import annotate, closed_round, decisions, human_rater, make_trace, other_rater
from tests.annotations.rounds_factories import make_open_round
from traces.models import Step
from traces.search.indexing import steps_index_pending

pytestmark = pytest.mark.django_db


def with_steps(project, texts, **kw):
    t = make_trace(project, raw_text="\n".join(texts), **kw)
    for i, text in enumerate(texts):
        Step.objects.create(trace=t, index=i, agent=("Planner", "Verifier")[i % 2], content=text, line_start=i + 1,
                            line_end=i + 1)  # fmt: skip
    return t


@pytest.fixture
def traces(project):
    made = [
        with_steps(
            project,
            ["plan the game", f"the verifier approved it without running tests ({i})"],
            mas_name=("ChatDev", "MetaGPT")[i % 2],
        )  # fmt: skip
        for i in range(6)
    ] + [with_steps(project, ["nothing to see here"])]
    steps_index_pending()
    return made


def ids(result) -> set[int]:
    return set(result.trace_ids)


@pytest.fixture(params=["window", "index, few traces", "index, many traces"])
def way(request, monkeypatch):
    """The newest window holds the whole corpus; else the index, the label filter's traces looked
    up by trace (a few) or as a filter on the index's candidates (many: finding.FEW_TRACES)."""
    from annotations.corpus import finding

    if request.param != "window":
        monkeypatch.setattr(finding, "WINDOW_BYTES", 1)
        monkeypatch.setattr(finding, "MORE_BYTES", 0)
        monkeypatch.setattr(finding, "COMMON_BYTES", 0)
    if request.param == "index, many traces":
        monkeypatch.setattr(finding, "FEW_TRACES", 0)
    return request.param


def test_label_filters_never_show_a_blind_raters_others_labels(project, mast_version, manager, annotator,
                                                                 annotator2, traces, way):  # fmt: skip
    a, b, c = traces[0], traces[1], traces[2]
    closed_round(project, mast_version, {a: {"1.1"}, b: set(), c: {"1.1"}})
    # a is labelled blind again now, by annotator and annotator2
    rnd = make_open_round(project, manager=manager, annotators=[annotator, annotator2], traces=[a])
    annotate(a, human_rater(annotator2), mast_version, decisions(mast_version, {"1.5"}), round=rnd)
    judge = other_rater("corpus-judge")
    for t in traces[:6]:
        annotate(t, judge, mast_version, decisions(mast_version, {"1.3"}))
    word = "approved"
    agreed = CorpusQuery(q=word, labels=(CorpusQuery.from_query({"label": "agreed:1.1:present"}).labels))
    # the manager (not labelling in the open round) sees the consensus on a and c
    assert ids(corpus_search(user=manager, project=project, query=agreed)) == {a.pk, c.pk}
    # the annotator labels a blind: the consensus on a is not there for her (as on the dashboard)
    assert ids(corpus_search(user=annotator, project=project, query=agreed)) == {c.pk}
    absent = CorpusQuery.from_query({"q": word, "label": "agreed:1.1:absent"})
    assert ids(corpus_search(user=annotator, project=project, query=absent)) == {b.pk}
    # another rater's labels in the open round, and a judge's while suggestions are hidden: refused
    # like a source that does not exist (same message), so the answer tells nothing
    other = human_rater(annotator2).pk
    for source in (str(other), str(judge.pk), "999999"):
        with pytest.raises(QueryError, match="no label source"):
            corpus_search(user=annotator, project=project,
                          query=CorpusQuery.from_query({"q": word, "label": f"{source}:1.5:present"}))  # fmt: skip
    # the manager may filter by the judge
    judged = CorpusQuery.from_query({"q": word, "label": f"{judge.pk}:1.3:present"})
    assert ids(corpus_search(user=manager, project=project, query=judged)) == {t.pk for t in traces[:6]}


def test_label_filter_through_the_api_for_a_blind_annotator(client, project, mast_version, manager, annotator,
                                                            annotator2, traces):  # fmt: skip
    a = traces[0]
    closed_round(project, mast_version, {a: {"1.1"}})
    make_open_round(project, manager=manager, annotators=[annotator, annotator2], traces=[a])
    client.force_login(annotator)
    body = client.get(reverse("api-corpus-search", args=[project.slug]),
                      {"q": "approved", "label": "agreed:1.1:present"}).json()  # fmt: skip
    assert body["n_traces"] == 0 and body["traces"] == []


def test_a_search_becomes_an_open_code_and_is_undone(project, mast_version, annotator, traces):
    mine = annotate(traces[0], human_rater(annotator), mast_version, decisions(mast_version, {"2.6"}))
    query = CorpusQuery(q="approved without running")
    hits = corpus_search(user=annotator, project=project, query=query).trace_ids
    assert set(hits) == {t.pk for t in traces[:6]}
    action = search_code_apply(project=project, by=annotator, trace_ids=hits, name="approves  untested ",
                               query=query.as_dict())  # fmt: skip
    code = OpenCode.objects.get(project=project, name="approves untested")
    coded = Annotation.objects.filter(open_codes=code, rater__user=annotator, round__isnull=True)
    assert set(coded.values_list("trace_id", flat=True)) == set(hits)
    assert len(action.detail["created"]) == 5  # traces[0] had her annotation already
    mine.refresh_from_db()
    assert mine.revision == 1 and AnnotationEvent.objects.filter(annotation=mine, action="search").count() == 1
    # the same action again changes nothing new
    again = search_code_apply(project=project, by=annotator, trace_ids=hits, name="approves untested", query={})
    assert again.detail["added"] == [] and again.detail["created"] == []
    # she writes in one of the annotations the action created
    touched = Annotation.objects.get(pk=action.detail["created"][0])
    Annotation.objects.filter(pk=touched.pk).update(notes="looked at it")
    undone = search_action_undo(action=action, by=annotator)
    assert "1 annotation(s) it had created kept" in undone.undone_note
    assert not Annotation.objects.filter(open_codes=code).exists()
    assert set(Annotation.objects.filter(rater__user=annotator).values_list("pk", flat=True)) == {mine.pk, touched.pk}
    assert mine.labels.count() == len(decisions(mast_version))  # her labels untouched
    with pytest.raises(ValidationError, match="undone already"):
        search_action_undo(action=action, by=annotator)


def test_a_search_becomes_a_round_sample_and_is_undone(project, mast_version, manager, annotator, annotator2, traces):
    draft = Round.objects.create(project=project, name="Next", taxonomy_version=mast_version, state="draft")
    RoundTrace.objects.create(round=draft, trace=traces[0], order=0)
    hits = corpus_search(user=manager, project=project, query=CorpusQuery(q="approved")).trace_ids
    every = search_sample_apply(project=project, by=manager, trace_ids=hits, round=draft, query={})
    assert every.detail["already_in_round"] == 1 and len(every.trace_ids) == 5
    assert set(draft.round_traces.values_list("trace_id", flat=True)) == set(hits)
    search_action_undo(action=every, by=manager)
    assert list(draft.round_traces.values_list("trace_id", flat=True)) == [traces[0].pk]
    strat = search_sample_apply(project=project, by=manager, trace_ids=hits, round=draft, how="stratified", n=2,
                                stratify_by="framework", query={})  # fmt: skip
    picked = list(draft.round_traces.exclude(trace=traces[0]).values_list("trace__mas_name", flat=True))
    assert sorted(picked) == ["ChatDev", "MetaGPT"]  # one per framework
    Round.objects.filter(pk=draft.pk).update(state="open")
    with pytest.raises(ValidationError, match="has opened"):
        search_action_undo(action=strat, by=manager)
    with pytest.raises(ValidationError, match="only a draft round"):
        search_sample_apply(project=project, by=manager, trace_ids=hits, round=draft, query={})


def test_annotators_cannot_change_rounds(project, mast_version, annotator, traces):
    from django.core.exceptions import PermissionDenied

    draft = Round.objects.create(project=project, name="Next", taxonomy_version=mast_version, state="draft")
    with pytest.raises(PermissionDenied):
        search_sample_apply(project=project, by=annotator, trace_ids=[traces[0].pk], round=draft, query={})


def test_a_search_becomes_a_draft_modes_examples_and_is_undone(project, mast_version, manager, traces):
    from taxonomy.services import version_draft_next

    draft = version_draft_next(source=mast_version, by=manager)
    mode = draft.modes.get(code="3.2")
    before = mode.examples
    hits = [{"trace": traces[0].pk, "step": 1, "agent": "Verifier", "text": "the verifier approved it"}]
    action = search_examples_apply(project=project, by=manager, mode=mode, hits=hits, query={"q": "approved"})
    mode.refresh_from_db()
    assert mode.examples.startswith(before.rstrip())
    assert f"Trace {traces[0].pk}, step 1 (Verifier): “the verifier approved it”" in mode.examples
    search_action_undo(action=action, by=manager)
    mode.refresh_from_db()
    assert mode.examples == before
    with pytest.raises(ValidationError, match="published version"):
        search_examples_apply(project=project, by=manager, mode=mast_version.modes.get(code="3.2"), hits=hits,
                              query={})  # fmt: skip


def test_the_page_turns_a_search_into_a_code_and_undoes_it(client, project, annotator, traces):
    client.force_login(annotator)
    url = reverse("annotations:corpus_search", args=[project.slug])
    page = client.get(url, {"q": "approved"})
    assert page.status_code == 200 and "<b>6</b> steps in <b>6</b> traces" in page.content.decode()
    resp = client.post(url, {"q": "approved", "op": "action", "do": "code", "name": "no tests run"}, follow=True)
    assert "Done: open code on the hits, 6 trace(s)" in resp.content.decode()
    action = resp.context["actions"][0]
    assert len(action.trace_ids) == 6
    resp = client.post(url, {"q": "approved", "op": "undo", "id": action.pk}, follow=True)
    assert b"Undone: code &#x27;no tests run&#x27; taken off 6 annotation(s)" in resp.content
    assert not OpenCode.objects.filter(name="no tests run").exists()


def test_the_api_acts_and_undoes(client, project, mast_version, manager, traces):
    draft = Round.objects.create(project=project, name="Next", taxonomy_version=mast_version, state="draft")
    client.force_login(manager)
    url = reverse("api-search-actions", args=[project.slug])
    made = client.post(url, {"do": "sample", "to_round": draft.pk, "q": "approved"}, content_type="application/json")
    assert made.status_code == 201, made.json()
    assert made.json()["n_traces"] == 6
    assert client.get(url).json()["actions"][0]["id"] == made.json()["id"]
    undo = client.post(reverse("api-search-action-undo", args=[project.slug, made.json()["id"]]))
    assert undo.status_code == 200 and undo.json()["undone_at"]
    assert not draft.round_traces.exists()
    bad = client.post(url, {"do": "sample", "to_round": draft.pk, "q": "a.b", "mode": "regex"},
                      content_type="application/json")  # fmt: skip
    assert bad.status_code == 400 and "3 plain characters" in bad.json()["detail"]


def test_a_viewer_searches_but_changes_nothing(client, project, viewer, traces):
    client.force_login(viewer)
    url = reverse("annotations:corpus_search", args=[project.slug])
    page = client.get(url, {"q": "approved"}).content.decode()
    assert "<b>6</b> steps" in page and "Into the loop" not in page
    resp = client.post(url, {"q": "approved", "op": "action", "do": "code", "name": "x"}, follow=True)
    assert "Only annotators" in resp.content.decode() and not OpenCode.objects.exists()
    api = client.post(reverse("api-search-actions", args=[project.slug]), {"do": "code", "name": "x", "q": "approved"},
                      content_type="application/json")  # fmt: skip
    assert api.status_code == 403 and not OpenCode.objects.exists()
    assert client.get(reverse("api-behaviour-searches", args=[project.slug])).status_code == 403


def test_an_action_on_more_hits_than_it_reads_is_refused(client, project, annotator, traces, monkeypatch):
    from annotations.corpus import selectors

    monkeypatch.setattr(selectors, "HIT_CAP", 2)
    monkeypatch.setattr(selectors, "ACTION_CAP", 4)
    client.force_login(annotator)
    url = reverse("annotations:corpus_search", args=[project.slug])
    page = client.get(url, {"q": "approved"}).content.decode()
    assert 'data-testid="search-capped"' in page and "Into the loop" in page  # the page reads 2, acts on 4
    resp = client.post(url, {"q": "approved", "op": "action", "do": "code", "name": "x"}, follow=True)
    assert "More than 4 steps match" in resp.content.decode() and not OpenCode.objects.exists()
    resp = client.post(url, {"q": "approved", "op": "action", "do": "code", "name": "x", "framework": "ChatDev"},
                       follow=True)  # fmt: skip
    assert "Done: open code on the hits, 3 trace(s)" in resp.content.decode()
