"""The corpus search's indexes, kept off the import's path.

Trigram-indexing a step's text costs PostgreSQL about as much as the rest of its import several
times over (one GIN entry per distinct trigram: 3.4 MB/s for an import into a 20 M-step project
with the index maintained as it wrote, against 35+ without; ``bench/bench_corpus.py``). So the
trigram index (``traces`` migration 0018) and the word index (0019) are partial, on searchable
steps only: the importer writes steps with ``searchable`` false (the column's default), which
costs the indexes nothing, and ``steps_index_pending`` turns them searchable in batches
afterwards, each batch one short transaction (a new row version per step, which the indexes take
then; its new words join the vocabulary, ``SearchWord``, 0020). Workers run it from their
sweep every ``MAST_JOB_SWEEP_SECONDS`` and again at once while steps wait
(``traces.search_index``); a killed worker leaves its batch unchanged, to be taken again.

Until then a new trace is not found by a corpus search, and the search says how many traces
wait (``search_backlog``): never a silent miss. In-trace search does not use the index.
"""

from __future__ import annotations

import time

from django.db import connection, transaction

from traces.models import Project

BATCH = 5_000  # steps per transaction


def steps_index_pending(*, batch: int = BATCH, max_seconds: float | None = None) -> int:
    """Make waiting steps searchable, ``batch`` at a time, until none wait or ``max_seconds`` have
    passed; returns how many. Concurrent callers take different rows (SKIP LOCKED)."""
    done, start = 0, time.monotonic()
    while True:
        with transaction.atomic(), connection.cursor() as cur:
            # the batch's words join the vocabulary in the same transaction (sorted: two workers
            # adding the same new words wait for each other in one order, never in a cycle)
            cur.execute(
                "WITH made AS (UPDATE traces_step SET searchable = true WHERE id IN (SELECT id FROM traces_step "
                "WHERE NOT searchable LIMIT %s FOR UPDATE SKIP LOCKED) RETURNING content), "
                "added AS (INSERT INTO traces_searchword (word) SELECT DISTINCT w FROM made, "
                "unnest(step_words(content)) AS w ORDER BY w ON CONFLICT DO NOTHING) "
                "SELECT count(*) FROM made",
                [batch],
            )
            n = cur.fetchone()[0]
        done += n
        if n < batch or (max_seconds is not None and time.monotonic() - start > max_seconds):
            return done


def search_backlog(*, project: Project) -> int:
    """How many of the project's traces have steps not searchable yet (the partial index
    ``step_waiting_search`` makes it a lookup of the few waiting rows)."""
    with connection.cursor() as cur:
        cur.execute(
            "SELECT count(DISTINCT s.trace_id) FROM traces_step s JOIN traces_trace t ON t.id = s.trace_id "
            "WHERE NOT s.searchable AND t.project_id = %s",
            [project.pk],
        )
        return int(cur.fetchone()[0])


def steps_waiting() -> bool:
    with connection.cursor() as cur:
        cur.execute("SELECT EXISTS (SELECT 1 FROM traces_step WHERE NOT searchable)")
        return bool(cur.fetchone()[0])


__all__ = ["search_backlog", "steps_index_pending", "steps_waiting"]
