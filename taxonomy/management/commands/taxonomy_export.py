"""`manage.py taxonomy_export`: print a taxonomy version as JSON."""

import json

from django.core.management.base import BaseCommand, CommandError

from taxonomy.models import TaxonomyVersion
from taxonomy.services import version_export


class Command(BaseCommand):
    help = "Print a taxonomy version as JSON (the format taxonomy_import reads)."

    def add_arguments(self, parser):
        parser.add_argument("name", help='Taxonomy name, e.g. "MAST"')
        parser.add_argument("version", type=int)
        parser.add_argument("--out", help="Write to this file instead of standard output")

    def handle(self, name, version, out=None, **options):
        obj = TaxonomyVersion.objects.filter(taxonomy__name=name, number=version).first()
        if obj is None:
            raise CommandError(f"No taxonomy {name!r} version {version}.")
        text = json.dumps(version_export(version=obj), indent=2, ensure_ascii=False)
        if out:
            with open(out, "w", encoding="utf-8") as fh:
                fh.write(text + "\n")
            self.stderr.write(f"Wrote {out}")
        else:
            self.stdout.write(text)
