"""In the seeded demo (issue 32), a manager searches every step of the corpus, opens a hit at its
step in the trace viewer, turns the hits into a sample of a draft round, undoes it, and reads the
demo's behaviour search with its quoted steps and groups."""

from __future__ import annotations

import re

import pytest

from annotations.corpus.selectors import CorpusQuery, corpus_search
from annotations.models import BehaviourSearch, Round
from traces.models import Step

pytestmark = pytest.mark.browser


def test_search_the_demo_open_a_hit_and_sample_the_hits(demo, page, live_server, login, screenshot):
    slug, manager = demo.project.slug, demo.users["manager"]
    rnd = Round.objects.get(project=demo.project, name="Round 4 (from a search, draft)")
    before = set(rnd.round_traces.values_list("trace_id", flat=True))
    # two words of a step of a trace outside the demo's own search sample (the demo's text decides which)
    step = next(
        s
        for s in Step.objects.filter(trace__project=demo.project).exclude(trace_id__in=before).order_by("pk")
        if len(set(re.findall(r"\b[a-z]{6,}\b", s.content))) >= 2
    )
    words = " ".join(sorted(set(re.findall(r"\b[a-z]{6,}\b", step.content)))[:2])
    first_word, second_word = words.split()
    login(page, manager)
    page.goto(f"{live_server.url}/p/{slug}/traces/")
    page.get_by_role("link", name="Search", exact=True).click()
    page.get_by_label("Search for").fill(words)
    page.get_by_label("Match").select_option("words")
    page.get_by_role("button", name="Search", exact=True).click()
    expected = corpus_search(user=manager, project=demo.project, query=CorpusQuery(q=words))
    assert expected.n_traces > 0
    summary = page.locator("[data-testid=search-summary]").inner_text()
    assert f"{expected.n_steps} step" in summary and f"{expected.n_traces} trace" in summary
    first = page.locator(".cs-hit").first
    assert first.locator("mark").count() >= 1
    assert {m.lower() for m in first.locator("mark").all_inner_texts()} <= {first_word, second_word}
    screenshot(page, "corpus-search")

    step = first.get_attribute("data-step")
    first.click()
    page.wait_for_url(re.compile(rf"/traces/\d+/#step-{step}$"))
    focused = page.locator(f".tv-step[data-step='{step}']")
    focused.wait_for()
    text = focused.inner_text().lower()
    assert re.search(rf"\b{first_word}\b", text) and re.search(rf"\b{second_word}\b", text)
    page.go_back()

    page.get_by_label("Draft round").select_option(label="Round 4 (from a search, draft)")
    page.get_by_role("button", name="Add to the round").click()
    assert "Done: sample for a round" in page.locator(".messages").inner_text()
    after = set(rnd.round_traces.values_list("trace_id", flat=True))
    assert after == before | set(expected.trace_ids)
    screenshot(page, "corpus-search-sampled")
    page.locator("[data-testid=search-actions] tbody tr").first.get_by_role("button", name="Undo").click()
    assert "Undone" in page.locator(".messages").inner_text()
    assert set(rnd.round_traces.values_list("trace_id", flat=True)) == before

    search = BehaviourSearch.objects.get(project=demo.project)
    page.goto(f"{live_server.url}/p/{slug}/search/behaviour/{search.pk}/")
    assert page.locator("[data-testid=behaviour-state]").inner_text() == "Done"
    found = search.hits.filter(present=True).count()
    assert found and f"Found in {found} trace" in page.locator("main").inner_text()
    assert page.locator("[data-testid=behaviour-groups] li").count() == search.groups.count() >= 1
    screenshot(page, "behaviour-search")
