"""What an import tells its caller: the result, the error that refuses it whole, its progress.

Every part of the import (sources, parsing, jobs) raises :class:`TraceImportError`, so the
types live here, below all of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from traces.api_errors import ProductError


class TraceImportError(ProductError):
    """An import was refused whole; the message names the file and the record/line. The API
    answers it 400 (traces.api_errors)."""

    def __init__(self, message: str, *, result: ImportResult | None = None) -> None:
        super().__init__(message)
        self.result = result or ImportResult(imported=0, duplicates=0, failed=1, errors=[message])

    @property
    def files(self) -> list[dict]:
        """The per-file report lines (traces.importing.report) when the import got that far."""
        return self.result.files


@dataclass
class ImportResult:
    imported: int
    duplicates: int  # records skipped: the same record (text and identity) was already stored
    failed: int  # files refused
    errors: list[str] = field(default_factory=list)
    trace_ids: list[int] = field(default_factory=list)
    merged: int = 0  # records whose text was stored, kept as another source of that trace
    files: list[dict] = field(default_factory=list)  # one report line per file (report.FileLine)


@dataclass
class ImportProgress:
    bytes_done: int
    bytes_total: int
    imported: int
    duplicates: int
    current: str = ""
