from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def subprocess_database_url() -> str:
    """The URL of the test database, for subprocesses (a Celery worker, a management command). A
    Unix socket's directory (the embedded server's) goes in as a percent-encoded host."""
    from urllib.parse import quote

    from django.db import connection

    db = connection.settings_dict
    host = quote(db["HOST"] or "127.0.0.1", safe="")
    return f"postgres://{db['USER']}@{host}:{db['PORT'] or 5432}/{db['NAME']}"
