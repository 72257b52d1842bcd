"""Parquet files of many traces (the Hugging Face Hub's format for Who&When, TRAIL, ...), read with pyarrow.

One row is one trace. Which column holds the trace decides how it is parsed:

* ``history`` (a list of ``{content, role, name}``, or that list as JSON text): a Who&When row,
  parsed by ``traces.parsers.parse_whowhen`` with the other columns as the record
  (``mistake_agent``, ``mistake_step``, ``mistake_reason``, ...);
* ``trace`` (text, or a JSON value): parsed like a native file (``parse_trace``, auto-detected or
  the import's format), e.g. TRAIL's span JSON once a span parser is registered;
* otherwise the file is refused, naming the columns it has.

Every other column is kept: in ``metadata["row"]`` of the trace (JSON-safe: dates and bytes as
text) and in the hooks' ``extra["row"]``, so ground truth that comes with a row (Who&When's
mistake fields, TRAIL's ``labels``) reaches the annotations app. A row that does not parse stops
the import with its file and row number (all or nothing, like every import).
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

from traces.importing.results import TraceImportError
from traces.parsers import ParsedTrace, ParseError, parse_trace
from traces.parsers.ag2 import parse_whowhen

MAGIC = b"PAR1"
TRACE_COLUMNS = ("history", "trace")
TITLE_COLUMNS = ("question_ID", "trace_id", "id", "instance_id")
_BATCH = 64


def is_parquet(head: bytes) -> bool:
    return head[:4] == MAGIC


def _json_safe(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str, ensure_ascii=False))


def _as_json_value(value: Any, where: str) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError as exc:
            raise TraceImportError(f"{where}: the trace column holds text that is not JSON ({exc})") from None
    return value


def iter_parquet_traces(data: bytes, *, name: str, format: str = "auto") -> Iterator[tuple[ParsedTrace, str, dict]]:
    """(parsed trace, title, extra for import hooks) per row of a Parquet file."""
    # pyarrow loads in a noticeable fraction of a second: only Parquet imports pay for it.
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(io.BytesIO(data))
    except (pa.ArrowException, OSError) as exc:
        raise TraceImportError(f"{name}: not a readable Parquet file ({exc})") from None
    columns = pf.schema_arrow.names
    column = next((c for c in TRACE_COLUMNS if c in columns), None)
    if column is None:
        raise TraceImportError(
            f"{name}: no trace column in this Parquet file (looked for {', '.join(TRACE_COLUMNS)}; "
            f"it has {', '.join(columns[:20])})"
        )
    number = 0
    for batch in pf.iter_batches(batch_size=_BATCH):
        for row in batch.to_pylist():
            where = f"{name}, row {number + 1}"
            rest = _json_safe({k: v for k, v in row.items() if k != column})
            try:
                if column == "history":
                    history = _as_json_value(row["history"], where)
                    parsed = parse_whowhen("", filename=where, obj={**rest, "history": history})
                else:
                    value = row["trace"]
                    text = value if isinstance(value, str) else json.dumps(_json_safe(value), ensure_ascii=False)
                    parsed = parse_trace(text, format=format, filename=where)
            except ParseError as exc:
                raise TraceImportError(f"{where}: {exc.reason}") from None
            parsed.metadata["source_file"] = name
            parsed.metadata["row"] = rest
            title = next((str(rest[c]) for c in TITLE_COLUMNS if rest.get(c)), f"row {number + 1}")
            yield parsed, title, {"source_file": name, "record_number": number, "row": rest}
            number += 1
    if number == 0:
        raise TraceImportError(f"{name}: the Parquet file has no rows")
