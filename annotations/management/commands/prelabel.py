"""python manage.py prelabel --project SLUG --provider openai|baseline [...] [--wait | --inline]

Queues a judge run (the Celery worker does the work). --wait shows a progress bar until the run
ends; --inline does the work in this process instead (no worker needed: the run is created
unstarted and driven by annotations/judge/inline.py, which tells every service to send nothing
to Celery). The exit code is non-zero when the run failed (or was paused by its budget or a
cancel while waiting).
"""

import sys
import time

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from annotations.judge.inline import judge_run_drive_inline
from annotations.judge.providers import PROVIDERS, provider_get
from annotations.judge.runs import judge_run_create
from annotations.judge.selectors import judge_run_progress
from annotations.models import JudgeRun
from traces.models import Project


def _bar(run: JudgeRun, width: int = 30) -> str:
    p = judge_run_progress(run=run)
    filled = int(width * p.percent / 100)
    rate = f"{p.rate_per_min / 60:.1f}/s" if p.rate_per_min is not None else "-"
    eta = f"{p.eta_seconds}s" if p.eta_seconds is not None else "-"
    return (
        f"[{'#' * filled}{'.' * (width - filled)}] {p.percent:3d}%  {p.done}/{p.total} done, {p.failed} failed, "
        f"{p.remaining} left  {rate}  ETA {eta}  {p.tokens_in + p.tokens_out} tokens  {p.state}"
    )


class Command(BaseCommand):
    help = "Run the LLM judge (or the baseline classifier) over a project's traces."

    def add_arguments(self, parser):
        parser.add_argument("--project", required=True, help="project slug")
        parser.add_argument("--provider", choices=list(PROVIDERS), default="openai")
        parser.add_argument("--base-url", default="", help="OpenAI-compatible server, e.g. https://api.openai.com/v1")
        parser.add_argument("--model", default="")
        parser.add_argument("--api-key-env", default="", help="NAME of the environment variable holding the key")
        parser.add_argument("--connection", default="", help="name of one of the project's judge connections")
        parser.add_argument("--concurrency", type=int, default=4)
        parser.add_argument("--traces", default="all", help="all | unlabelled | round:<id>")
        parser.add_argument("--temperature", type=float, default=0.0)
        parser.add_argument("--max-tokens", type=int, default=2000)
        parser.add_argument("--timeout", type=float, default=120.0)
        parser.add_argument("--budget-tokens", type=int, default=None)
        parser.add_argument("--few-shot", action="store_true", help="add examples from adjudicated labels")
        parser.add_argument(
            "--no-cache",
            action="store_true",
            help="ask the model again for every trace (a re-run that measures the judge's self-agreement)",
        )
        parser.add_argument("--baseline-source", default="auto", help="baseline: auto | agreed | rater:<id>")
        parser.add_argument("--wait", action="store_true", help="show progress until the run ends")
        parser.add_argument("--inline", action="store_true", help="do the work in this process (no worker)")

    def handle(self, *args, **opts):
        project = Project.objects.filter(slug=opts["project"]).first()
        if project is None:
            raise CommandError(f"No project with slug {opts['project']!r}.")
        conn = None
        if opts["connection"]:
            conn = project.judge_connections.filter(name=opts["connection"]).first()
            if conn is None:
                raise CommandError(f"No connection named {opts['connection']!r} in {project.slug}.")
        try:
            run = judge_run_create(
                project=project,
                by=None,
                provider=opts["provider"],
                connection=conn,
                base_url=opts["base_url"],
                model=opts["model"],
                api_key_env=opts["api_key_env"],
                concurrency=opts["concurrency"],
                traces=opts["traces"],
                temperature=opts["temperature"],
                max_tokens=opts["max_tokens"],
                timeout=opts["timeout"],
                budget_tokens=opts["budget_tokens"],
                few_shot=opts["few_shot"],
                use_cache=not opts["no_cache"],
                baseline_source=opts["baseline_source"],
                start=not opts["inline"],
            )
        except ValidationError as exc:
            detail = exc.message_dict if hasattr(exc, "error_dict") else exc.messages
            raise CommandError(f"Invalid run: {detail}")
        self.stdout.write(f"Judge run {run.pk} queued over {run.n_total} traces ({run.get_provider_display()}).")
        tty = sys.stdout.isatty()

        def show(r: JudgeRun) -> None:
            line = _bar(r)
            self.stdout.write(("\r" + line) if tty else line, ending="" if tty else "\n")
            self.stdout.flush()

        if opts["inline"]:
            last = [0.0]

            def tick(r: JudgeRun) -> None:
                if time.monotonic() - last[0] >= 1.0:
                    last[0] = time.monotonic()
                    show(r)

            # A whole-run provider (the baseline) is done when its start returns: one bar at the end.
            per_trace = provider_get(run.provider).per_trace
            run = judge_run_drive_inline(run_id=run.pk, on_tick=tick if per_trace else None)
            show(run)
        elif opts["wait"]:
            while True:
                run.refresh_from_db()
                show(run)
                if not run.is_active:
                    break
                time.sleep(1.0)
        else:
            return
        if tty:
            self.stdout.write("")
        if run.state == JudgeRun.State.DONE:
            self.stdout.write(self.style.SUCCESS(f"Run {run.pk} done: {run.n_done} labelled, {run.n_failed} failed."))
            return
        raise CommandError(f"Run {run.pk} ended {run.state}: {run.error or 'no message'}")
