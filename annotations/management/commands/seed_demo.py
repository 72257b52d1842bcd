"""`manage.py seed_demo`: create (or complete) the demo project, users and data."""

from django.core.management.base import BaseCommand

from annotations.demo import credentials, seed_demo


class Command(BaseCommand):
    help = "Create (or complete) the demo project, users and data. Safe to run again."

    def add_arguments(self, parser):
        parser.add_argument(
            "--url", default="http://127.0.0.1:8000", help="where the site is served (scripts/demo.sh passes its PORT)"
        )
        parser.add_argument(
            "--llm-url",
            default="",
            help="the base URL of the running demo stand-in LLM (manage.py serve_demo_llm; scripts/demo.sh passes "
            "http://127.0.0.1:$DEMO_LLM_PORT/v1); the demo connection points there. Empty: a stand-in runs only "
            "while seeding",
        )

    def handle(self, *args, **options):
        ctx = seed_demo(llm_url=options["llm_url"].strip())
        for line in ctx.log:
            self.stdout.write(f"  {line}")
        self.stdout.write(self.style.SUCCESS(f"Demo project ready: {options['url'].rstrip('/')}/p/{ctx.project.slug}/"))
        self.stdout.write("Log in with one of:")
        for username, password, role in credentials():
            self.stdout.write(f"  {username:8} / {password}   ({role})")
