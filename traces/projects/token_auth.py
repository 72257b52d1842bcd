"""API token authentication in one plain-SQL statement.

DRF's ``TokenAuthentication`` reads the token and its user through the ORM on every API call;
for the labelling screen's autosave (the product's most frequent request) compiling that query
cost ~1.5 ms of the web process's ~9 ms per save (bench/bench_saves.py). This class reads the
same row with the same rules: an unknown key is "Invalid token.", an inactive user "User inactive
or deleted." (401 with ``WWW-Authenticate: Token``); the user and the ``Token`` come back as the
ORM would build them.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.db import connection
from django.utils.translation import gettext_lazy as _
from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication
from rest_framework.authtoken.models import Token

from traces.sqlrows import model_from_row, model_select, model_width


class PlainSqlTokenAuthentication(TokenAuthentication):
    """``Authorization: Token <key>``, as DRF's ``TokenAuthentication``."""

    def authenticate_credentials(self, key):
        user_model = get_user_model()
        sql = (
            f"SELECT {model_select(Token, 't')}, {model_select(user_model, 'u')}"  # noqa: S608 - names from the models
            f" FROM {Token._meta.db_table} t JOIN {user_model._meta.db_table} u ON u.id = t.user_id"
            " WHERE t.key = %s"
        )
        with connection.cursor() as cursor:
            cursor.execute(sql, [key])
            row = cursor.fetchone()
        if row is None:
            raise exceptions.AuthenticationFailed(_("Invalid token."))
        n = model_width(Token)
        token = model_from_row(Token, row[:n])
        user = model_from_row(user_model, row[n:])
        if not user.is_active:
            raise exceptions.AuthenticationFailed(_("User inactive or deleted."))
        token.user = user
        return user, token
