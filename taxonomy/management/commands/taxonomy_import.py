"""`manage.py taxonomy_import`: import a taxonomy file as a new version."""

import json
from pathlib import Path

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from taxonomy.mast_files import TaxonomyFileError, build_taxonomy
from taxonomy.services import version_import


class Command(BaseCommand):
    help = (
        "Import a taxonomy version: a JSON file as exported by taxonomy_export, or MAST's "
        "definitions.txt (with --examples examples.txt and --name)."
    )

    def add_arguments(self, parser):
        parser.add_argument("path")
        parser.add_argument("--examples", help="MAST examples.txt to attach to the modes")
        parser.add_argument("--name", help="Taxonomy name (required for definitions.txt)")
        parser.add_argument("--draft", action="store_true", help="Leave the version as an editable draft")

    def handle(self, path, examples=None, name=None, draft=False, **options):
        source = Path(path)
        try:
            text = source.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"{source}: cannot read as UTF-8 text ({exc}).") from exc
        try:
            if text.lstrip().startswith("{"):
                try:
                    data = json.loads(text)
                except json.JSONDecodeError as exc:
                    raise CommandError(f"{source}, line {exc.lineno}: invalid JSON ({exc.msg}).") from exc
                if name:
                    data["name"] = name
            else:
                if not name:
                    raise CommandError("--name is required when importing a definitions.txt file.")
                examples_text = None
                if examples:
                    try:
                        examples_text = Path(examples).read_text(encoding="utf-8")
                    except (OSError, UnicodeDecodeError) as exc:
                        raise CommandError(f"{examples}: cannot read as UTF-8 text ({exc}).") from exc
                data = build_taxonomy(text, examples_text, name=name)
            version = version_import(data=data, publish=not draft)
        except (TaxonomyFileError, ValidationError) as exc:
            msg = "; ".join(exc.messages) if isinstance(exc, ValidationError) else str(exc)
            raise CommandError(f"Nothing imported: {msg}") from exc
        self.stdout.write(
            self.style.SUCCESS(
                f"Imported {version.label} ({version.status}) with {version.modes.count()} modes "
                f"in {version.categories.count()} categories."
            )
        )
