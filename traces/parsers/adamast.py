"""AdaMAST canonical JSONL (the MAST authors' newer tool): one trace per record.

A record is ``{"problem_id", "task", "raw_trajectory", "metadata"}``. ``raw_trajectory`` is the
system's own trace: a string in any text or JSON format this package reads (detected, with
``metadata``'s framework name breaking ties) or the JSON itself (a list of messages, a TaskResult,
...). ``metadata`` names the framework (``mas_name`` / ``framework`` / ``mas``), the model
(``llm_name`` / ``model``), the benchmark (``benchmark_name`` / ``benchmark`` / ``dataset``) and may
carry MAST labels as ``mast_annotation`` (``{"1.1": 0|1|null}``), which are stored as the
"MAST-Data judge" rater's, like MAST-Data's. The file may also be a JSON array of records.
``problem_id`` is the trace's own id.
"""

from __future__ import annotations

import json

from traces.parsers.base import ParsedTrace, ParseError
from traces.parsers.detect import normalise_mas_name
from traces.parsers.mast import annotation_values
from traces.parsers.shapes import as_dict, rows_of, text

LABEL = "AdaMAST JSONL"


def sniff(head: str) -> bool:
    return '"raw_trajectory"' in head


def _first(meta: dict, *keys: str) -> str:
    for key in keys:
        value = meta.get(key)
        if isinstance(value, str | int | float) and not isinstance(value, bool) and str(value).strip():
            return str(value).strip()
    return ""


def _record(rec: dict, n: int, filename: str) -> ParsedTrace:
    from traces.parsers import parse_trace  # the package imports this module

    raw = rec.get("raw_trajectory")
    if raw is None or raw == "" or raw == [] or raw == {}:
        raise ParseError(f"read as {LABEL}: record has no 'raw_trajectory'", filename=filename, record=n)
    meta = as_dict(rec.get("metadata"))
    mas = _first(meta, "mas_name", "framework", "mas", "system")
    body = raw if isinstance(raw, str) else json.dumps(raw, ensure_ascii=False, indent=1)
    try:
        # no file name: the trajectory is not a .jsonl file, whatever the file holding it is called
        trace = parse_trace(body, mas_name=mas)
    except ParseError as e:
        raise ParseError(f"raw_trajectory: {e.reason}", filename=filename, record=n, line=e.line) from None
    trace.mas_name = normalise_mas_name(mas) or mas or trace.mas_name
    trace.llm_name = _first(meta, "llm_name", "model", "model_name") or trace.llm_name
    trace.benchmark = _first(meta, "benchmark_name", "benchmark", "dataset") or trace.benchmark
    trace.task = text(rec.get("task")) or trace.task
    trace.external_id = _first(rec, "problem_id") or trace.external_id
    trace.metadata["adamast_metadata"] = meta
    trace.metadata["adamast_record"] = n
    trace.metadata["inner_format"] = trace.format
    trace.format = "adamast"
    labels = meta.get("mast_annotation", rec.get("mast_annotation"))
    if labels is not None:
        trace.metadata["mast_annotation"] = annotation_values(labels, n, filename)
    return trace


def parse_adamast(obj: object, filename: str = "") -> list[ParsedTrace]:
    return [_record(rec, n, filename) for n, rec in enumerate(rows_of(obj, filename=filename, what=LABEL))]
