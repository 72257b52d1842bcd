"""The site's error pages: its layout and navigation, a way back, the reason where it is safe."""

from __future__ import annotations

from django.test import Client, RequestFactory

from traces.projects.errors import server_error


def test_forbidden_page_has_navigation_and_says_the_role(client, project, viewer):
    client.force_login(viewer)
    response = client.get(f"/p/{project.slug}/rounds/new/", HTTP_REFERER=f"http://testserver/p/{project.slug}/")
    body = response.content.decode()
    assert response.status_code == 403
    assert 'nav class="mainnav"' in body
    assert f"Your role in {project.name} (viewer) does not allow this." in body
    assert f'href="http://testserver/p/{project.slug}/" data-error-back' in body
    assert 'href="/"' in body


def test_not_found_reads_the_same_for_a_missing_and_a_foreign_project(client, project, outsider):
    client.force_login(outsider)
    foreign = client.get(f"/p/{project.slug}/")
    missing = client.get("/p/no-such-project/")
    assert foreign.status_code == missing.status_code == 404
    assert "No such project." in foreign.content.decode()

    def main(response, slug):
        body = response.content.decode()
        return body[body.index("<main") :].replace(slug, "X")

    assert main(foreign, project.slug) == main(missing, "no-such-project")


def test_unknown_address_shows_no_resolver_internals(client, annotator):
    client.force_login(annotator)
    response = client.get("/nowhere/at/all/")
    body = response.content.decode()
    assert response.status_code == 404
    assert "Page not found" in body and 'nav class="mainnav"' in body
    assert "Reason:" not in body and "tried" not in body and "urlpatterns" not in body


def test_back_link_is_never_another_site(client, annotator):
    client.force_login(annotator)
    body = client.get("/nowhere/", HTTP_REFERER="https://evil.example/").content.decode()
    assert "evil.example" not in body


def test_signed_out_visitor_is_offered_to_log_in(db):
    body = Client().get("/nowhere/").content.decode()
    assert 'href="/login/?next=/nowhere/"' in body


def test_csrf_failure_says_nothing_changed(project, manager):
    client = Client(enforce_csrf_checks=True)
    client.force_login(manager)
    response = client.post(f"/p/{project.slug}/rounds/new/", {"name": "x"})
    body = response.content.decode()
    assert response.status_code == 403
    assert "Nothing was changed." in body and "security token" in body


def test_server_error_page_renders_without_the_database():
    response = server_error(RequestFactory().get("/p/demo/"))
    body = response.content.decode()
    assert response.status_code == 500
    assert "Something went wrong on our side" in body and 'href="/"' in body
