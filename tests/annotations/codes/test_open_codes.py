"""The open-codes page: uses, raters, steps, co-occurring modes, the blind rule; rename, merge, promote."""

from __future__ import annotations

import pytest
from django.urls import reverse

from annotations.codes.selectors import open_code_overview, open_code_uses
from annotations.codes.services import open_code_merge, open_code_promote, open_code_rename
from annotations.labels.services import annotation_get_or_create, annotation_save, annotation_submit
from annotations.models import Annotation, AnnotationEvent, OpenCode
from taxonomy.models import FailureMode, ModeMapping, TaxonomyVersion
from tests.annotations.workspace_factories import all_labels, make_round, make_trace

pytestmark = pytest.mark.django_db


def code(user, trace, names, *, round=None, present=("1.3",), step=2, rationale="loops on the same call", submit=False):
    version = trace.project.taxonomy_version
    ann = annotation_get_or_create(trace=trace, user=user, taxonomy_version=version, round=round)
    labels = all_labels(version) if submit else []
    labels = [lab for lab in labels if lab["code"] not in present]
    labels += [
        {"code": c, "decision": "present", "evidence": [{"step": step}], "rationale": rationale} for c in present
    ]
    ann = annotation_save(
        annotation=ann, by=user, base_revision=ann.revision, labels=labels, notes="", open_codes=list(names)
    )
    if submit:
        ann = annotation_submit(annotation=ann, by=user, base_revision=ann.revision)
    return ann


def row(rows, name):
    return next(r for r in rows if r.code.name == name)


def test_overview_counts_uses_traces_raters_and_modes_present_beside(project, manager, annotator, annotator2):
    t1, t2 = make_trace(project), make_trace(project)
    code(annotator, t1, ["retry loop"], present=("1.3",))
    code(annotator2, t1, ["retry loop"], present=("1.3", "3.1"))
    code(annotator2, t2, ["retry loop", "gave up"], present=("1.5",))
    r = row(open_code_overview(project=project, user=manager), "retry loop")
    assert (r.n_uses, r.n_visible, len(r.trace_ids)) == (3, 3, 2)
    assert r.rater_names == ["ann1", "ann2"]
    assert dict(r.modes) == {"1.3": 1, "3.1": 1, "1.5": 1}  # traces, not annotations: 1.3 twice on t1 counts once


def test_uses_list_the_steps_each_annotation_cites_and_its_rationale(project, manager, annotator):
    t = make_trace(project, n_steps=8)
    code(annotator, t, ["retry loop", "another code"], present=("1.3",), step=5, rationale="same call five times")
    oc = OpenCode.objects.get(name="retry loop")
    (use,) = open_code_uses(project=project, user=manager, code=oc)
    assert use.steps == [5] and use.present == ["1.3"]
    assert use.rationales == [("1.3", "same call five times")]
    assert "step 5" in use.excerpt


def test_annotator_in_a_blind_round_sees_neither_others_codes_nor_their_uses(project, manager, annotator, annotator2):
    t = make_trace(project)
    rnd = make_round(project, traces=[t], annotators=[annotator, annotator2], state="open")
    code(annotator2, t, ["secret word"], round=rnd)
    code(annotator, t, ["mine"], round=rnd)
    names = {r.code.name for r in open_code_overview(project=project, user=annotator)}
    assert names == {"mine"}
    client_codes = {r.code.name for r in open_code_overview(project=project, user=manager)}
    assert client_codes == {"mine", "secret word"}  # the manager does not label in the round


def test_annotator_sees_a_revealed_rounds_uses_only_on_traces_she_submitted(project, annotator, annotator2):
    t1, t2 = make_trace(project), make_trace(project)
    rnd = make_round(project, traces=[t1, t2], annotators=[annotator, annotator2], state="open")
    code(annotator2, t1, ["shared"], round=rnd, submit=True)
    code(annotator2, t2, ["shared"], round=rnd, submit=True)
    code(annotator, t1, ["other"], round=rnd, submit=True)
    rnd.state = "review"
    rnd.save()
    r = row(open_code_overview(project=project, user=annotator), "shared")
    # t2 is held back (anti-anchoring), and not counted either (issue 27)
    assert r.n_uses == 1 and r.n_visible == 1 and r.trace_ids == {t1.pk}


def test_code_page_of_a_blind_code_is_404_for_the_annotator(client, project, annotator, annotator2):
    t = make_trace(project)
    rnd = make_round(project, traces=[t], annotators=[annotator, annotator2], state="open")
    code(annotator2, t, ["secret word"], round=rnd)
    oc = OpenCode.objects.get(name="secret word")
    client.force_login(annotator)
    assert client.get(reverse("annotations:code_detail", args=[project.slug, oc.pk])).status_code == 404
    page = client.get(reverse("annotations:code_list", args=[project.slug])).content.decode()
    assert "secret word" not in page


def test_list_page_shows_codes_and_pins_its_queries(client, project, manager, annotator, django_assert_max_num_queries):
    for i in range(6):
        code(annotator, make_trace(project), [f"code {i}", "common"])
    client.force_login(manager)
    url = reverse("annotations:code_list", args=[project.slug])
    client.get(url)
    with django_assert_max_num_queries(14):
        r = client.get(url)
    body = r.content.decode()
    assert r.status_code == 200 and "common" in body and "code 5" in body


def test_rename_changes_every_use_writes_history_and_raises_the_revision(project, manager, annotator):
    ann = code(annotator, make_trace(project), ["retry lop"])
    oc = OpenCode.objects.get(name="retry lop")
    assert open_code_rename(project=project, code=oc, name="retry loop", by=manager) == 1
    ann.refresh_from_db()
    assert list(ann.open_codes.values_list("name", flat=True)) == ["retry loop"]
    event = AnnotationEvent.objects.filter(annotation=ann).latest("id")
    assert event.action == "recode" and event.by == manager and event.revision == ann.revision
    assert event.before["open_codes"] == ["retry lop"] and event.after["open_codes"] == ["retry loop"]


def test_a_stale_editor_gets_a_conflict_after_a_rename(project, manager, annotator):
    from annotations.labels.services import AnnotationConflict

    ann = code(annotator, make_trace(project), ["retry lop"])
    stale = ann.revision
    open_code_rename(project=project, code=OpenCode.objects.get(name="retry lop"), name="retry loop", by=manager)
    with pytest.raises(AnnotationConflict):
        annotation_save(annotation=ann, by=annotator, base_revision=stale, labels=[], open_codes=["retry lop", "x"])


def test_rename_onto_an_existing_name_is_refused_as_a_merge(project, manager, annotator):
    from django.core.exceptions import ValidationError

    code(annotator, make_trace(project), ["a", "b"])
    with pytest.raises(ValidationError, match="merge"):
        open_code_rename(project=project, code=OpenCode.objects.get(name="a"), name="b", by=manager)


def test_merge_moves_uses_and_keeps_one_code_per_annotation(project, manager, annotator):
    both = code(annotator, make_trace(project), ["loop", "retry loop"])
    one = code(annotator, make_trace(project), ["loop"])
    loop, retry = OpenCode.objects.get(name="loop"), OpenCode.objects.get(name="retry loop")
    assert open_code_merge(project=project, codes=[loop], into=retry, by=manager) == 2
    assert not OpenCode.objects.filter(name="loop").exists()
    for ann in (both, one):
        assert list(ann.open_codes.values_list("name", flat=True)) == ["retry loop"]


def test_annotator_may_not_rename_or_merge(client, project, annotator):
    code(annotator, make_trace(project), ["a", "b"])
    a, b = OpenCode.objects.get(name="a"), OpenCode.objects.get(name="b")
    client.force_login(annotator)
    assert client.post(reverse("annotations:code_rename", args=[project.slug, a.pk]), {"name": "z"}).status_code == 403
    assert client.post(reverse("annotations:code_merge", args=[project.slug, a.pk]), {"into": b.pk}).status_code == 403
    assert OpenCode.objects.filter(name__in=["a", "b"]).count() == 2


def test_rename_needs_the_csrf_token(project, manager, annotator):
    from django.test import Client

    code(annotator, make_trace(project), ["a"])
    a = OpenCode.objects.get(name="a")
    c = Client(enforce_csrf_checks=True)
    c.force_login(manager)
    assert c.post(reverse("annotations:code_rename", args=[project.slug, a.pk]), {"name": "z"}).status_code == 403
    assert OpenCode.objects.filter(name="a").exists()


def test_promote_adds_a_mode_to_the_next_draft_seeded_and_mapped(project, manager, annotator):
    code(annotator, make_trace(project, n_steps=6), ["retry loop"], step=3, rationale="calls the tool again")
    oc = OpenCode.objects.get(name="retry loop")
    mode = open_code_promote(
        project=project, code=oc, by=manager, mode_code="1.6", name="Retry loop", definition="Retries without change."
    )
    draft = mode.version
    assert draft.status == TaxonomyVersion.Status.DRAFT and draft.parent == project.taxonomy_version
    assert "calls the tool again" in mode.examples and "step 3" in mode.examples
    row_ = ModeMapping.objects.get(version=draft, new_code="1.6")
    assert row_.kind == "add" and "retry loop" in row_.note
    oc.refresh_from_db()
    assert oc.promoted_mode == mode and oc.promoted_how == "add"


def test_promote_writes_into_the_draft_a_round_revision_started(project, manager, annotator):
    from annotations.rounds.services import round_revise_definition

    t = make_trace(project)
    rnd = make_round(project, traces=[t], annotators=[annotator], state="closed")
    revised = round_revise_definition(round=rnd, mode_code="1.5", definition="Sharper.", by=manager)
    code(annotator, make_trace(project), ["gave up"])
    mode = open_code_promote(
        project=project, code=OpenCode.objects.get(name="gave up"), by=manager, extend="1.5", definition=""
    )
    assert mode.version == revised.version and mode.definition == "Sharper."
    assert "gave up" in mode.examples
    assert "gave up" in ModeMapping.objects.get(version=mode.version, new_code="1.5").note


def test_promote_page_posts_and_shows_the_promotion(client, project, manager, annotator):
    code(annotator, make_trace(project), ["retry loop"])
    oc = OpenCode.objects.get(name="retry loop")
    client.force_login(manager)
    url = reverse("annotations:code_promote", args=[project.slug, oc.pk])
    page = client.get(url).content.decode()
    assert "1.6" in page and "loops on the same call" in page  # a free code and the seeded examples
    r = client.post(
        url,
        {
            "how": "add",
            "mode_code": "1.6",
            "name": "Retry loop",
            "definition": "Retries the same call.",
            "examples": "x",
        },
    )
    assert r.status_code == 302
    assert FailureMode.objects.filter(code="1.6", version__status="draft").exists()
    detail = client.get(reverse("annotations:code_detail", args=[project.slug, oc.pk])).content.decode()
    assert "1.6 Retry loop" in detail


def test_annotations_untouched_when_a_promotion_is_refused(project, manager, annotator):
    from django.core.exceptions import ValidationError

    code(annotator, make_trace(project), ["x"])
    before = TaxonomyVersion.objects.count()
    with pytest.raises(ValidationError):
        open_code_promote(
            project=project, code=OpenCode.objects.get(name="x"), by=manager, mode_code="1.1", name="X", definition="d"
        )
    assert TaxonomyVersion.objects.count() == before  # the draft it started was rolled back
    assert Annotation.objects.count() == 1


def test_promote_may_draft_from_a_newer_published_version_but_not_an_older_one(project, manager, annotator):
    from django.core.exceptions import ValidationError

    from taxonomy.services import version_draft_from, version_publish

    v1 = project.taxonomy_version
    v2 = version_publish(version=version_draft_from(source=v1, by=manager))
    code(annotator, make_trace(project), ["x", "y"])
    mode = open_code_promote(
        project=project,
        code=OpenCode.objects.get(name="x"),
        by=manager,
        source=v2,
        mode_code="1.6",
        name="X",
        definition="d",
    )
    assert mode.version.parent == v2
    project.taxonomy_version = v2
    project.save()
    with pytest.raises(ValidationError, match="working version or a published newer one"):
        open_code_promote(
            project=project,
            code=OpenCode.objects.get(name="y"),
            by=manager,
            source=v1,
            mode_code="1.7",
            name="Y",
            definition="d",
        )


def test_list_page_shows_a_hundred_codes_a_page(client, project, manager, annotator):
    for k in range(3):
        code(annotator, make_trace(project), [f"c{k}-{i:02d}" for i in range(40)])
    client.force_login(manager)
    url = reverse("annotations:code_list", args=[project.slug])
    first, second = client.get(url), client.get(url + "?page=2")
    assert len(first.context["rows"]) == 100 and len(second.context["rows"]) == 20
    assert "codes 101–120 of 120" in second.content.decode()


def test_promote_page_starts_from_the_version_whose_draft_is_started(client, project, manager, annotator):
    from taxonomy.services import version_draft_from, version_publish

    v2 = version_publish(version=version_draft_from(source=project.taxonomy_version, by=manager))
    v3 = version_draft_from(source=v2, by=manager)
    code(annotator, make_trace(project), ["x"])
    client.force_login(manager)
    r = client.get(reverse("annotations:code_promote", args=[project.slug, OpenCode.objects.get(name="x").pk]))
    assert r.context["source"] == v2 and r.context["draft"] == v3
