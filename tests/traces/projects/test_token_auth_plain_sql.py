"""API tokens are checked in one plain-SQL statement, with DRF's rules and answers."""

import pytest
from rest_framework.authtoken.models import Token

from traces.projects.token_auth import PlainSqlTokenAuthentication

pytestmark = pytest.mark.django_db


def test_token_and_user_come_back_as_the_orm_builds_them_in_one_query(annotator, django_assert_num_queries):
    token = Token.objects.create(user=annotator)
    with django_assert_num_queries(1):
        user, got = PlainSqlTokenAuthentication().authenticate_credentials(token.key)
    want = Token.objects.select_related("user").get(key=token.key)
    assert isinstance(got, Token) and got.key == want.key and got.created == want.created
    for f in type(user)._meta.concrete_fields:
        assert getattr(user, f.attname) == getattr(want.user, f.attname), f.name
    assert got.user is user and user.is_authenticated


def test_unknown_token_and_inactive_user_are_refused_with_401(client, annotator):
    token = Token.objects.create(user=annotator)
    ok = client.get("/api/projects/", HTTP_AUTHORIZATION=f"Token {token.key}")
    assert ok.status_code == 200 and [p["slug"] for p in ok.json()["results"]] == ["demo"]
    wrong = client.get("/api/projects/", HTTP_AUTHORIZATION="Token " + "0" * 40)
    assert wrong.status_code == 401 and wrong.json()["detail"] == "Invalid token."
    assert wrong["WWW-Authenticate"] == "Token"
    annotator.is_active = False
    annotator.save()
    gone = client.get("/api/projects/", HTTP_AUTHORIZATION=f"Token {token.key}")
    assert gone.status_code == 401 and gone.json()["detail"] == "User inactive or deleted."
