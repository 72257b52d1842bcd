"""A rater's labels brought in from a file (an agentdash run, another lab's LLM labels): writes.

One row per trace, JSONL or CSV (told by the file name, or ``fmt``):

- the trace: ``source_id`` (the trace's id in its source dataset, ``Trace.external_id``) or
  ``content_hash`` (sha256 of the trace text as imported); JSONL also takes ``trace`` for either;
- the modes, by code: JSONL ``"modes": {"1.1": true, "2.3": {"present": "yes", "rationale": "...",
  "evidence_steps": [4, 7]}}`` (also a flat ``"1.1": "yes"`` at the top level, or a list of
  ``{"code", "present", ...}``); CSV one column per code (``1.1``, ``2.3``...) and optional
  ``evidence_<code>`` columns with step numbers separated by spaces;
- optional ``rationale`` (for the row; a mode's own rationale wins), ``task_success`` and
  ``raw_answer`` (kept with the annotation, shown on the trace's judge answer).

Values: yes/no, true/false, 1/0, present/absent. An empty value or a mode left out is unknown: no
label (not absent). Modes not in the chosen taxonomy version are refused, not ignored.

All or nothing: every row is checked first; any problem refuses the file with the line named
(``line 12: no trace with source_id 'x' in the project``) and nothing is stored. A re-import
under the same rater name replaces that rater's labels of the traces in the file (an upsert).
The labels are filed under a rater of kind ``imported``, so the blind rule, the comparison
page and the baseline treat them like any other non-human rater.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Count

from annotations.judge.worker import rater_for
from annotations.labels.bulk import machine_annotation_upsert
from annotations.models import Rater
from taxonomy.models import TaxonomyVersion
from taxonomy.selectors import version_modes
from traces.models import Project, Trace

MAX_ERRORS = 30
_TRUE = {"yes", "y", "true", "1", "present", "detected"}
_FALSE = {"no", "n", "false", "0", "absent"}
CODE_RE = re.compile(r"^\d+(\.\d+)+$")


@dataclass
class Row:
    line: int
    trace_id: int
    labels: dict[str, tuple[bool, list[int], str]] = field(default_factory=dict)
    task_success: str = "unknown"
    raw_answer: str = ""


@dataclass(frozen=True)
class ImportResult:
    rater: Rater
    n_traces: int
    n_labels: int


def _value(raw, where: str) -> bool | None:
    if raw is None:
        return None
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, int | float) and raw in (0, 1):
        return bool(raw)
    text = str(raw).strip().lower()
    if text == "":
        return None
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"{where}: {str(raw)[:30]!r} is not yes/no, true/false, 1/0 or present/absent")


def _steps(raw, where: str) -> list[int]:
    if raw in (None, ""):
        return []
    items = raw if isinstance(raw, list) else str(raw).replace(",", " ").split()
    try:
        return [int(str(s).strip().removeprefix("step").strip()) for s in items]
    except ValueError:
        raise ValueError(f"{where}: evidence steps must be step numbers, not {str(raw)[:40]!r}") from None


def _jsonl_records(text: str) -> Iterator[tuple[int, dict]]:
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"line {n}: not JSON ({exc.msg} at column {exc.colno})") from None
        if not isinstance(obj, dict):
            raise ValueError(f"line {n}: each line must be a JSON object")
        yield n, obj


def _json_modes(obj: dict) -> list[tuple[str, object]]:
    modes = obj.get("modes", obj.get("labels", obj.get("failure_modes")))
    if isinstance(modes, dict):
        return list(modes.items())
    if isinstance(modes, list):
        out = []
        for entry in modes:
            if not isinstance(entry, dict) or "code" not in entry:
                raise ValueError('each entry of "modes" must be an object with a "code"')
            out.append((str(entry["code"]), entry))
        return out
    return [(k, v) for k, v in obj.items() if CODE_RE.match(str(k))]


class _RaterFile:
    """Reading one rater file: the project's traces by source id and content hash, the rows read
    so far and the errors, each naming its line."""

    def __init__(self, *, project: Project, version: TaxonomyVersion) -> None:
        self.version = version
        self.codes = {m.code for m in version_modes(version=version)}
        self.by_source: dict[str, int] = {}
        self.by_hash: dict[str, int] = {}
        for pk, ext, h in Trace.objects.filter(project=project).values_list("pk", "external_id", "content_hash"):
            if ext:
                self.by_source.setdefault(ext, pk)
            self.by_hash.setdefault(h, pk)
        self.errors: list[str] = []
        self.rows: list[Row] = []
        self.seen: dict[int, int] = {}

    def trace_of(self, n: int, source: str, chash: str) -> int | None:
        """The trace a line names, by its source id, else its content hash (None: an error)."""
        if source and source in self.by_source:
            return self.by_source[source]
        if chash and chash in self.by_hash:
            return self.by_hash[chash]
        if source and source in self.by_hash:  # JSONL "trace" may hold either
            return self.by_hash[source]
        what = f"source_id {source!r}" if source else f"content_hash {chash!r}" if chash else None
        self.errors.append(
            f"line {n}: " + (f"no trace with {what} in the project" if what else "no source_id or content_hash")
        )
        return None

    def add(self, n: int, trace_id: int | None, modes: list[tuple[str, object]], extra: dict, evidence: dict) -> None:
        """One line's row: its task success, and each mode's value, evidence steps and rationale."""
        if trace_id is None:
            return
        if trace_id in self.seen:
            self.errors.append(f"line {n}: the same trace as line {self.seen[trace_id]}")
            return
        self.seen[trace_id] = n
        row = Row(line=n, trace_id=trace_id, raw_answer=str(extra.get("raw_answer") or "")[:200_000])
        ts = str(extra.get("task_success") or "unknown").strip().lower()
        ts = {"true": "yes", "false": "no", "1": "yes", "0": "no", "": "unknown"}.get(ts, ts)
        if ts not in ("yes", "no", "unknown"):
            self.errors.append(f"line {n}: task_success {ts[:20]!r} is not yes, no or unknown")
        row.task_success = ts if ts in ("yes", "no", "unknown") else "unknown"
        note = str(extra.get("rationale") or "")[:2000]
        for code, raw in modes:
            code = str(code).strip()
            if code not in self.codes:
                self.errors.append(f"line {n}: mode {code!r} is not in {self.version.label}")
                continue
            try:
                if isinstance(raw, dict):
                    present = _value(raw.get("present", raw.get("value")), f"mode {code}")
                    steps = _steps(raw.get("evidence_steps", raw.get("evidence")), f"mode {code}")
                    why = str(raw.get("rationale") or note)[:2000]
                else:
                    present = _value(raw, f"mode {code}")
                    steps = _steps(evidence.get(code), f"mode {code}")
                    why = note
            except ValueError as exc:
                self.errors.append(f"line {n}: {exc}")
                continue
            if present is not None:
                row.labels[code] = (present, steps, why if present else "")
        if not row.labels:
            self.errors.append(f"line {n}: no mode has a value")
        self.rows.append(row)

    def read_jsonl(self, text: str) -> None:
        for n, obj in _jsonl_records(text):
            source = str(obj.get("source_id") or obj.get("trace") or "").strip()
            chash = str(obj.get("content_hash") or "").strip()
            try:
                modes = _json_modes(obj)
            except ValueError as exc:
                self.errors.append(f"line {n}: {exc}")
                continue
            self.add(n, self.trace_of(n, source, chash), modes, obj, {})
            if len(self.errors) >= MAX_ERRORS:
                break

    def read_csv(self, text: str) -> None:
        reader = csv.DictReader(io.StringIO(text))
        header = reader.fieldnames or []
        if not ({"source_id", "content_hash"} & set(header)):
            raise ValueError("line 1: the header needs a source_id or content_hash column")
        mode_cols = [h for h in header if CODE_RE.match(h.strip())]
        if not mode_cols:
            raise ValueError("line 1: the header has no mode column (1.1, 2.3, ...)")
        for rec in reader:
            n = reader.line_num
            modes = [(c, rec.get(c)) for c in mode_cols]
            evidence = {h.removeprefix("evidence_").strip(): rec[h] for h in header if h.startswith("evidence_")}
            tid = self.trace_of(n, (rec.get("source_id") or "").strip(), (rec.get("content_hash") or "").strip())
            self.add(n, tid, modes, rec, evidence)
            if len(self.errors) >= MAX_ERRORS:
                break


def rater_import_parse(*, project: Project, version: TaxonomyVersion, text: str, fmt: str) -> list[Row]:
    """Check every row; ValidationError naming each bad line (up to MAX_ERRORS), else the rows."""
    f = _RaterFile(project=project, version=version)
    try:
        if fmt == "jsonl":
            f.read_jsonl(text)
        elif fmt == "csv":
            f.read_csv(text)
        else:
            raise ValueError(f"format {fmt!r}: expected jsonl or csv")
    except (ValueError, csv.Error) as exc:
        f.errors.append(str(exc))
    errors = f.errors
    if not f.rows and not errors:
        errors.append("the file holds no row")
    if errors:
        more = " (and more; fix these first)" if len(errors) >= MAX_ERRORS else ""
        raise ValidationError(
            {"file": [f"Nothing was imported: {e}" for e in errors[:MAX_ERRORS]] + ([more] if more else [])}
        )
    return f.rows


def format_of(filename: str, fmt: str = "auto") -> str:
    if fmt != "auto":
        return fmt
    low = filename.lower()
    if low.endswith((".jsonl", ".ndjson", ".json")):
        return "jsonl"
    if low.endswith((".csv", ".tsv")):
        return "csv"
    raise ValidationError({"file": f"{filename}: name it .jsonl or .csv, or give the format"})


def rater_import(
    *,
    project: Project,
    by,
    name: str,
    text: str,
    filename: str = "upload",
    fmt: str = "auto",
    taxonomy_version: TaxonomyVersion | None = None,
) -> ImportResult:
    """Import a rater's labels from a file's text (all or nothing; see the module docstring)."""
    name = (name or "").strip()
    if not name:
        raise ValidationError({"name": "the rater's name, e.g. “o1 (agentdash, lab B)”"})
    # the default is the project's working version (Project.taxonomy_version)
    version = taxonomy_version or project.taxonomy_version
    if version is None:
        raise ValidationError("The project has no taxonomy version.")
    rows = rater_import_parse(project=project, version=version, text=text, fmt=format_of(filename, fmt))
    mode_ids = {m.code: m.pk for m in version_modes(version=version)}
    n_labels = 0
    with transaction.atomic():
        rater = rater_for(kind=Rater.Kind.IMPORTED, name=name, description=f"Imported from {filename}")
        for row in rows:
            labels = [
                (mode_ids[code], "present" if present else "absent", [{"step": s} for s in steps], why, None)
                for code, (present, steps, why) in row.labels.items()
            ]
            n_labels += len(labels)
            source = {"import": filename[:200], "line": row.line, "by": getattr(by, "username", "")}
            if row.raw_answer:
                source["raw_answer"] = row.raw_answer
            machine_annotation_upsert(
                trace_id=row.trace_id,
                rater_id=rater.pk,
                version_id=version.pk,
                task_success=row.task_success,
                source=source,
                labels=labels,
            )
    return ImportResult(rater=rater, n_traces=len(rows), n_labels=n_labels)


def imported_raters(*, project: Project) -> list[dict]:
    """The project's imported raters with how many traces each labelled."""

    qs = (
        Rater.objects.filter(kind=Rater.Kind.IMPORTED, annotations__trace__project=project)
        .annotate(n_traces=Count("annotations__trace", distinct=True))
        .order_by("name")
    )
    return [{"id": r.pk, "name": r.name, "n_traces": r.n_traces, "description": r.description} for r in qs]
