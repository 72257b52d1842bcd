"""Writers for dataset releases: JSONL (MAST-Data record shape), CSV, Parquet, a dataset card, a zip.

Pure: no Django. Each writer takes records one at a time and keeps at most one batch in memory,
so a release of any size is written in bounded memory. Every finished file reports its size and
sha256.

A record is the MAST-Data shape plus our own block::

    {"mas_name", "llm_name", "benchmark_name", "trace_id",   # trace_id: the source's own id
     "studio_trace_id",                                        # the database id
     "trace": {"key", "index", "trajectory"},
     "mast_annotation": {"1.1": 0 | 1 | None, ...},
     "mast_studio": {...}}          # final basis, raters, judges, evidence, rationales
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from traces.csv_cells import csv_writer

MAST_FIELDS = ["mas_name", "llm_name", "benchmark_name", "trace_id"]
CSV_FIXED = ["trace_id", "mas_name", "llm_name", "benchmark_name", "content_hash", "final_source", "studio_trace_id"]
# After the mode columns: the agreed attribution (empty when the trace has none; modes joined by "|").
CSV_ATTRIBUTION = [
    "decisive_step_id",
    "decisive_step",
    "no_single_step",
    "responsible_agent",
    "attribution_modes",
    "attribution_reason",
]
_PARQUET_BATCH = 5000
# Records are serialised with orjson (UTF-8 as json.dumps(ensure_ascii=False) gives, compact, 10x
# faster on a large release); keys that are not strings (ids) are written as strings, as json does.
_ORJSON_OPTIONS = orjson.OPT_NON_STR_KEYS


@dataclass(frozen=True)
class WrittenFile:
    name: str
    kind: str
    path: Path
    size_bytes: int
    sha256: str
    rows: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "size_bytes": self.size_bytes,
            "sha256": self.sha256,
            "rows": self.rows,
        }


def sha256_file(path: Path, *, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


class _HashingFile:
    """A binary file that hashes what is written to it."""

    def __init__(self, path: Path) -> None:
        self.fh = open(path, "wb")  # noqa: SIM115 - closed in close()
        self.hash = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes) -> None:
        self.hash.update(data)
        self.size += len(data)
        self.fh.write(data)

    def close(self) -> tuple[int, str]:
        self.fh.close()
        return self.size, self.hash.hexdigest()


class JsonlWriter:
    kind = "jsonl"
    label = "JSONL (MAST-Data shape)"

    def __init__(self, path: Path, *, codes: list[str]) -> None:
        self.path = Path(path)
        self.out = _HashingFile(self.path)
        self.rows = 0

    def write(self, record: dict[str, Any]) -> None:
        self.out.write(orjson.dumps(record, option=_ORJSON_OPTIONS) + b"\n")
        self.rows += 1

    def close(self) -> WrittenFile:
        size, digest = self.out.close()
        return WrittenFile(self.path.name, self.kind, self.path, size, digest, self.rows)


class _TextSink:
    """A text stream for csv.writer that hashes and writes UTF-8 bytes."""

    def __init__(self, out: _HashingFile) -> None:
        self.out = out

    def write(self, text: str) -> int:
        self.out.write(text.encode())
        return len(text)


class CsvWriter:
    """One row per trace, one column per mode (1, 0 or empty when unknown). Text a spreadsheet would
    run as a formula is neutralised (``traces.csv_cells``); JSONL and Parquet keep it as written."""

    kind = "csv"
    label = "CSV"

    def __init__(self, path: Path, *, codes: list[str]) -> None:
        self.path = Path(path)
        self.codes = list(codes)
        self.out = _HashingFile(self.path)
        self.writer = csv_writer(_TextSink(self.out), lineterminator="\n")
        self.writer.writerow(CSV_FIXED + [f"FM-{c}" for c in self.codes] + CSV_ATTRIBUTION)
        self.rows = 0

    def write(self, record: dict[str, Any]) -> None:
        studio = record.get("mast_studio") or {}
        labels = record["mast_annotation"]
        row = [
            record["trace_id"],
            record["mas_name"],
            record["llm_name"],
            record["benchmark_name"],
            studio.get("content_hash", ""),
            studio.get("final_source", ""),
            record.get("studio_trace_id", ""),
        ]
        row += ["" if labels.get(c) is None else labels[c] for c in self.codes]
        a = studio.get("attribution") or {}
        row += [
            "" if a.get("step_id") is None else a["step_id"],
            "" if a.get("step_index") is None else a["step_index"],
            ("1" if a["no_single_step"] else "0") if a else "",
            a.get("agent", ""),
            "|".join(a.get("modes", [])),
            a.get("reason", ""),
        ]
        self.writer.writerow(row)
        self.rows += 1

    def close(self) -> WrittenFile:
        size, digest = self.out.close()
        return WrittenFile(self.path.name, self.kind, self.path, size, digest, self.rows)


def parquet_schema(codes: list[str]) -> pa.Schema:
    """MAST-Data columns; labels as a struct of nullable int8 per mode code; our extras as JSON text."""
    return pa.schema(
        [
            pa.field("mas_name", pa.string()),
            pa.field("llm_name", pa.string()),
            pa.field("benchmark_name", pa.string()),
            pa.field("trace_id", pa.string()),
            pa.field(
                "trace",
                pa.struct(
                    [pa.field("key", pa.string()), pa.field("index", pa.string()), pa.field("trajectory", pa.string())]
                ),
            ),
            pa.field("mast_annotation", pa.struct([pa.field(c, pa.int8()) for c in codes])),
            pa.field("mast_studio", pa.string()),
            pa.field("studio_trace_id", pa.int64()),
        ]
    )


class ParquetWriter:
    """Row groups of _PARQUET_BATCH records, built column by column (no per-row dicts for arrow)."""

    kind = "parquet"
    label = "Parquet"

    def __init__(self, path: Path, *, codes: list[str]) -> None:
        self.path = Path(path)
        self.codes = list(codes)
        self.schema = parquet_schema(self.codes)
        self.writer = pq.ParquetWriter(str(self.path), self.schema, compression="zstd")
        self.rows = 0
        self._reset()

    def _reset(self) -> None:
        self.cols: dict[str, list] = {
            k: []
            for k in (
                "mas_name",
                "llm_name",
                "benchmark_name",
                "trace_id",
                "key",
                "index",
                "trajectory",
                "studio",
                "pk",
            )
        }
        self.labels: list[list[int | None]] = [[] for _ in self.codes]
        self.n = 0

    def write(self, record: dict[str, Any]) -> None:
        c = self.cols
        trace = record["trace"]
        c["mas_name"].append(record["mas_name"])
        c["llm_name"].append(record["llm_name"])
        c["benchmark_name"].append(record["benchmark_name"])
        c["trace_id"].append(str(record["trace_id"]))
        c["key"].append(None if trace.get("key") is None else str(trace["key"]))
        c["index"].append(None if trace.get("index") is None else str(trace["index"]))
        c["trajectory"].append(trace.get("trajectory"))
        c["studio"].append(orjson.dumps(record.get("mast_studio") or {}, option=_ORJSON_OPTIONS).decode())
        c["pk"].append(record.get("studio_trace_id"))
        labels = record["mast_annotation"]
        for column, code in zip(self.labels, self.codes, strict=True):
            column.append(labels.get(code))
        self.n += 1
        self.rows += 1
        if self.n >= _PARQUET_BATCH:
            self._flush()

    def _flush(self) -> None:
        if not self.n:
            return
        c = self.cols
        trace_type = self.schema.field("trace").type
        labels_type = self.schema.field("mast_annotation").type
        trace = pa.StructArray.from_arrays(
            [
                pa.array(c["key"], pa.string()),
                pa.array(c["index"], pa.string()),
                pa.array(c["trajectory"], pa.string()),
            ],
            fields=list(trace_type),
        )
        if self.codes:
            labels = pa.StructArray.from_arrays(
                [pa.array(col, pa.int8()) for col in self.labels], fields=list(labels_type)
            )
        else:
            labels = pa.array([{}] * self.n, labels_type)
        batch = pa.RecordBatch.from_arrays(
            [
                pa.array(c["mas_name"], pa.string()),
                pa.array(c["llm_name"], pa.string()),
                pa.array(c["benchmark_name"], pa.string()),
                pa.array(c["trace_id"], pa.string()),
                trace,
                labels,
                pa.array(c["studio"], pa.string()),
                pa.array(c["pk"], pa.int64()),
            ],
            schema=self.schema,
        )
        self.writer.write_batch(batch)
        self._reset()

    def close(self) -> WrittenFile:
        self._flush()
        self.writer.close()
        return WrittenFile(
            self.path.name, self.kind, self.path, self.path.stat().st_size, sha256_file(self.path), self.rows
        )


# The export formats: the one list that the release form, the API, the services and the
# export_dataset command read. A new format is one writer class (kind, label, write, close) here.
WRITERS = {w.kind: w for w in (JsonlWriter, CsvWriter, ParquetWriter)}
FORMATS = tuple(WRITERS)
FORMAT_CHOICES = [(kind, w.label) for kind, w in WRITERS.items()]
FILE_NAMES = {kind: f"data.{kind}" for kind in WRITERS}


def write_records(
    records: Iterable[dict[str, Any]], *, directory: Path, formats: Iterable[str], codes: list[str]
) -> list[WrittenFile]:
    """Write every record to each format's file in one pass; returns the finished files."""
    formats = list(formats)
    unknown = [f for f in formats if f not in WRITERS]
    if unknown:
        raise ValueError(f"unknown export format(s): {', '.join(unknown)}; choose from {', '.join(FORMATS)}")
    writers = [WRITERS[f](Path(directory) / FILE_NAMES[f], codes=codes) for f in formats]
    for record in records:
        for w in writers:
            w.write(record)
    return [w.close() for w in writers]


def write_text(path: Path, text: str, *, kind: str) -> WrittenFile:
    data = text.encode()
    Path(path).write_bytes(data)
    return WrittenFile(Path(path).name, kind, Path(path), len(data), hashlib.sha256(data).hexdigest())


def write_zip(path: Path, files: Iterable[WrittenFile], *, folder: str = "") -> WrittenFile:
    """A zip of the finished files (streamed from disk), under `folder/` if given."""
    path = Path(path)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=6) as zf:
        for f in files:
            # Parquet is already zstd-compressed: deflating it again costs time and saves nothing.
            stored = zipfile.ZIP_STORED if f.kind == "parquet" else zipfile.ZIP_DEFLATED
            zf.write(f.path, arcname=f"{folder}/{f.name}" if folder else f.name, compress_type=stored)
    return WrittenFile(path.name, "zip", path, path.stat().st_size, sha256_file(path))


def _md(text: Any) -> str:
    """Plain text for a Markdown table cell or line: no pipes or newlines breaking the layout."""
    return str(text).replace("|", "\\|").replace("\r", " ").replace("\n", " ").strip()


def _mapping_lines(mapping: dict) -> list[str]:
    """Per source version: how many agreed labels it gave and what became of them (manifest ``by_version``)."""
    out = []
    for row in mapping.get("by_version") or []:
        if row.get("is_target"):
            out.append(f"  - {_md(row['version'])}: {row['labels']} labels recorded in the release's version.")
            continue
        out.append(
            f"  - {_md(row['version'])}: {row['labels']} labels, {row['mapped']} mapped, {row['unknown']} unknown "
            f"(the mapping cannot decide, e.g. a split mode), {row['dropped']} dropped (no counterpart), "
            f"{row['no_path']} without any mapping."
        )
    return out


def _withheld_lines(withheld: dict[str, Any]) -> list[str]:
    if not withheld.get("traces"):
        return []
    rounds = ", ".join(_md(r) for r in withheld.get("rounds", []))
    return [f"- {withheld['traces']} selected traces were withheld: {_md(withheld.get('reason', ''))} ({rounds})."]


_RECORD_FORMAT = [
    "## Record format",
    "",
    "Each JSONL line (and Parquet row) has the MAST-Data fields `mas_name`, `llm_name`, `benchmark_name`, "
    '`trace_id`, `trace` (`key`, `index`, `trajectory`) and `mast_annotation` (`{"1.1": 0|1|null, ...}`, '
    "null = unknown), so code written for MAST-Data reads it. Our additions are under `mast_studio` "
    "(a JSON string in Parquet): `final_source`, `final_basis` per mode, and where chosen `raters` (people, "
    "pseudonymised, and imported label sets), `judge` (the LLM judges and the offline baseline), "
    "`evidence` and `rationales`. `trace_id` is always the trace's id in its source (empty when the source "
    "gave none); `studio_trace_id` is this project's database id. The CSV has one row per trace and one "
    "column per mode. In the CSV only, a text cell that starts with `=`, `+`, `-`, `@`, a tab or a carriage "
    "return gets a single quote (`'`) in front, so that a spreadsheet shows it as text instead of running it "
    "as a formula (OWASP's advice on CSV injection); numbers are left as they are. JSONL and Parquet keep "
    "every text exactly as it was written.",
    "",
]


def _composition_lines(counts: dict[str, Any]) -> list[str]:
    """The card's tables of traces by framework, LLM and benchmark (those the release has)."""
    lines = ["", "## Composition", ""]
    for key, title in (("mas_name", "Framework"), ("llm_name", "LLM"), ("benchmark_name", "Benchmark")):
        by = counts.get(f"by_{key}", {})
        if by:
            lines += [f"| {title} | traces |", "|---|---:|"]
            lines += [f"| {_md(k or '(unknown)')} | {v} |" for k, v in by.items()]
            lines.append("")
    return lines


def _agreement_lines(agreement: list[dict[str, Any]]) -> list[str]:
    """One line per round behind the release: its agreement figures with their intervals."""
    if not agreement:
        return []
    lines = ["## Agreement of the rounds behind it", ""]
    for a in agreement:
        figures = []
        for name, stat in (a.get("summary") or {}).items():
            value = stat.get("value") if isinstance(stat, dict) else stat
            if isinstance(value, float):
                ci = (stat.get("ci_low"), stat.get("ci_high")) if isinstance(stat, dict) else (None, None)
                text = f"{value:.3f}"
                if all(isinstance(x, float) for x in ci):
                    text += f" [{ci[0]:.3f}, {ci[1]:.3f}]"
                figures.append(f"{name.replace('_', ' ')} {text}")
            elif value is not None:
                figures.append(f"{name.replace('_', ' ')} {value}")
        lines.append(f"- {_md(a.get('round'))}: {_md('; '.join(figures) or 'no agreement report stored')}")
    lines.append("")
    return lines


def render_card(manifest: dict[str, Any]) -> str:
    """The dataset card (README.md), with Hugging Face front matter pointing at the data files."""
    files = manifest.get("files", [])
    data_files = [f["name"] for f in files if f["kind"] in ("parquet", "jsonl")]
    main_file = next((n for n in data_files if n.endswith(".parquet")), data_files[0] if data_files else "data.jsonl")
    tax = manifest.get("taxonomy", {})
    counts = manifest.get("counts", {})
    opts = manifest.get("options", {})
    lines = [
        "---",
        "pretty_name: " + json.dumps(manifest.get("title") or manifest.get("name", "MAST Studio release")),
        "task_categories:",
        "- text-classification",
        "tags:",
        "- multi-agent-systems",
        "- failure-analysis",
        "- MAST",
        "configs:",
        "- config_name: default",
        "  data_files:",
        "  - split: train",
        f"    path: {main_file}",
        "---",
        "",
        f"# {_md(manifest.get('title') or manifest.get('name', 'MAST Studio release'))}",
        "",
        f"Release **v{manifest.get('version')}** of project `{_md(manifest.get('project', {}).get('slug', ''))}`, "
        f"created {manifest.get('created_at', '')} by {_md(manifest.get('created_by') or 'unknown')} with MAST Studio.",
        "",
    ]
    if manifest.get("notes"):
        lines += [_md(manifest["notes"]), ""]
    lines += [
        "## Contents",
        "",
        f"- {counts.get('traces', 0)} traces labelled with {len(tax.get('modes', []))} failure modes of "
        f"**{_md(tax.get('label', ''))}**.",
        f"- Final labels: {counts.get('consensus_traces', 0)} traces from adjudicated consensus of closed rounds, "
        f"{counts.get('majority_traces', 0)} from a majority vote of raters (flagged `final_source: majority_vote`).",
        f"- {manifest.get('mapping', {}).get('mapped_labels', 0)} labels were mapped from other taxonomy versions.",
        *_mapping_lines(manifest.get("mapping") or {}),
        *_withheld_lines(manifest.get("withheld") or {}),
        "- Trace text "
        + ("included." if opts.get("trace_text") else "not included (references only: trace_id, content_hash)."),
        "",
        "## Files",
        "",
        "| file | bytes | sha256 |",
        "|---|---:|---|",
    ]
    lines += [f"| {_md(f['name'])} | {f['size_bytes']} | `{f['sha256']}` |" for f in files]
    lines += [
        "",
        *_RECORD_FORMAT,
        "## Failure modes",
        "",
        "| code | name | category | definition |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| {_md(m['code'])} | {_md(m['name'])} | FC{_md(m.get('category', ''))} | {_md(m.get('definition', ''))} |"
        for m in tax.get("modes", [])
    ]
    lines += _composition_lines(counts)
    lines += _agreement_lines(manifest.get("agreement", []))
    lines += [
        "## Citation",
        "",
        "Please cite the MAST taxonomy: Cemri et al., *Why Do Multi-Agent LLM Systems Fail?* (2025).",
        "",
    ]
    return "\n".join(lines)
