"""Demo step of corpus search: a search turned into an open code (Alice's) and into a stratified
sample of a draft round, and a behaviour search run on the demo's stand-in judge (it quotes the
steps holding the behaviour's words; it is not a model), with its groups.

Idempotent: a project with a behaviour search keeps what it has.
"""

from __future__ import annotations

from annotations.corpus import behaviour as bsvc
from annotations.corpus.selectors import CorpusQuery, corpus_search
from annotations.corpus.services import search_code_apply, search_sample_apply
from annotations.judge import demo_llm
from annotations.judge.demo import CONNECTION, MODEL
from annotations.models import BehaviourSearch, ProviderConnection, Round, RoundAnnotator
from traces.search.indexing import steps_index_pending

SEARCH = CorpusQuery(q="answer|result", mode="regex")
WHOLE_WORD = CorpusQuery(q=r"\.py\b", mode="regex")  # a short whole word: the word index serves it
BEHAVIOUR = "The agent states a final answer or result without checking it"
ROUND = "Round 4 (from a search, draft)"


def seed(ctx) -> None:
    project, manager = ctx.project, ctx.users["manager"]
    if BehaviourSearch.objects.filter(project=project).exists():
        ctx.say(f"Search: already seeded; try /p/{project.slug}/search/?{SEARCH.querystring()}")
        return
    steps_index_pending()  # the demo's imports, searchable now (the workers would do it within seconds)
    result = corpus_search(user=manager, project=project, query=SEARCH)
    ctx.say(f"Search: the regular expression “{SEARCH.q}” finds {result.n_steps} steps in {result.n_traces} traces "
            f"(/p/{project.slug}/search/?{SEARCH.querystring()})")  # fmt: skip
    short = corpus_search(user=manager, project=project, query=WHOLE_WORD)
    ctx.say(f"Search: “{WHOLE_WORD.q}” (a whole 2-letter word) finds {short.n_steps} steps in {short.n_traces} traces "
            f"(/p/{project.slug}/search/?{WHOLE_WORD.querystring()})")  # fmt: skip
    code = search_code_apply(project=project, by=ctx.users["alice"], trace_ids=result.trace_ids[:12],
                             name="states a result", query=SEARCH.as_dict())  # fmt: skip
    ctx.say(f"Search: Alice turned {len(code.trace_ids)} of its traces into the open code “states a result” "
            f"(undo on the page; action {code.pk})")  # fmt: skip
    defaults = {"taxonomy_version": project.taxonomy_version, "created_by": manager}
    rnd, _ = Round.objects.get_or_create(project=project, name=ROUND, defaults=defaults)
    for name in ("alice", "bob"):
        RoundAnnotator.objects.get_or_create(round=rnd, user=ctx.users[name])
    strata = len({v for v, _n, _t in result.facets["framework"]})  # a stratified sample takes one of each at least
    n = min(result.n_traces, max(strata, 6))
    sample = search_sample_apply(project=project, by=manager, trace_ids=result.trace_ids, round=rnd,
                                 how="stratified", n=n, query=SEARCH.as_dict())  # fmt: skip
    ctx.say(f"Search: a stratified sample of {len(sample.trace_ids)} hit traces added to “{ROUND}”")
    connection = ProviderConnection.objects.filter(project=project, name=CONNECTION).first()
    if connection is None:
        ctx.say("Search: no judge connection; behaviour search not seeded")
        return
    ids = result.trace_ids[:20]
    est = bsvc.behaviour_estimate(project=project, trace_ids=ids, connection=connection)
    search = bsvc.behaviour_search_start(project=project, by=manager, description=BEHAVIOUR, trace_ids=ids,
                                         query=SEARCH.as_dict(), connection=connection, model=MODEL,
                                         max_tokens=est.tokens * 2, enqueue=False)  # fmt: skip
    if ctx.llm_url:
        bsvc.behaviour_search_run(search_id=search.pk)
    else:  # no stand-in running: one in this process while seeding, the connection pointed at it
        with demo_llm.serve() as url:
            base, connection.base_url = connection.base_url, url
            connection.save(update_fields=["base_url"])
            try:
                bsvc.behaviour_search_run(search_id=search.pk)
            finally:
                connection.base_url = base
                connection.save(update_fields=["base_url"])
    search.refresh_from_db()
    found = search.hits.filter(present=True).count()
    ctx.say(f"Search: behaviour search “{BEHAVIOUR[:50]}…” {search.state}: found in {found} of {search.n_done} "
            f"traces, {search.groups.count()} groups, {search.tokens_in + search.tokens_out:,} tokens "
            f"(/p/{project.slug}/search/behaviour/{search.pk}/)")  # fmt: skip
