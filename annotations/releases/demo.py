"""Demo step: release v1 of the demo project from the agreed labels of its finished round(s),
with whatever LLM judge and MAST-Data judge labels exist, so the Releases tab has downloadable
files and the Analytics tab has data; then that release's JSONL imported into a second project,
"Demo: a release come back", where it is a closed round named after the release and its raters
are imported raters. Idempotent: a re-run builds nothing when the labels a release would hold
have not changed since the last one.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from annotations.models import Release
from annotations.releases.selectors import release_inputs_fingerprint
from annotations.releases.services import release_build, release_create
from annotations.rounds.agreed import agreed_adjudications
from traces import storage
from traces.importing.service import traces_import
from traces.projects.services import membership_set, project_get_or_create


def seed(ctx) -> None:
    project, manager = ctx.project, ctx.users["manager"]
    if not agreed_adjudications(project=project).exists():
        ctx.say("Releases: no closed round with agreed labels yet, so no release was built")
        return
    fingerprint = release_inputs_fingerprint(project=project)
    latest = Release.objects.filter(project=project, status=Release.Status.DONE).order_by("-number").first()
    if latest is not None and latest.manifest.get("inputs_fingerprint") == fingerprint:
        ctx.say(f"Releases: v{latest.number} is up to date ({latest.n_traces} traces)")
        return
    release = release_create(
        project=project,
        by=manager,
        title="Demo labels",
        notes="Agreed labels of the demo's calibration round, with the LLM judge's and MAST-Data judge's labels.",
        options={"majority": True, "raters": True, "judge": True, "evidence": True, "trace_text": True},
        enqueue=False,
    )
    release = release_build(release_id=release.pk)
    ctx.say(f"Releases: built v{release.number} ({release.n_traces} traces, zip + JSONL/CSV/Parquet + card)")
    _come_back(ctx, release)


def _come_back(ctx, release: Release) -> None:
    """The release's JSONL imported into its own project, as a team that receives it would."""
    manager = ctx.users["manager"]
    copy, _ = project_get_or_create(slug="release-back", name="Demo: a release come back", by=manager)
    membership_set(project=copy, user=manager, role="manager")
    row = release.files.get(kind="jsonl")
    with tempfile.TemporaryDirectory(prefix="mast-demo-release-") as tmp:
        jsonl = Path(tmp) / row.name
        storage.fetch(row.path, jsonl)  # the file as a team downloads it, whatever the storage
        result = traces_import(project=copy, paths_or_files=[jsonl], by=manager)
    ctx.say(f"Releases: v{release.number} imported into {copy.slug} ({result.imported} traces, its agreed labels back)")
