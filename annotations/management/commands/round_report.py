"""Print the agreement reports of a project's calibration rounds.

    python manage.py round_report --project SLUG [--round ID] [--raters humans+3] --json

Each report is the stored one (recomputed first if the labels changed), with the round's id,
name and state: the same JSON as GET /api/rounds/{id}/agreement/. Without --json a short table.
"""

from __future__ import annotations

import json

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from annotations.models import Round
from annotations.rounds.selectors import rater_set_parse
from annotations.rounds.services import agreement_report_get, agreement_report_json
from traces.models import Project


class Command(BaseCommand):
    help = "Print the agreement reports of all rounds of a project (or one) as JSON."

    def add_arguments(self, parser):
        parser.add_argument("--project", required=True, help="Project slug.")
        parser.add_argument("--round", type=int, help="Only this round id.")
        parser.add_argument("--raters", default="humans", help='"humans" (default) or "humans+<rater ids>".')
        parser.add_argument("--json", action="store_true", help="Print JSON (a list of reports).")

    def handle(self, *args, **opts):
        project = Project.objects.filter(slug=opts["project"]).first()
        if project is None:
            raise CommandError(f"No project with slug {opts['project']!r}.")
        rounds = Round.objects.filter(project=project).select_related("taxonomy_version__taxonomy", "project")
        if opts["round"] is not None:
            rounds = rounds.filter(pk=opts["round"])
            if not rounds.exists():
                raise CommandError(f"No round {opts['round']} in project {project.slug}.")
        try:
            extra = rater_set_parse(opts["raters"])
            reports = [
                agreement_report_json(report=agreement_report_get(round=r, extra_rater_ids=extra))
                for r in rounds.order_by("created_at", "id")
            ]
        except ValidationError as exc:
            raise CommandError(" ".join(exc.messages))
        if opts["json"]:
            self.stdout.write(json.dumps(reports, indent=2))
            return
        for rep in reports:
            k = rep["mean_pairwise_kappa"]
            value = "undefined" if k["value"] is None else f"{k['value']:.3f}"
            ci = f" [{k['ci'][0]:.3f}, {k['ci'][1]:.3f}]" if k.get("ci") else ""
            self.stdout.write(
                f"{rep['round']['id']:>5}  {rep['round']['name']:<30} {rep['round']['state']:<7} "
                f"mean kappa {value}{ci}  ({rep['n_traces']} traces, {len(rep['raters'])} raters)"
            )
