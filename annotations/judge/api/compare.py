"""The judge comparison (Table 2, judge-vs-judge kappa, corrected prevalences) and imported raters
through the API (managers). The comparison returns the numbers the page and its downloads show."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import JSONParser, MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from annotations.judge.comparison import judge_comparison
from annotations.judge.imported import imported_raters, rater_import
from annotations.judge.views.compare import MAX_UPLOAD, comparison_request
from traces.projects.permissions import ProjectScopedMixin


class StatOut(serializers.Serializer):
    value = serializers.FloatField(allow_null=True)
    low = serializers.FloatField(allow_null=True)
    high = serializers.FloatField(allow_null=True)
    undefined = serializers.CharField(allow_null=True)


class ComparisonOut(serializers.Serializer):
    reference = serializers.DictField(help_text="The first section's reference (see comparisons)")
    raters = serializers.ListField(child=serializers.DictField(), help_text="The first section's raters")
    pairs = serializers.ListField(child=serializers.DictField(), help_text="The first section's judge pairs")
    comparisons = serializers.ListField(
        child=serializers.DictField(),
        help_text="One per taxonomy version: each judge's own version first, then the working version. "
        "Each names its version, how many labels came through a mapping, and why a judge or mode "
        "could not be compared there.",
    )


def _row(row: dict) -> dict:
    return {k: (v.as_dict() if hasattr(v, "as_dict") else v) for k, v in row.items()}


def _section_json(sec: dict, result: dict) -> dict:
    codes = [m.code for m in sec["modes"]]
    return {
        "reference": {
            "round": result["round"].pk if result["round"] else None,
            "taxonomy_version": sec["version"].pk,
            "taxonomy_version_label": sec["version"].label,
            "is_working_version": sec["is_working"],
            "n_traces": sec["n_reference_traces"],
            "labels_via_mapping": sec["reference_via_mapping"],
            "units_unknown_after_mapping": sec["reference_unknown"],
            "mapping": sec["reference_mapping"],
            "why_no_reference": sec["why_no_reference"] or None,
            "n_blind_traces_left_out": sec["n_blind_traces"],
            "n_boot": result["n_boot"],
            "min_reliable_traces": result["min_reliable"],
        },
        "raters": [
            {
                "key": r["source"].key,
                "label": r["source"].label,
                "rater_id": r["source"].rater_id,
                "labelled_version": r["own_version"],
                "labels_native": r["native"],
                "labels_via_mapping": r["via_mapping"],
                "units_unknown_after_mapping": r["unknown"],
                "labels_without_mapping_path": r["no_path"],
                "why_no_labels": r["note"] or None,
                "n_excluded_traces": r["n_excluded"],
                "excluded_reason": r["excluded_reason"] or None,
                "cross_fitted": r["cross_fitted"] or None,
                "pooled": _row(r["stats"]["pooled"]),
                "modes": [{"code": c, **_row(m)} for c, m in zip(codes, r["stats"]["modes"], strict=True)],
                "prevalence": [
                    {
                        "code": p["code"],
                        "judge": p["judge"].as_dict(),
                        "humans": p["humans"].as_dict(),
                        "corrected": p["corrected"].as_dict(),
                        "rogan_gladen": p["rogan_gladen"],
                        "why": p["why"] or None,
                    }
                    for p in r["prevalence"]
                ],
            }
            for r in sec["raters"]
        ],
        "not_compared": [
            {"key": lo["source"].key, "label": lo["source"].label, "why": lo["why"]} for lo in sec["left_out"]
        ],
        "pairs": [
            {
                "a": p["a"].key,
                "b": p["b"].key,
                "n_traces": p["n_traces"],
                "kappa": p["kappa"].as_dict(),
                "reliable": p["reliable"],
            }
            for p in sec["pairs"]
        ],
    }


def comparison_json(result: dict) -> dict:
    sections = [_section_json(sec, result) for sec in result["sections"]]
    first = sections[0]
    return {
        "reference": first["reference"],
        "raters": first["raters"],
        "pairs": first["pairs"],
        "comparisons": sections,
    }


class JudgeComparisonApi(ProjectScopedMixin, APIView):
    """Judge runs and imported raters against agreed human labels (Table 2 of the MAST paper).

    ``?s=run:<id>&s=rater:<id>`` picks them; ``?round=<id>`` a closed round's consensus (default:
    the project's agreed labels). Every statistic has a 95% bootstrap interval over traces and
    ``reliable`` is false where it rests on fewer than 20 traces."""

    capability = "manage"

    @extend_schema(
        parameters=[
            OpenApiParameter("s", OpenApiTypes.STR, many=True, description="run:<id> or rater:<id>, repeated"),
            OpenApiParameter("round", OpenApiTypes.INT, description="a closed round (default: the whole project)"),
            OpenApiParameter(
                "version",
                OpenApiTypes.INT,
                description="one taxonomy version (default: each judge's own version, then the working one)",
            ),
        ],
        responses={200: ComparisonOut},
    )
    def get(self, request, slug):
        chosen, rnd, version, problems = comparison_request(request, self.project)
        if not chosen and not problems:
            problems.append("pick at least one judge: ?s=run:<id> or ?s=rater:<id>")
        if problems:
            raise ValidationError({"s": problems})
        result = judge_comparison(
            project=self.project, user=request.user, sources=chosen, round=rnd, taxonomy_version=version
        )
        return Response(comparison_json(result))


class ImportedRaterOut(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    n_traces = serializers.IntegerField()
    description = serializers.CharField()


class ImportedRaterIn(serializers.Serializer):
    name = serializers.CharField(max_length=200)
    file = serializers.FileField(required=False, help_text="A JSONL or CSV file (multipart)")
    content = serializers.CharField(required=False, help_text="Or the file's text (JSON body)")
    filename = serializers.CharField(required=False, default="upload.jsonl", help_text="Tells the format with content")
    format = serializers.ChoiceField(choices=["auto", "jsonl", "csv"], default="auto")


class ImportedRaterFileIn(serializers.Serializer):
    """The multipart form of the upload (schema only; ImportedRaterIn validates both forms)."""

    name = serializers.CharField(max_length=200)
    file = serializers.FileField(help_text="A JSONL or CSV file")
    format = serializers.ChoiceField(choices=["auto", "jsonl", "csv"], default="auto")


class ImportedRaterListApi(ProjectScopedMixin, APIView):
    """Imported raters of the project; POST imports one from a file (all or nothing, the bad line named)."""

    capability = "manage"
    parser_classes = [MultiPartParser, JSONParser]

    @extend_schema(responses={200: ImportedRaterOut(many=True)})
    def get(self, request, slug):
        return Response(ImportedRaterOut(imported_raters(project=self.project), many=True).data)

    @extend_schema(
        # One body type per operation: openapi-python-client 0.29 generates a module that cannot be
        # imported for an operation with two. The JSON form stays accepted and is described here.
        request={"multipart/form-data": ImportedRaterFileIn},
        responses={201: ImportedRaterOut},
        description=(
            "Upload a rater's labels (multipart, `file`). Scripts may instead send JSON "
            '`{"name", "content": "<the file\'s text>", "filename", "format"}`.'
        ),
    )
    def post(self, request, slug):
        data = ImportedRaterIn(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        if v.get("file") is not None:
            upload = v["file"]
            if upload.size > MAX_UPLOAD:
                raise ValidationError({"file": f"over {MAX_UPLOAD // 2**20} MiB"})
            try:
                text, filename = upload.read().decode("utf-8-sig"), upload.name
            except UnicodeDecodeError:
                raise ValidationError({"file": "not UTF-8 text; nothing was imported"}) from None
        elif v.get("content"):
            text, filename = v["content"], v["filename"]
        else:
            raise ValidationError({"file": "give a file (multipart) or its text in content"})
        result = rater_import(
            project=self.project, by=request.user, name=v["name"], text=text, filename=filename, fmt=v["format"]
        )
        out = {
            "id": result.rater.pk,
            "name": result.rater.name,
            "n_traces": result.n_traces,
            "description": result.rater.description,
        }
        return Response(ImportedRaterOut(out).data, status=status.HTTP_201_CREATED)
