"""Files through the storage API (traces/storage.py), on a local folder and on a real S3-protocol
server (moto_server, tests/s3_server.py): the same behaviour from both, and the imports and
releases that use it keep nothing on the local disk when the store is S3 (issue 28)."""

from __future__ import annotations

import hashlib
import io
import json
import urllib.request
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone

from annotations.releases.services import RELEASE_JOBS, release_build, release_create
from mast_site.storage_url import FILESYSTEM, S3, StorageUrlError, storage_from_url
from tests.annotations.releases_factories import closed_round, make_trace
from traces import storage
from traces.importing.jobs import (
    IMPORT_JOBS,
    _write_progress,
    import_job_create,
    import_job_progress,
    import_job_run,
)
from traces.importing.results import ImportProgress
from traces.models import ImportJob, Trace

DEMO = Path(__file__).resolve().parents[1] / "traces" / "demo_data"


# ---------------------------------------------------------------- STORAGE_URL


def test_no_storage_url_is_the_local_folder_replacing_files():
    assert storage_from_url("", {}) == {"BACKEND": FILESYSTEM, "OPTIONS": {"allow_overwrite": True}}
    local = storage_from_url("file:///srv/mast/media", {})
    assert local["OPTIONS"]["location"] == "/srv/mast/media"


def test_an_s3_url_carries_bucket_prefix_endpoint_and_credentials():
    entry = storage_from_url(
        "s3://AKIA%2Fx:s%40cret@mast-files/studio/prod?endpoint_url=http://minio:9000&region=eu-west-1"
        "&addressing_style=path&verify=false",
        {},
    )
    options = entry["OPTIONS"]
    assert entry["BACKEND"] == S3
    assert (options["bucket_name"], options["location"]) == ("mast-files", "studio/prod")
    assert (options["access_key"], options["secret_key"]) == ("AKIA/x", "s@cret")
    assert (options["endpoint_url"], options["region_name"], options["addressing_style"]) == (
        "http://minio:9000",
        "eu-west-1",
        "path",
    )
    assert options["verify"] is False and options["file_overwrite"] is True and options["default_acl"] is None


def test_the_usual_aws_variables_select_s3_without_a_url():
    entry = storage_from_url("", {"AWS_STORAGE_BUCKET_NAME": "b", "AWS_S3_ENDPOINT_URL": "http://s3:9000"})
    assert entry["BACKEND"] == S3
    assert (entry["OPTIONS"]["bucket_name"], entry["OPTIONS"]["endpoint_url"]) == ("b", "http://s3:9000")


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("s3:///prefix", "needs a bucket"),
        ("file://relative/path", "absolute path"),
        ("gs://bucket", "use file:///path or s3://bucket/prefix"),
        ("s3://b?endpoint=http://x", "unknown option 'endpoint'"),
    ],
)
def test_a_storage_url_it_cannot_use_is_refused_saying_why(url, says):
    with pytest.raises(StorageUrlError, match=says):
        storage_from_url(url, {})


# ---------------------------------------------------------------- the helpers on both backends


@pytest.fixture(params=["local", "s3"])
def backend(request, settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    if request.param == "s3":
        request.getfixturevalue("s3_storage")
    return request.param


def test_put_replaces_a_file_and_reads_back_on_both_backends(backend):
    storage.put("imports/7/run.json", b'{"a": 1}')
    storage.put("imports/7/run.json", b'{"a": 2}')
    storage.put("imports/7/sub/b.log", io.BytesIO(b"line\n" * 10))
    assert storage.read_bytes("imports/7/run.json") == b'{"a": 2}'
    assert sorted(storage.names_under("imports/7")) == ["imports/7/run.json", "imports/7/sub/b.log"]
    assert storage.folders_under("imports") == ["7"]
    assert b"".join(storage.chunks("imports/7/sub/b.log", size=7)) == b"line\n" * 10
    assert storage.modified("imports/7/run.json") is not None
    assert storage.is_local() == (backend == "local")

    storage.delete_tree("imports/7")
    assert storage.names_under("imports/7") == [] and not storage.exists_tree("imports/7")
    storage.delete("imports/7/run.json")  # gone already: no error
    storage.put("keep.txt", b"x")
    with pytest.raises(ValueError, match="refusing to delete the whole storage"):
        storage.delete_tree("/")
    assert storage.read_bytes("keep.txt") == b"x"


def test_fetch_copies_a_stored_file_to_a_local_path(backend, tmp_path):
    data = bytes(range(256)) * 9000  # 2.3 MB: S3 fetches it in ranged parts
    storage.put("releases/p/v1/big.bin", data)
    dest = tmp_path / "copy.bin"
    storage.fetch("releases/p/v1/big.bin", dest)
    assert dest.read_bytes() == data


def test_a_signed_link_downloads_the_file_from_s3_and_a_local_folder_has_none(backend):
    storage.put("releases/p/v1/data.jsonl", b'{"x": 1}\n')
    url = storage.signed_url("releases/p/v1/data.jsonl", filename="p v1.jsonl")
    if backend == "local":
        assert url is None
        return
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.read() == b'{"x": 1}\n'
        assert response.headers["Content-Disposition"] == "attachment; filename*=UTF-8''p%20v1.jsonl"


# ---------------------------------------------------------------- imports and releases on S3


@pytest.fixture
def empty_media(settings, tmp_path):
    """MEDIA_ROOT on an empty folder: with S3, nothing may land in it."""
    settings.MEDIA_ROOT = tmp_path / "media"
    return Path(settings.MEDIA_ROOT)


def _files_in(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file()] if folder.exists() else []


def test_an_import_on_s3_stores_the_upload_there_runs_from_it_and_removes_it(
    s3_storage, empty_media, project, manager
):
    server, bucket, _ = s3_storage
    data = (DEMO / "metagpt" / "run_demo_7.json").read_bytes()
    job = import_job_create(project=project, by=manager, files=[SimpleUploadedFile("../run.json", data)])
    assert job.upload_dir == f"imports/{job.pk}"
    assert server.keys(bucket) == [f"imports/{job.pk}/run.json"]

    _write_progress(job.pk, ImportProgress(bytes_done=10, bytes_total=len(data), imported=0, duplicates=0))
    ImportJob.objects.filter(pk=job.pk).update(status=ImportJob.Status.RUNNING)
    job.refresh_from_db()
    assert import_job_progress(job=job)["bytes_done"] == 10  # read from the store

    job = import_job_run(job_id=job.pk)
    assert (job.status, job.n_imported) == ("done", 1), job.error
    assert Trace.objects.filter(import_job=job).count() == 1
    assert server.keys(bucket) == []  # upload and progress file removed
    assert _files_in(empty_media) == []


def test_a_refused_import_on_s3_deletes_the_upload_and_a_stopped_one_keeps_it_for_a_retry(
    s3_storage, empty_media, project, manager
):
    server, bucket, _ = s3_storage
    bad = import_job_create(project=project, by=manager, files=[SimpleUploadedFile("x.json", b"{not json")])
    bad = import_job_run(job_id=bad.pk)
    assert (bad.status, bad.failure) == ("failed", "refused")
    assert server.keys(bucket) == []

    kept = import_job_create(project=project, by=manager, files=[SimpleUploadedFile("y.log", b"Coder: hi\n")])
    ImportJob.objects.filter(pk=kept.pk).update(status="failed", failure="stopped", finished_at=timezone.now())
    kept.refresh_from_db()
    assert kept.can_retry and storage.exists_tree(kept.upload_dir)
    ImportJob.objects.filter(pk=kept.pk).update(finished_at=timezone.now() - timedelta(days=30))
    IMPORT_JOBS.housekeeping(timezone.now())
    kept.refresh_from_db()
    assert (kept.upload_dir, server.keys(bucket)) == ("", [])


def test_an_orphaned_upload_on_s3_is_removed_once_quiet(s3_storage, empty_media, settings, db):
    server, bucket, _ = s3_storage
    storage.put("imports/987654/orphan.log", b"Coder: half an upload\n")
    IMPORT_JOBS.housekeeping(timezone.now())
    assert server.keys(bucket) == ["imports/987654/orphan.log"]  # may still be a request writing it
    settings.MAST_IMPORT_ORPHAN_MINUTES = 1
    IMPORT_JOBS.housekeeping(timezone.now() + timedelta(minutes=2))
    assert server.keys(bucket) == []


def _released(project, manager, mast_version):
    traces = [make_trace(project, raw_text=f"Planner: step {k}\nCoder: done") for k in range(5)]
    closed_round(project, mast_version, {t: {"1.3"} for t in traces})
    release = release_build(release_id=release_create(project=project, by=manager).pk)
    assert release.status == "done", release.error
    return release


def test_a_release_on_s3_is_uploaded_whole_and_downloads_streamed_or_by_a_signed_link(
    s3_storage, empty_media, project, manager, mast_version, client, settings
):
    server, bucket, _ = s3_storage
    release = _released(project, manager, mast_version)
    rows = {f.name: f for f in release.files.all()}
    prefix = f"releases/{project.slug}/v{release.number}"
    assert server.keys(bucket) == sorted(f"{prefix}/{name}" for name in rows)
    assert _files_in(empty_media) == []
    for row in rows.values():
        assert row.path == f"{prefix}/{row.name}"
        assert hashlib.sha256(b"".join(storage.chunks(row.path))).hexdigest() == row.sha256

    client.force_login(manager)
    zip_row = next(f for f in rows.values() if f.kind == "zip")
    response = client.get(f"/p/{project.slug}/releases/{release.number}/download/")
    assert response.status_code == 200, response.content[:300]
    assert response["Content-Length"] == str(zip_row.size_bytes)
    assert hashlib.sha256(b"".join(response.streaming_content)).hexdigest() == zip_row.sha256

    manifest = client.get(f"/p/{project.slug}/releases/{release.number}/files/manifest.json")
    assert json.loads(b"".join(manifest.streaming_content))["files"]

    settings.MAST_STORAGE_REDIRECT = True
    response = client.get(f"/p/{project.slug}/releases/{release.number}/download/")
    assert response.status_code == 302 and response["Location"].startswith(server.endpoint)
    with urllib.request.urlopen(response["Location"], timeout=10) as signed:
        assert hashlib.sha256(signed.read()).hexdigest() == zip_row.sha256


def test_what_a_killed_build_uploaded_to_s3_is_removed_before_it_runs_again(
    s3_storage, empty_media, project, manager, mast_version
):
    """A worker killed between uploading the files and writing their rows left objects and no
    rows: the sweep's reset removes them, and the build that follows publishes the release once."""
    server, bucket, _ = s3_storage
    traces = [make_trace(project, raw_text=f"Planner: go {k}\nCoder: done") for k in range(3)]
    closed_round(project, mast_version, {t: {"1.3"} for t in traces})
    release = release_create(project=project, by=manager)
    prefix = f"releases/{project.slug}/v{release.number}"
    storage.put(f"{prefix}/{project.slug}-v1.zip", b"PK half a zip")
    storage.put(f"{prefix}.building/x", b"")
    RELEASE_JOBS.reset(release)
    assert server.keys(bucket) == []

    release = release_build(release_id=release.pk)
    assert release.status == "done"
    assert server.keys(bucket) == sorted(f"{prefix}/{name}" for name in release.files.values_list("name", flat=True))
