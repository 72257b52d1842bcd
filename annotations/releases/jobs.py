"""Release builds as a kind of background job (traces/jobs.py): where a build writes, how to send it,
what a dead build leaves behind. Registered in AnnotationsConfig.ready(); kept apart from the
services so loading Django does not load the writers (pyarrow) and selectors (numpy)."""

from __future__ import annotations

import glob
import shutil
import tempfile
from pathlib import Path

from annotations.models import Release
from traces import storage
from traces.jobs import JobKind, task_send


def release_prefix(*, release: Release) -> str:
    """The release's folder in the storage (traces/storage.py): releases/<slug>/v<n>."""
    return f"releases/{release.project.slug}/v{release.number}"


def release_dir(*, release: Release) -> Path | None:
    """The release's folder on this machine's disk when the storage is a local folder, else None."""
    return storage.local_path(release_prefix(release=release))


def building_dir(final_dir: Path) -> Path:
    return final_dir.with_name(final_dir.name + ".building")


def local_work_prefix(release: Release) -> str:
    """The prefix of the private temporary folder a build writes in before it uploads to an object store."""
    return f"mast-release-{release.pk}-"


def remove_partial_build(release: Release) -> None:
    """What a build that did not finish left behind: its work folder, a final folder renamed (or
    files uploaded) just before its worker died. Never for a done release (its files are published)."""
    prefix = release_prefix(release=release)
    storage.delete_tree(f"{prefix}.building")
    storage.delete_tree(prefix)
    for folder in glob.glob(str(Path(tempfile.gettempdir()) / f"{local_work_prefix(release)}*")):
        shutil.rmtree(folder, ignore_errors=True)  # a build on this machine killed before its upload


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
