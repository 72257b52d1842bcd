"""The taxonomy API: versions with their categories, modes and mappings (read only)."""

from rest_framework import generics

from taxonomy.models import TaxonomyVersion
from taxonomy.serializers import VersionDetailOut, VersionListOut


class VersionListApi(generics.ListAPIView):
    """Every taxonomy version (taxonomies are a shared library, readable by any signed-in user)."""

    serializer_class = VersionListOut
    queryset = TaxonomyVersion.objects.select_related("taxonomy", "parent").order_by("taxonomy__name", "number")


class VersionDetailApi(generics.RetrieveAPIView):
    serializer_class = VersionDetailOut
    queryset = TaxonomyVersion.objects.select_related("taxonomy", "parent").prefetch_related(
        "categories", "modes__category", "mappings"
    )
