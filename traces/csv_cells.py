"""CSV cells a spreadsheet will not run: the one guard every CSV the product writes goes through.

A cell that starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return is read by Excel,
LibreOffice and Google Sheets as a formula (``=HYPERLINK(...)`` in a rationale becomes a live link,
``=cmd|...`` worse). As OWASP recommends ("CSV Injection"), such text cells get a single quote in
front, which spreadsheets show as text and do not evaluate. Numbers stay numbers: int and float
values are never touched, nor is text that is a plain number (``-0.25``, ``+3``, ``-1e-05``), so a
negative kappa still reads as a number. JSONL and Parquet keep the text exactly as it is.

Pure: no Django. ``csv_writer(stream, **kw)`` is ``csv.writer`` with every row passed through
``csv_row``; or call ``csv_cell`` / ``csv_row`` on rows written some other way.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable
from typing import Any

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def csv_cell(value: Any) -> Any:
    """The value, with a ``'`` in front when it is text a spreadsheet would run as a formula."""
    if isinstance(value, str) and value.startswith(FORMULA_START) and not _NUMBER.fullmatch(value):
        return "'" + value
    return value


def csv_row(values: Iterable[Any]) -> list[Any]:
    return [csv_cell(v) for v in values]


class _SafeWriter:
    def __init__(self, writer: Any) -> None:
        self._writer = writer

    def writerow(self, row: Iterable[Any]) -> Any:
        return self._writer.writerow(csv_row(row))

    def writerows(self, rows: Iterable[Iterable[Any]]) -> None:
        for row in rows:
            self.writerow(row)


def csv_writer(stream: Any, **kwargs: Any) -> _SafeWriter:
    """``csv.writer(stream, **kwargs)`` whose rows are neutralised cell by cell (``csv_cell``)."""
    return _SafeWriter(csv.writer(stream, **kwargs))
