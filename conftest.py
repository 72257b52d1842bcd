"""Fixtures shared by every test: users per role, a project, a real browser, a real worker.

Tests run against real PostgreSQL and Redis (see pyproject's [tool.pytest.ini_options] env,
overridden by `make test`), real Chromium through Playwright, and a real Celery worker process.
"""

from __future__ import annotations

import os
import shutil
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest_paths import subprocess_database_url
from tests.processes import WorkerProcess

REPO = Path(__file__).resolve().parent
SHARED = REPO.parent / "shared"
ARTIFACTS = REPO / "test-artifacts"
# Production hashes passwords with PBKDF2 at a million iterations: about half a second per user
# on a small machine, paid for every user a fixture makes and every browser login. Tests use MD5,
# which checks the same code paths (hashing, login, password change) at no cost.
FAST_PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def _xdist_separate(url: str, worker: str) -> str:
    """The broker URL of one xdist worker: its own Redis database (gw0 keeps the given one)."""
    base, _, db = url.rpartition("/")
    n = int(worker.removeprefix("gw") or 0)
    return f"{base}/{(int(db) - n) % 16}" if url.startswith("redis") and db.isdigit() else url


# The files that take minutes each (``--durations`` on two cores), handed out first. Under
# ``-n 2 --dist loadfile`` (scripts/test.sh) xdist gives each worker a whole file at a time, by
# default those with the most tests first: these hold few tests (one fuzz test per role, one axe
# walk per role), so they came last and ran alone while the other worker had finished (~3 min).
SLOW_FIRST = (
    "tests/browser/test_axe_pages.py",
    "tests/test_api_fuzz_manager.py",
    "tests/test_api_fuzz_annotator.py",
    "tests/test_blind_scan.py",
    "tests/test_crash_recovery.py",
    "tests/test_job_recovery.py",
    "tests/browser/test_csp_pages.py",
    "tests/test_cluster.py",
)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """Under xdist (scripts/test.sh passes ``--no-loadscope-reorder``): ``SLOW_FIRST``, then the
    other files, most tests first (the longest work first balances two workers best). Each file's
    tests keep their order. A run in one process keeps pytest-django's order."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    rank = {name: i for i, name in enumerate(SLOW_FIRST)}
    files = [item.nodeid.split("::")[0] for item in items]
    counts = Counter(files)
    order = {id(item): (rank.get(f, len(rank)), -counts[f], f) for item, f in zip(items, files, strict=True)}
    items.sort(key=lambda item: order[id(item)])


@pytest.fixture(autouse=True, scope="session")
def _xdist_worker_isolation():
    """Under ``pytest -n N`` (scripts/test.sh), each worker already has its own test database
    (pytest-django); it also gets its own Redis database and media directory, so one worker's
    Celery purge or release files never touch another's. Subprocesses (the Celery worker) inherit
    them through the environment."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker:
        yield
        return
    from django.conf import settings
    from django.test import override_settings

    from mast_site.celery import app

    broker = _xdist_separate(settings.CELERY_BROKER_URL, worker)
    media = str(Path(settings.MEDIA_ROOT) / worker)
    os.environ["CELERY_BROKER_URL"], os.environ["MEDIA_ROOT"] = broker, media
    app.conf.broker_url = broker
    with override_settings(CELERY_BROKER_URL=broker, MEDIA_ROOT=media):
        yield


@pytest.fixture(autouse=True, scope="session")
def _fast_password_hashing():
    from django.test import override_settings

    with override_settings(PASSWORD_HASHERS=FAST_PASSWORD_HASHERS):
        yield


CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]


@pytest.fixture
def mast_version(db):
    from taxonomy.services import taxonomy_seed_mast

    return taxonomy_seed_mast()


@pytest.fixture
def project(db, mast_version):
    from tests.factories import ProjectFactory

    return ProjectFactory(slug="demo", name="Demo project", taxonomy_version=mast_version)


def _member(project, username, role):
    from tests.factories import MembershipFactory, UserFactory

    user = UserFactory(username=username)
    MembershipFactory(project=project, user=user, role=role)
    return user


@pytest.fixture
def manager(project):
    return _member(project, "manager", "manager")


@pytest.fixture
def annotator(project):
    return _member(project, "ann1", "annotator")


@pytest.fixture
def annotator2(project):
    return _member(project, "ann2", "annotator")


@pytest.fixture
def viewer(project):
    return _member(project, "viewer", "viewer")


@pytest.fixture
def outsider(db):
    from tests.factories import UserFactory

    return UserFactory(username="outsider")


@pytest.fixture
def password():
    from tests.factories import PASSWORD

    return PASSWORD


@pytest.fixture
def shared_dir() -> Path:
    """../shared beside the repo (present in CI); tests that need it skip with a reason otherwise."""
    if not (SHARED / "mast").is_dir():
        pytest.skip(f"{SHARED / 'mast'} is not present (a fresh clone without ../shared)")
    return SHARED


# ---------------------------------------------------------------- browser


def chromium_path() -> str:
    for candidate in (os.environ.get("CHROMIUM"), "/usr/bin/chromium", "/usr/bin/chromium-browser"):
        if candidate and Path(candidate).exists():
            return candidate
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        # Browser tests must run, not skip: a missing browser is a failure with a clear message.
        pytest.fail("Chromium not found: install Debian's chromium (apt-get install -y chromium) or set CHROMIUM")
    return found


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_FLAGS, headless=True)
        yield b
        b.close()


@pytest.fixture
def page(browser, request):
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    pg = context.new_page()
    pg.set_default_timeout(15000)
    yield pg
    context.close()


@pytest.fixture
def screenshot():
    """screenshot(page, name): save a full-page PNG to test-artifacts/ (kept by CI, looked at by people)."""
    ARTIFACTS.mkdir(exist_ok=True)

    def take(pg, name: str, full_page: bool = True) -> Path:
        path = ARTIFACTS / f"{name}.png"
        pg.screenshot(path=str(path), full_page=full_page)
        return path

    return take


@pytest.fixture
def login(live_server, password):
    """login(page, user): sign in through the real login form."""

    def do(pg, user):
        pg.goto(f"{live_server.url}/login/")
        pg.fill("input[name=username]", user.username)
        pg.fill("input[name=password]", password)
        pg.click("button[type=submit]")
        pg.wait_for_url(lambda url: "/login/" not in url)
        return pg

    return do


# ---------------------------------------------------------------- celery worker


@pytest.fixture
def celery_worker_process(transactional_db, settings):
    """A real `celery worker` process on the test database and the Redis broker.

    Yields a handle with .kill() / .start() for crash tests. Tests using it must use
    transactional_db (the worker is another process and only sees committed rows).
    """
    env = dict(os.environ)
    env["DATABASE_URL"] = subprocess_database_url()
    env["CELERY_BROKER_URL"] = settings.CELERY_BROKER_URL
    handle = WorkerProcess(env)
    handle.purge()
    handle.start()
    yield handle
    handle.stop()


# ---------------------------------------------------------------- object storage


@pytest.fixture(scope="session")
def s3_server():
    """A real S3-protocol server process (moto_server) for this pytest worker's tests."""
    from tests.s3_server import S3Server

    server = S3Server().start()
    yield server
    server.stop()


@pytest.fixture
def s3_storage(s3_server, settings, request):
    """The product's storage moved to a fresh bucket on the S3 server, for this test (and for the
    processes it starts: STORAGE_URL). Returns (server, bucket, storage_url)."""
    from mast_site.storage_url import storage_from_url

    name = "t-" + "".join(c if c.isalnum() else "-" for c in request.node.name.lower())[:40].strip("-")
    bucket = s3_server.bucket(f"{name}-{time.time_ns() % 10**9}")
    url = s3_server.storage_url(bucket)
    settings.STORAGES = {**settings.STORAGES, "default": storage_from_url(url, {})}
    return s3_server, bucket, url


@pytest.fixture
def api_client():
    from rest_framework.test import APIClient

    return APIClient()
