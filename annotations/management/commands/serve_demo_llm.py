"""`manage.py serve_demo_llm`: the demo's stand-in OpenAI-protocol server."""

import signal
import sys

from django.core.management.base import BaseCommand, CommandError

from annotations.judge import demo_llm


class Command(BaseCommand):
    help = (
        "Serve the demo's scripted stand-in LLM (not a model) on 127.0.0.1:PORT until stopped; "
        "scripts/demo.sh runs it beside the site."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--port", type=int, required=True, help="the loopback port (scripts/demo.sh: DEMO_LLM_PORT)"
        )

    def handle(self, *args, **options):
        port = options["port"]
        if not 1 <= port <= 65535:
            raise CommandError(f"--port {port}: a port number between 1 and 65535")
        # A TERM (the demo's trap) ends it like Ctrl-C: close the socket and exit 0.
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        try:
            httpd = demo_llm.make_server(port)
        except OSError as exc:
            raise CommandError(
                f"cannot listen on 127.0.0.1:{port} ({exc.strerror}); another program uses it: "
                "set DEMO_LLM_PORT to a free port"
            ) from exc
        self.stdout.write(f"Demo stand-in LLM (scripted, not a real model) ready on {demo_llm.base_url(httpd)}")
        self.stdout.flush()
        try:
            httpd.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            httpd.server_close()
