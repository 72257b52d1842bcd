"""Import hooks: how other apps store what comes WITH an imported record.

Dependencies point taxonomy <- traces <- annotations, so the importer does not know who listens.
``register_import_hook(hook)``; a hook has two methods (and an optional third), all called inside
the import transaction (raise to abort the whole import):

* ``on_trace(*, batch, trace_id, parsed, extra)`` for each NEWLY created trace (not for
  duplicates). ``parsed`` is the ``ParsedTrace``; ``extra`` is a dict with ``source_file`` (name
  as shown in errors) and ``record_number`` (MAST-Data record index, None for native files), and
  for MAST-Data records ``trace_id``, ``mas_name``, ``benchmark_name``, ``mast_annotation``
  (``{"1.1": 0|1|None, ...}`` or None), ``round`` and ``annotations`` (the human-labelled file's
  ``[{"failure mode": ..., "annotator_1": ..., ...}]``, or None).
* ``on_finish(*, batch)`` once at the end, still inside the transaction, for bulk writes.
* optional ``on_duplicate(*, batch, content_hash, parsed, extra)`` for a record whose trace is
  already in the project (or earlier in this import); the trace row exists by ``on_finish``.

``batch`` is an :class:`ImportBatch` with ``project``, ``by`` (user or None), ``job`` (ImportJob
or None) and ``state``, a dict in which hooks keep their own data (key it by your app name).
The annotations app registers two in its ``ready()``: ``annotations/labels/imported.py`` stores
MAST-Data's ``mast_annotation`` as the "MAST-Data judge" rater's labels, and
``annotations/rounds/imported.py`` turns ``round`` / ``annotations`` into closed calibration rounds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from traces.models import ImportJob, Project


@dataclass
class ImportBatch:
    """What hooks see: the import's context and a scratch dict for their own state."""

    project: Project
    by: Any = None
    job: ImportJob | None = None
    state: dict = field(default_factory=dict)


_HOOKS: list[Any] = []


def register_import_hook(hook: Any) -> None:
    """Add a hook (see the module docstring); registering the same class twice keeps one."""
    if not (hasattr(hook, "on_trace") and hasattr(hook, "on_finish")):
        raise TypeError("an import hook needs on_trace(*, batch, trace_id, parsed, extra) and on_finish(*, batch)")
    if any(type(h) is type(hook) for h in _HOOKS):
        return
    _HOOKS.append(hook)


def import_hooks() -> tuple[Any, ...]:
    return tuple(_HOOKS)
