"""Upload through the API and the import page: 202 + job, status, list, permissions."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from rest_framework.test import APIClient

from traces.importing.jobs import import_job_run
from traces.models import ImportJob, Trace

pytestmark = pytest.mark.django_db


def _api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def _upload(demo_data, rel="openmanus/demo_openmanus.log"):
    path = demo_data / rel
    return SimpleUploadedFile(path.name, path.read_bytes(), content_type="text/plain")


def test_manager_upload_answers_202_with_the_queued_job(
    manager, project, demo_data, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks() as callbacks:
        response = _api(manager).post(
            f"/api/projects/{project.slug}/imports/",
            {"files": [_upload(demo_data), _upload(demo_data, "ag2/mathchat_demo_human.json")], "format": "auto"},
            format="multipart",
        )
    assert response.status_code == 202
    job = ImportJob.objects.get(pk=response.data["id"])
    assert (job.status, job.created_by, job.file_names) == (
        "queued",
        manager,
        ["demo_openmanus.log", "mathchat_demo_human.json"],
    )
    assert len(callbacks) == 1  # the Celery task is sent only once the job row is committed
    assert response.data["status"] == "queued"


def test_job_status_shows_the_result_once_run(manager, project, demo_data, django_capture_on_commit_callbacks):
    client = _api(manager)
    with django_capture_on_commit_callbacks():
        job_id = client.post(
            f"/api/projects/{project.slug}/imports/", {"files": [_upload(demo_data)]}, format="multipart"
        ).data["id"]
    import_job_run(job_id=job_id)  # what the worker does (the worker itself: test_import_job.py)

    data = client.get(f"/api/projects/{project.slug}/imports/{job_id}/").data
    assert (data["status"], data["percent"], data["n_imported"], data["n_duplicates"], data["n_failed"]) == (
        "done",
        100,
        1,
        0,
        0,
    )
    assert Trace.objects.get().import_job_id == job_id


def test_failed_job_status_carries_the_exact_error(manager, project, django_capture_on_commit_callbacks):
    client = _api(manager)
    bad = SimpleUploadedFile("notes.txt", "caf\xe9\n".encode("latin-1"))
    with django_capture_on_commit_callbacks():
        job_id = client.post(f"/api/projects/{project.slug}/imports/", {"files": [bad]}, format="multipart").data["id"]
    import_job_run(job_id=job_id)

    data = client.get(f"/api/projects/{project.slug}/imports/{job_id}/").data
    assert data["status"] == "failed"
    assert data["n_failed"] == 1
    assert data["error"].startswith("notes.txt, line 1: not UTF-8 text")


def test_upload_with_an_unknown_format_is_a_400(manager, project, demo_data):
    response = _api(manager).post(
        f"/api/projects/{project.slug}/imports/", {"files": [_upload(demo_data)], "format": "docx"}, format="multipart"
    )
    assert response.status_code == 400
    assert "format" in response.data


def test_upload_over_the_size_limit_is_refused_at_once(manager, project, demo_data, settings):
    settings.MAST_IMPORT_MAX_FILE_BYTES = 100
    response = _api(manager).post(
        f"/api/projects/{project.slug}/imports/", {"files": [_upload(demo_data)]}, format="multipart"
    )
    assert response.status_code == 400
    assert "demo_openmanus.log" in response.data["detail"]
    assert ImportJob.objects.count() == 0


def test_job_list_is_paginated_with_a_fixed_number_of_queries(manager, project, django_assert_num_queries):
    for _ in range(5):
        ImportJob.objects.create(project=project, created_by=manager)
    client = _api(manager)
    client.get(f"/api/projects/{project.slug}/imports/")  # the role is now cached on the user
    # project, count, one page of jobs (created_by joined): not one query per job
    with django_assert_num_queries(3):
        response = client.get(f"/api/projects/{project.slug}/imports/")
    assert response.data["count"] == 5
    assert len(response.data["results"]) == 5


@pytest.mark.parametrize("who", ["annotator", "viewer"])
def test_annotators_and_viewers_cannot_upload(request, project, demo_data, who):
    user = request.getfixturevalue(who)
    response = _api(user).post(
        f"/api/projects/{project.slug}/imports/", {"files": [_upload(demo_data)]}, format="multipart"
    )
    assert response.status_code == 403
    assert ImportJob.objects.count() == 0


def test_outsiders_do_not_see_the_project(outsider, project, demo_data):
    response = _api(outsider).post(
        f"/api/projects/{project.slug}/imports/", {"files": [_upload(demo_data)]}, format="multipart"
    )
    assert response.status_code == 404


def test_a_job_of_another_project_is_not_found(manager, project):
    from tests.factories import ProjectFactory

    other = ImportJob.objects.create(project=ProjectFactory(slug="elsewhere"))
    response = _api(manager).get(f"/api/projects/{project.slug}/imports/{other.pk}/")
    assert response.status_code == 404


# ---------------------------------------------------------------- pages


def test_import_page_shows_the_form_and_recent_jobs(client, manager, project):
    ImportJob.objects.create(project=project, created_by=manager, file_names=["a.log"])
    client.force_login(manager)
    response = client.get(reverse("import_page", kwargs={"slug": project.slug}))
    assert response.status_code == 200
    html = response.content.decode()
    assert 'name="files"' in html
    assert "a.log" in html


@pytest.mark.parametrize("who", ["annotator", "viewer"])
def test_import_page_is_for_managers_only(request, client, project, who):
    client.force_login(request.getfixturevalue(who))
    assert client.get(reverse("import_page", kwargs={"slug": project.slug})).status_code == 403


def test_import_page_is_not_found_for_outsiders(client, outsider, project):
    client.force_login(outsider)
    assert client.get(reverse("import_page", kwargs={"slug": project.slug})).status_code == 404


def test_htmx_upload_redirects_to_the_job_page(client, manager, project, demo_data, django_capture_on_commit_callbacks):
    client.force_login(manager)
    with django_capture_on_commit_callbacks():
        response = client.post(
            reverse("import_page", kwargs={"slug": project.slug}),
            {"files": [_upload(demo_data)], "format": "auto"},
            HTTP_HX_REQUEST="true",
        )
    job = ImportJob.objects.get()
    assert response.status_code == 204
    assert response["HX-Redirect"] == reverse("import_job_detail", kwargs={"slug": project.slug, "pk": job.pk})


def test_upload_without_files_shows_the_error_on_the_form(client, manager, project):
    client.force_login(manager)
    response = client.post(reverse("import_page", kwargs={"slug": project.slug}), {"format": "auto"})
    assert response.status_code == 400
    assert "choose at least one file" in response.content.decode()


def test_progress_partial_polls_while_running_and_stops_when_done(client, manager, project):
    job = ImportJob.objects.create(project=project, created_by=manager, status="running", bytes_total=100)
    client.force_login(manager)
    url = reverse("import_job_progress", kwargs={"slug": project.slug, "pk": job.pk})
    assert 'hx-trigger="every 500ms"' in client.get(url).content.decode()
    ImportJob.objects.filter(pk=job.pk).update(status="failed", error="x.json, record 3: invalid JSON")
    html = client.get(url).content.decode()
    assert "hx-trigger" not in html
    assert "x.json, record 3: invalid JSON" in html


def test_import_page_query_count_does_not_grow_with_jobs(client, manager, project, django_assert_num_queries):
    client.force_login(manager)
    url = reverse("import_page", kwargs={"slug": project.slug})
    for _ in range(3):
        ImportJob.objects.create(project=project, created_by=manager, file_names=["a.log"])
    client.get(url)
    with django_assert_num_queries(5) as few:
        client.get(url)
    for _ in range(7):
        ImportJob.objects.create(project=project, created_by=manager, file_names=["b.log"])
    with django_assert_num_queries(len(few.captured_queries)):
        client.get(url)
