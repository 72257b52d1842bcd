"""Writes for dataset releases: create one (a manager), build its files (a background job), policy.

A release is numbered per project (1, 2, ...) under a row lock, built once into
``releases/<slug>/v<n>/`` in the storage (traces/storage.py) and frozen: once ``done`` the database refuses any change
to it or its files (trigger in migration 0002_releases_initial). Building is idempotent: a
crashed or redelivered build starts again from an empty directory, a done one returns at once.

A killed worker (rules in traces/jobs.py): the build runs under the release's liveness lock, so
a duplicate delivery exits. The files are written to ``v<n>.building/`` and renamed to ``v<n>/``;
the ReleaseFile rows and the done status are written in one transaction after that. So a build
whose worker died has no file rows, and the sweep only has to remove ``v<n>.building/`` and a
``v<n>/`` renamed just before the death, then queue the same release (the same number) again, or
fail it after MAST_JOB_MAX_ATTEMPTS attempts. A failed release can be retried (``release_retry``).
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from annotations.models import Release, ReleaseFile, ReleasePolicy, Round
from annotations.releases import writers as exporting
from annotations.releases.jobs import (
    RELEASE_JOBS,
    building_dir,
    local_work_prefix,
    release_dir,
    release_prefix,
    remove_partial_build,
)
from annotations.releases.records import release_records
from annotations.releases.selectors import (
    ReleaseSpec,
    ReleaseStats,
    release_agreement,
    release_count_candidates,
    release_inputs_fingerprint,
    release_withheld,
)
from taxonomy.mapping import VersionMapper
from taxonomy.models import Category, TaxonomyVersion
from taxonomy.selectors import version_modes
from traces import storage
from traces.jobs import (
    database_connection_lost,
    job_lock_held,
    job_queue_after_commit,
    job_recover,
    job_retry,
    job_running,
)
from traces.models import Project
from traces.projects.selectors import user_can

logger = logging.getLogger(__name__)

OPTION_KEYS = ("majority", "raters", "judge", "evidence", "trace_text")
DEFAULT_OPTIONS = {
    "majority": False,
    "raters": True,
    "judge": True,
    "evidence": True,
    "trace_text": True,
    "formats": list(exporting.FORMATS),
}


def _clean_options(options: dict[str, Any] | None) -> dict[str, Any]:
    options = dict(options or {})
    unknown = set(options) - set(OPTION_KEYS) - {"formats"}
    if unknown:
        raise ValidationError(f"Unknown release option(s): {', '.join(sorted(unknown))}.")
    out = {k: bool(options.get(k, DEFAULT_OPTIONS[k])) for k in OPTION_KEYS}
    formats = options.get("formats") or DEFAULT_OPTIONS["formats"]
    bad = [f for f in formats if f not in exporting.FORMATS]
    if bad:
        choices = ", ".join(exporting.FORMATS)
        raise ValidationError(f"Unknown format(s) {', '.join(map(str, bad))}: choose from {choices}.")
    out["formats"] = [f for f in exporting.FORMATS if f in formats]
    return out


def _clean_filters(filters: dict[str, Any] | None) -> dict[str, list[str]]:
    filters = dict(filters or {})
    unknown = set(filters) - {"mas_name", "llm_name", "benchmark"}
    if unknown:
        raise ValidationError(f"Unknown filter(s): {', '.join(sorted(unknown))} (use mas_name, llm_name, benchmark).")
    out = {}
    for key, value in filters.items():
        values = [value] if isinstance(value, str) else list(value or [])
        if values:
            out[key] = [str(v) for v in values]
    return out


@transaction.atomic
def release_create(
    *,
    project: Project,
    by,
    selection: str = Release.Selection.AGREED,
    round: Round | None = None,
    filters: dict[str, Any] | None = None,
    options: dict[str, Any] | None = None,
    taxonomy_version: TaxonomyVersion | None = None,
    title: str = "",
    notes: str = "",
    enqueue: bool = True,
) -> Release:
    """Number and record a release; its build runs in the background once this commits."""
    if not user_can(user=by, project=project, capability="manage"):
        raise PermissionDenied("Only managers of the project create releases.")
    if selection not in Release.Selection.values:
        raise ValidationError(f"Unknown selection {selection!r}: choose agreed, round or filter.")
    if selection == Release.Selection.ROUND:
        if round is None:
            raise ValidationError("Choose the round whose traces the release holds.")
        if round.project_id != project.pk:
            raise ValidationError("That round belongs to another project.")
        if round.state != Round.State.CLOSED:
            raise ValidationError(f"Round {round.name} is not closed yet: its labels are not final.")
    else:
        round = None
    version = taxonomy_version or project.taxonomy_version
    if version is None:
        raise ValidationError("The project has no taxonomy version; choose one for the release.")
    clean_filters = _clean_filters(filters) if selection == Release.Selection.FILTER else {}
    if selection == Release.Selection.FILTER and not clean_filters:
        raise ValidationError("A filter release needs at least one framework, LLM or benchmark.")
    clean_options = _clean_options(options)
    Project.objects.select_for_update().filter(pk=project.pk).first()  # serialise numbering per project
    fingerprint = release_inputs_fingerprint(project=project)
    latest = Release.objects.filter(project=project).exclude(status=Release.Status.FAILED).order_by("-number").first()
    if (
        latest is not None
        and latest.manifest.get("inputs_fingerprint") == fingerprint
        and (latest.taxonomy_version_id, latest.selection, latest.round_id, latest.filters, latest.options)
        == (version.pk, selection, getattr(round, "pk", None), clean_filters, clean_options)
        and (latest.title, latest.notes) == (title.strip()[:200], notes.strip())
    ):
        # A repeated request (double click, retry) for a release of unchanged labels: the same
        # release, unless its build lost its worker: then that build is queued again now.
        if latest.status != Release.Status.RUNNING or job_lock_held(kind=RELEASE_JOBS, pk=latest.pk):
            return latest
        latest = job_recover(kind=RELEASE_JOBS, pk=latest.pk)
        if latest.status != Release.Status.FAILED:
            return latest
    number = (Release.objects.filter(project=project).aggregate(n=Max("number"))["n"] or 0) + 1
    release = Release(
        manifest={"inputs_fingerprint": fingerprint},
        project=project,
        number=number,
        title=title.strip()[:200],
        notes=notes.strip(),
        taxonomy_version=version,
        selection=selection,
        round=round,
        filters=clean_filters,
        options=clean_options,
        created_by=by if getattr(by, "pk", None) else None,
    )
    release.full_clean()
    release.save()
    if enqueue:
        job_queue_after_commit(kind=RELEASE_JOBS, pk=release.pk)
    return release


def release_retry(*, release: Release, by) -> Release:
    """Build a failed release again: the same number and inputs. Raises PermissionDenied, or
    JobNotRetryable (409) when the release is not failed."""
    if not user_can(user=by, project=release.project, capability="manage"):
        raise PermissionDenied("Only managers of the project retry releases.")
    return job_retry(kind=RELEASE_JOBS, pk=release.pk, fields={"n_done": 0})


def _taxonomy_manifest(version: TaxonomyVersion) -> dict[str, Any]:
    cats = {c.pk: c for c in Category.objects.filter(version=version)}
    return {
        "id": version.pk,
        "label": version.label,
        "taxonomy": version.taxonomy.name,
        "number": version.number,
        "status": version.status,
        "categories": [{"code": c.code, "name": c.name, "description": c.description} for c in cats.values()],
        "modes": [
            {"code": m.code, "name": m.name, "category": cats[m.category_id].code, "definition": m.definition}
            for m in version_modes(version=version)
        ],
    }


def release_manifest(
    *,
    spec: ReleaseSpec,
    stats: ReleaseStats,
    mapper: VersionMapper,
    files: Iterable[exporting.WrittenFile],
    options: dict[str, Any],
    number: int | None,
    created_at: datetime,
    created_by: str,
    title: str = "",
    notes: str = "",
    round_name: str = "",
) -> dict[str, Any]:
    project = spec.project
    return {
        "name": spec.name or f"{project.slug} export",
        "title": title or f"{project.name}: MAST failure labels",
        "notes": notes,
        "version": number,
        "project": {"slug": project.slug, "name": project.name},
        "created_at": created_at.isoformat(),
        "created_by": created_by,
        "selection": {"kind": spec.selection, "round": round_name, "filters": spec.filters},
        "options": options,
        "taxonomy": _taxonomy_manifest(spec.version),
        "counts": {
            "traces": stats.traces,
            "consensus_traces": stats.consensus_traces,
            "majority_traces": stats.majority_traces,
            "majority_labels": stats.majority_labels,
            "skipped_without_labels": stats.skipped_no_labels,
            "by_mas_name": dict(sorted(stats.by_mas_name.items())),
            "by_llm_name": dict(sorted(stats.by_llm_name.items())),
            "by_benchmark_name": dict(sorted(stats.by_benchmark_name.items())),
            "present_per_mode": {c: stats.present.get(c, 0) for c in mapper.codes},
        },
        "mapping": {
            "mapped_labels": mapper.mapped,
            "unmappable_labels": mapper.unmappable,
            # per source version: labels read, carried with a value, unknown in the target, dropped
            "by_version": mapper.summary(),
            "edges_by_kind": dict(sorted(mapper.kinds.items())),
            "source_versions": sorted(
                TaxonomyVersion.objects.filter(pk__in=mapper.sources).values_list("number", flat=True)
            ),
        },
        "agreement": release_agreement(round_ids=stats.rounds),
        "withheld": release_withheld(spec=spec),
        "inputs_fingerprint": release_inputs_fingerprint(project=project),
        "files": [f.as_dict() for f in files],
    }


def export_write(
    *,
    spec: ReleaseSpec,
    directory: Path,
    formats: list[str],
    options: dict[str, Any],
    number: int | None = None,
    created_by: str = "",
    title: str = "",
    notes: str = "",
    progress=None,
) -> tuple[list[exporting.WrittenFile], dict[str, Any], ReleaseStats, VersionMapper]:
    """Write the data files, manifest.json and README.md of `spec` into `directory` (streamed)."""
    directory.mkdir(parents=True, exist_ok=True)
    mapper = VersionMapper(spec.version)
    stats = ReleaseStats()
    records = release_records(spec=spec, stats=stats, mapper=mapper, progress=progress)
    files = exporting.write_records(records, directory=directory, formats=formats, codes=mapper.codes)
    manifest = release_manifest(
        spec=spec,
        stats=stats,
        mapper=mapper,
        files=files,
        options=options,
        number=number,
        created_at=timezone.now(),
        created_by=created_by,
        title=title,
        notes=notes,
        round_name=spec.round.name if spec.round else "",
    )
    manifest_file = exporting.write_text(
        directory / "manifest.json", json.dumps(manifest, indent=2, ensure_ascii=False), kind="manifest"
    )
    card = exporting.write_text(directory / "README.md", exporting.render_card(manifest), kind="card")
    return [*files, manifest_file, card], manifest, stats, mapper


def release_build(*, release_id: int) -> Release | None:
    """Build the files of a release under its liveness lock; a done or failed release is
    returned untouched and a duplicate delivery exits (idempotent)."""
    with job_running(kind=RELEASE_JOBS, pk=release_id) as job:
        if job is not None:
            _build(release_id)
    return Release.objects.filter(pk=release_id).first()


def _build(release_id: int) -> None:
    release = Release.objects.select_related("project", "taxonomy_version__taxonomy", "round", "created_by").get(
        pk=release_id
    )
    spec = ReleaseSpec.from_release(release)
    total = release_count_candidates(spec=spec)
    Release.objects.filter(pk=release.pk).update(status=Release.Status.RUNNING, n_total=total, n_done=0, error="")
    prefix = release_prefix(release=release)
    local_final = release_dir(release=release)
    remove_partial_build(release)
    # On a local disk: written beside the final folder and renamed into it. With an object store:
    # written in a private temporary folder, uploaded, then removed.
    if local_final is not None:
        work_dir = building_dir(local_final)
    else:
        work_dir = Path(tempfile.mkdtemp(prefix=local_work_prefix(release)))

    def progress(n: int) -> None:
        Release.objects.filter(pk=release.pk).update(n_done=n)

    try:
        files, manifest, stats, mapper = export_write(
            spec=spec,
            directory=work_dir,
            formats=release.options.get("formats") or list(exporting.FORMATS),
            options=release.options,
            number=release.number,
            created_by=release.created_by.get_username() if release.created_by else "",
            title=release.title,
            notes=release.notes,
            progress=progress,
        )
        folder = f"{release.project.slug}-v{release.number}"
        archive = exporting.write_zip(work_dir / f"{folder}.zip", files, folder=folder)
        _publish(work_dir, local_final, prefix, [*files, archive])
    except Exception as exc:
        shutil.rmtree(work_dir, ignore_errors=True)
        if local_final is None:
            _remove_uploaded(prefix)
        if database_connection_lost(exc):
            raise  # not the build's fault: left running, the sweep builds it again
        Release.objects.filter(pk=release.pk).update(
            status=Release.Status.FAILED, error=f"{type(exc).__name__}: {exc}", finished_at=timezone.now()
        )
        raise
    with transaction.atomic():
        ReleaseFile.objects.bulk_create(
            ReleaseFile(
                release=release,
                name=f.name,
                kind=f.kind,
                size_bytes=f.size_bytes,
                sha256=f.sha256,
                path=f"{prefix}/{f.name}",
            )
            for f in [*files, archive]
        )
        Release.objects.filter(pk=release.pk).update(
            status=Release.Status.DONE,
            n_done=total,
            n_traces=stats.traces,
            n_mapped=mapper.mapped,
            manifest=manifest,
            finished_at=timezone.now(),
        )


def _remove_uploaded(prefix: str) -> None:
    """Files a failed build uploaded before the failure (the next attempt's reset removes them too,
    should the store itself be what failed)."""
    try:
        storage.delete_tree(prefix)
    except Exception:  # noqa: BLE001 - the build's own error is the one to report
        logger.warning("release files under %s not removed after a failed build", prefix, exc_info=True)


def _publish(work_dir: Path, local_final: Path | None, prefix: str, files: list[exporting.WrittenFile]) -> None:
    """Move the built files to the release's folder in the storage."""
    if local_final is not None:
        work_dir.rename(local_final)
        return
    for f in files:
        storage.put_file(f"{prefix}/{f.name}", f.path)
    shutil.rmtree(work_dir, ignore_errors=True)


def release_policy_set(*, project: Project, by, members_may_download: bool) -> ReleasePolicy:
    if not user_can(user=by, project=project, capability="manage"):
        raise PermissionDenied("Only managers change who may download releases.")
    policy, _ = ReleasePolicy.objects.update_or_create(
        project=project, defaults={"members_may_download": bool(members_may_download)}
    )
    return policy


def release_zip_file(*, release: Release) -> tuple[str, str]:
    """The zip's name in the storage and its download name; only for done releases."""
    if release.status != Release.Status.DONE:
        raise ValidationError("This release is not built yet.")
    row = next((f for f in release.files.all() if f.kind == "zip"), None)
    if row is None:
        raise ValidationError("This release has no zip file.")
    return row.path, row.name
