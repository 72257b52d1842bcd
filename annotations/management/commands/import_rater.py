"""python manage.py import_rater PATH --project SLUG --name NAME [--format auto|jsonl|csv] [--taxonomy-version ID]

Imports a rater's labels (an agentdash run, another lab's LLM labels) as a named imported rater;
the file format is in annotations/judge/imported.py. All or nothing: a bad row refuses the file
with its line named, and nothing is stored.
"""

from pathlib import Path

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from annotations.judge.imported import rater_import
from taxonomy.models import TaxonomyVersion
from traces.models import Project


class Command(BaseCommand):
    help = "Import a rater's labels from a JSONL or CSV file."

    def add_arguments(self, parser):
        parser.add_argument("path")
        parser.add_argument("--project", required=True)
        parser.add_argument("--name", required=True, help="the rater's name, e.g. 'o1 (agentdash, lab B)'")
        parser.add_argument("--format", default="auto", choices=["auto", "jsonl", "csv"])
        parser.add_argument("--taxonomy-version", type=int, default=None, help="id of a published version")

    def handle(self, *args, **opts):
        project = Project.objects.filter(slug=opts["project"]).first()
        if project is None:
            raise CommandError(f"No project with slug {opts['project']!r}.")
        version = None
        if opts["taxonomy_version"]:
            version = TaxonomyVersion.objects.filter(pk=opts["taxonomy_version"], status="published").first()
            if version is None:
                raise CommandError(f"No published taxonomy version {opts['taxonomy_version']}.")
        path = Path(opts["path"])
        try:
            text = path.read_text(encoding="utf-8-sig")
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"{path}: {exc}") from exc
        try:
            result = rater_import(
                project=project,
                by=None,
                name=opts["name"],
                text=text,
                filename=path.name,
                fmt=opts["format"],
                taxonomy_version=version,
            )
        except ValidationError as exc:
            detail = exc.message_dict if hasattr(exc, "error_dict") else {"": exc.messages}
            raise CommandError("\n".join(m for msgs in detail.values() for m in msgs)) from exc
        self.stdout.write(
            f"Imported {result.n_labels} labels on {result.n_traces} traces as rater “{result.rater.name}”."
        )
