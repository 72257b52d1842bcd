"""Release builds as a kind of background job (traces/jobs.py): where a build writes, how to send it,
what a dead build leaves behind. Registered in AnnotationsConfig.ready(); kept apart from the
services so loading Django does not load the writers (pyarrow) and selectors (numpy)."""

from __future__ import annotations

import shutil
from pathlib import Path

from django.conf import settings

from annotations.models import Release
from traces.jobs import JobKind, task_send


def release_dir(*, release: Release) -> Path:
    return Path(settings.MEDIA_ROOT) / "releases" / release.project.slug / f"v{release.number}"


def building_dir(final_dir: Path) -> Path:
    return final_dir.with_name(final_dir.name + ".building")


def remove_partial_build(release: Release) -> None:
    """What a build that did not finish left on disk: its work folder, a final folder renamed
    just before its worker died. Never for a done release (its files are published)."""
    final_dir = release_dir(release=release)
    shutil.rmtree(building_dir(final_dir), ignore_errors=True)
    shutil.rmtree(final_dir, ignore_errors=True)


def _send_build(release_id: int) -> None:
    task_send("annotations.build_release", release_id)


RELEASE_JOBS = JobKind(
    name="release",
    lock_class=0x4D414A52,  # "MAJR"; imports use 0x4D414A49 (traces.importing.jobs)
    model=Release,
    send=_send_build,
    reset=remove_partial_build,
    stopped_message="the worker stopped {n} times while building this release; retry it, and if it stops again "
    "see the worker's log (memory, disk space)",
)
