"""Export a project's agreed labels as a dataset file, without creating a release.

    python manage.py export_dataset --project SLUG --format jsonl|csv|parquet --out PATH

--out is the data file itself (e.g. labels.jsonl), unless PATH ends in ".zip": then it is a zip
holding the data file, the dataset card README.md and manifest.json. The same options as a
release choose what goes in (--majority, --no-raters, --no-judge, --no-evidence, --no-text,
--round ID, --taxonomy-version ID). Published releases are downloaded from the Releases page or
the API instead.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from annotations.models import Release, Round
from annotations.releases import writers as exporting
from annotations.releases.selectors import ReleaseSpec
from annotations.releases.services import export_write
from taxonomy.models import TaxonomyVersion
from traces.models import Project


class Command(BaseCommand):
    help = (
        "Export a project's agreed labels as JSONL (MAST-Data shape), CSV or Parquet; "
        "an --out ending in .zip adds the dataset card and manifest."
    )

    def add_arguments(self, parser):
        parser.add_argument("--project", required=True, help="Project slug.")
        parser.add_argument("--format", required=True, choices=exporting.FORMATS)
        parser.add_argument(
            "--out",
            required=True,
            help="Output file; a path ending in .zip writes a zip with "
            "the data file, README.md (dataset card) and manifest.json.",
        )
        parser.add_argument("--round", type=int, help="Only the traces of this closed round (id).")
        parser.add_argument(
            "--taxonomy-version",
            type=int,
            help="Target taxonomy version id (default: the project's working version); labels of other "
            "versions are mapped onto it.",
        )
        parser.add_argument("--majority", action="store_true", help="Majority vote where there is no adjudication.")
        parser.add_argument("--no-raters", action="store_true", help="Leave out each rater's own labels.")
        parser.add_argument("--no-judge", action="store_true", help="Leave out the LLM judges' and baseline's labels.")
        parser.add_argument("--no-evidence", action="store_true", help="Leave out evidence and rationales.")
        parser.add_argument("--no-text", action="store_true", help="References only, no trace text.")

    def handle(self, *args, **opts):
        project = Project.objects.select_related("taxonomy_version__taxonomy").filter(slug=opts["project"]).first()
        if project is None:
            raise CommandError(f"No project with slug {opts['project']!r}.")
        version = project.taxonomy_version
        if opts["taxonomy_version"]:
            version = TaxonomyVersion.objects.filter(pk=opts["taxonomy_version"]).first()
            if version is None:
                raise CommandError(f"No taxonomy version with id {opts['taxonomy_version']}.")
        if version is None:
            raise CommandError("The project has no taxonomy version; pass --taxonomy-version.")
        round_obj = None
        if opts["round"]:
            round_obj = Round.objects.filter(project=project, pk=opts["round"], state=Round.State.CLOSED).first()
            if round_obj is None:
                raise CommandError(f"No closed round {opts['round']} in project {project.slug}.")
        options = {
            "majority": opts["majority"],
            "raters": not opts["no_raters"],
            "judge": not opts["no_judge"],
            "evidence": not opts["no_evidence"],
            "trace_text": not opts["no_text"],
            "formats": [opts["format"]],
        }
        spec = ReleaseSpec(
            project=project,
            version=version,
            selection=Release.Selection.ROUND if round_obj else Release.Selection.AGREED,
            round=round_obj,
            majority=options["majority"],
            raters=options["raters"],
            judge=options["judge"],
            evidence=options["evidence"],
            trace_text=options["trace_text"],
            name=f"{project.slug} export",
        )
        out = Path(opts["out"])
        out.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
            files, manifest, stats, _ = export_write(
                spec=spec, directory=Path(tmp), formats=[opts["format"]], options=options
            )
            if out.suffix == ".zip":
                written = exporting.write_zip(Path(tmp) / "export.zip", files, folder=out.stem)
                shutil.move(str(written.path), out)
            else:
                shutil.move(str(files[0].path), out)
        self.stdout.write(
            f"Wrote {out}: {stats.traces} traces ({stats.consensus_traces} consensus, {stats.majority_traces} majority "
            f"vote) under {version.label}, {manifest['mapping']['mapped_labels']} labels mapped from other taxonomy "
            "versions."
        )
        for row in manifest["mapping"]["by_version"]:
            self.stdout.write("  " + mapping_line(row))


def mapping_line(row: dict) -> str:
    """One source version's counts, as the command and the pages say them."""
    if row["is_target"]:
        return f"{row['version']}: {row['labels']} labels as they are"
    parts = [f"{row['mapped']} mapped"]
    if row["unknown"]:
        parts.append(f"{row['unknown']} unknown in the target (split or ambiguous)")
    if row["dropped"]:
        parts.append(f"{row['dropped']} dropped (no target mode)")
    if row["no_path"]:
        parts.append(f"{row['no_path']} not mapped: no mapping connects the versions")
    return f"{row['version']}: {row['labels']} labels, " + ", ".join(parts)
