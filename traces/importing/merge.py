"""Which records of an import are new traces, merged sources of stored ones, or skipped.

A record whose trace text (``content_hash``) is already stored in the project, or earlier in the
same import, is never stored twice. What it says about itself is not lost either:

* **merged**: its identity (own trace id, framework, model, benchmark) is not the trace's nor
  any of the trace's sources': it becomes a :class:`~traces.models.TraceSource` of that trace,
  with the labels that came with it (``mast_annotation``). MAST-Data has one AppWorld trajectory
  under two ``trace_id``s: the second becomes a source of the first, its labels kept.
* **skipped**: the same record again (re-importing a file): nothing new to keep.

Sources are written after the new traces (their ids are known then), in one bulk insert.
"""

from __future__ import annotations

from typing import Any

from traces.models import ImportJob, Project, Trace, TraceSource
from traces.parsers import ParsedTrace

Identity = tuple[str, str, str, str]


def _identity(external_id: object, mas: object, llm: object, benchmark: object) -> Identity:
    return (str(external_id or "")[:300], str(mas or "")[:100], str(llm or "")[:100], str(benchmark or "")[:100])


class KnownTraces:
    """The project's traces by content hash, with the identities each is already known by."""

    def __init__(self, project: Project) -> None:
        self.project = project
        self.ids: dict[str, int | None] = {}  # content hash -> trace id (None: new in this import)
        self.identities: dict[str, set[Identity]] = {}
        rows = Trace.objects.filter(project=project).values_list(
            "content_hash", "id", "external_id", "mas_name", "llm_name", "benchmark"
        )
        for digest, pk, ext, mas, llm, bench in rows.iterator(chunk_size=5000):
            self.ids[digest] = pk
            self.identities[digest] = {_identity(ext, mas, llm, bench)}
        by_id = {pk: digest for digest, pk in self.ids.items()}
        sources = TraceSource.objects.filter(trace__project=project).values_list(
            "trace_id", "external_id", "mas_name", "llm_name", "benchmark"
        )
        for trace_id, ext, mas, llm, bench in sources:
            if trace_id in by_id:
                self.identities[by_id[trace_id]].add(_identity(ext, mas, llm, bench))
        self.pending: list[tuple[str, Identity, dict[str, Any]]] = []

    def outcome(self, digest: str, parsed: ParsedTrace, extra: dict[str, Any]) -> str:
        """ "new", "merged" or "skipped"; remembers a new trace's or a merged source's identity."""
        ident = _identity(parsed.external_id, parsed.mas_name, parsed.llm_name, parsed.benchmark)
        known = self.identities.get(digest)
        if known is None:
            self.ids[digest] = None
            self.identities[digest] = {ident}
            return "new"
        if ident in known:
            return "skipped"
        known.add(ident)
        self.pending.append((digest, ident, extra))
        return "merged"

    def store_sources(self, *, job: ImportJob | None) -> int:
        """Write the merged sources (after the new traces are written). Returns how many."""
        if not self.pending:
            return 0
        missing = {d for d, _, _ in self.pending if self.ids.get(d) is None}
        if missing:
            found = Trace.objects.filter(project=self.project, content_hash__in=missing).values_list(
                "content_hash", "id"
            )
            self.ids.update(dict(found))
        rows = [
            TraceSource(
                trace_id=self.ids[digest],
                external_id=ident[0],
                mas_name=ident[1],
                llm_name=ident[2],
                benchmark=ident[3],
                source_file=str(extra.get("source_file") or "")[:500],
                record_number=extra.get("record_number"),
                labels=extra.get("mast_annotation") or {},
                import_job=job,
            )
            for digest, ident, extra in self.pending
        ]
        TraceSource.objects.bulk_create(rows, batch_size=1000)
        self.pending = []
        return len(rows)
