"""The API's default pagination: ``?page=`` must be a whole number from 1 (else 400 naming it)."""

from __future__ import annotations

from rest_framework.pagination import PageNumberPagination

from traces.api_errors import QueryParamError


class StrictPageNumberPagination(PageNumberPagination):
    """DRF's page-number pagination, except that a malformed ``page`` is a 400, not a silent page 1
    or a bare 404. A page past the last one stays DRF's 404 ("Invalid page")."""

    def get_page_number(self, request, paginator):
        raw = request.query_params.get(self.page_query_param)
        if raw in (None, "", *self.last_page_strings):
            return super().get_page_number(request, paginator)
        if not raw.isdigit() or int(raw) < 1:
            raise QueryParamError(self.page_query_param, f"must be a whole number from 1, not {raw[:40]!r}")
        return raw
