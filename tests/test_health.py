def test_healthz_answers_ok_whatever_the_host(client, db, settings):
    settings.ALLOWED_HOSTS = ["mast.example.org"]
    settings.SECURE_SSL_REDIRECT = True
    response = client.get("/healthz", HTTP_HOST="127.0.0.1:8000")
    assert response.status_code == 200 and response.content == b"ok"


def test_other_paths_still_check_the_host(client, db, settings):
    settings.ALLOWED_HOSTS = ["mast.example.org"]
    assert client.get("/login/", HTTP_HOST="evil.example.com").status_code == 400
