"""python manage.py import_traces PATH [PATH ...] --project SLUG [--format auto|...] [--name NAME]"""

from __future__ import annotations

import time

from django.core.management.base import BaseCommand, CommandError

from traces.importing.report import FileLine
from traces.importing.results import ImportProgress, TraceImportError
from traces.importing.service import IMPORT_FORMATS, traces_import
from traces.projects.services import project_get_or_create


class Command(BaseCommand):
    help = (
        "Import trace files, folders (recursively) or .zip files into a project, all or nothing; "
        "prints one line per file (what it became, or why it was refused). "
        "The project is created (with the MAST v1 taxonomy) when it does not exist."
    )

    def add_arguments(self, parser):
        parser.add_argument("paths", nargs="+", metavar="PATH")
        parser.add_argument("--project", required=True, metavar="SLUG")
        parser.add_argument("--format", default="auto", choices=IMPORT_FORMATS)
        parser.add_argument("--name", default="", help="name of the project when it is created")
        parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
        parser.add_argument(
            "--import-the-rest",
            action="store_true",
            help="skip JSONL lines that are not JSON (a log cut off mid-write), listing each, instead of refusing",
        )

    def handle(self, *paths, **opts):
        project, created = project_get_or_create(slug=opts["project"], name=opts["name"] or opts["project"])
        if created:
            self.stdout.write(f"Created project {project.slug}")
        bar = None if opts["no_progress"] else _Bar(self.stderr)
        started = time.monotonic()
        try:
            result = traces_import(
                project=project,
                paths_or_files=opts["paths"],
                format=opts["format"],
                progress=bar,
                import_rest=opts["import_the_rest"],
            )
        except TraceImportError as e:
            if bar:
                bar.end()
            self._report(e.files)
            self.stdout.write(
                f"imported 0, merged 0, duplicates skipped 0, failed {max(e.result.failed, 1)} (nothing was stored)"
            )
            raise CommandError(str(e)) from None
        if bar:
            bar.end()
        self._report(result.files)
        self.stdout.write(
            f"imported {result.imported}, merged {result.merged}, duplicates skipped {result.duplicates}, "
            f"failed {result.failed} into {project.slug} in {time.monotonic() - started:.1f} s"
        )

    def _report(self, files: list[dict]) -> None:
        """One line per file, the same lines the job page and the API show."""
        for line in files:
            self.stdout.write("  " + FileLine(**line).summary())
            for broken in line.get("broken_lines") or ():
                self.stdout.write(f"    skipped line {broken['line']}: {broken['reason']}")


class _Bar:
    """A one-line text progress bar, redrawn in place with a carriage return."""

    WIDTH = 30

    def __init__(self, stream) -> None:  # a management command's OutputWrapper
        self.stream = stream
        self.drawn = False

    def __call__(self, p: ImportProgress) -> None:
        frac = p.bytes_done / p.bytes_total if p.bytes_total else 0
        filled = int(self.WIDTH * frac)
        mb = p.bytes_done / 1024**2
        self.stream.write(
            f"\r[{'#' * filled}{'.' * (self.WIDTH - filled)}] {100 * frac:5.1f}% {mb:7.1f} MB "
            f"{p.imported} imported, {p.duplicates} duplicates",
            ending="",
        )
        self.stream.flush()
        self.drawn = True

    def end(self) -> None:
        if self.drawn:
            self.stream.write("")  # OutputWrapper ends the line
            self.stream.flush()
