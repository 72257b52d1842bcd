"""Settings for the MAST annotation site, read from the environment (django-environ).

The database is always PostgreSQL (DATABASE_URL). `make demo` starts an embedded PostgreSQL server
from a pip-installed wheel in var/pg (mast_site/embedded_pg.py) and writes its URL to var/demo.env,
which is read here when DATABASE_URL is not set; with neither, the site refuses to start and says
so. With no CELERY_BROKER_URL, background jobs still run in a real worker process through kombu's
filesystem transport (var/broker/). Tests, CI and docker-compose use PostgreSQL and Redis.
"""

import os
from pathlib import Path
from urllib.parse import unquote

import environ
from csp.constants import NONE, SELF, UNSAFE_INLINE

from mast_site.storage_url import storage_from_url

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(environ.Env().str("MAST_VAR_DIR", default=str(BASE_DIR / "var")))

env = environ.Env(
    DEBUG=(bool, False),
    ALLOWED_HOSTS=(list, ["127.0.0.1", "localhost"]),
    SECURE_SSL_REDIRECT=(bool, True),
)
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)
# `make demo` writes var/demo.env (its SECRET_KEY and database), so later `manage.py` commands work
# without exporting anything. The environment and .env win over it.
if (VAR_DIR / "demo.env").is_file():
    environ.Env.read_env(VAR_DIR / "demo.env", overwrite=False)

DEBUG = env("DEBUG")
SECRET_KEY = env("SECRET_KEY", default="")
if not SECRET_KEY:
    if not DEBUG:
        raise environ.ImproperlyConfigured(
            "SECRET_KEY is not set. Put it in the environment or in .env (make demo writes var/demo.env)."
        )
    SECRET_KEY = "insecure-dev-only-key"  # noqa: S105 - only ever used with DEBUG on
ALLOWED_HOSTS = env("ALLOWED_HOSTS")
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "csp",
    "taxonomy",
    "traces",
    "annotations",
]

# A failed CSRF check gets the site's own 403 page, saying what happened and that nothing changed.
CSRF_FAILURE_VIEW = "traces.projects.errors.csrf_failure"

MIDDLEWARE = [
    "mast_site.health.HealthCheckMiddleware",
    # Before everything that may answer early (HTTPS redirect, static files, 400s): every response gets it.
    "csp.middleware.CSPMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "mast_site.nul.RefuseNulInQueryMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "mast_site.urls"
WSGI_APPLICATION = "mast_site.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

if not env.str("DATABASE_URL", default=""):
    raise environ.ImproperlyConfigured(
        "DATABASE_URL is not set: point it at a PostgreSQL database (postgres://user:pass@host:5432/mast), "
        f"or run `make demo`, which starts an embedded PostgreSQL in {VAR_DIR / 'pg'} and writes its URL to "
        f"{VAR_DIR / 'demo.env'}."
    )
DATABASES = {"default": env.db("DATABASE_URL")}
if DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql":
    raise environ.ImproperlyConfigured(
        f"DATABASE_URL must be a PostgreSQL URL (postgres://...), not {DATABASES['default']['ENGINE']}: "
        "the site runs on PostgreSQL only (triggers keep some of its tables). A var/demo.env from an older "
        "SQLite demo is rewritten by the next `make demo`."
    )
# A Unix socket's directory given as a percent-encoded host (the embedded server's URL, as libpq reads it).
DATABASES["default"]["HOST"] = unquote(DATABASES["default"]["HOST"])
DATABASES["default"]["CONN_MAX_AGE"] = env.int("CONN_MAX_AGE", default=60)
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
# No JIT: PostgreSQL compiles a query when its cost estimate is high, which list queries over
# 100,000 traces reach; compiling took longer than running them (bench/bench_large_project.py).
# Behind PgBouncer in transaction mode (DATABASE_POOL_MODE=transaction; README "Scaling out"): no
# server-side cursors (they outlive a transaction), no prepared statements (psycopg prepares a
# query after five runs, on a server connection the next transaction may not get), no startup
# options (PgBouncer refuses them: set jit=off on the database instead). Workers hold session
# advisory locks (traces/jobs.py): they connect directly or through a session-mode pool.
DATABASE_POOL_MODE = env.str("DATABASE_POOL_MODE", default="session")
if DATABASE_POOL_MODE not in ("session", "transaction"):
    raise environ.ImproperlyConfigured(f"DATABASE_POOL_MODE must be session or transaction, not {DATABASE_POOL_MODE!r}")
if DATABASE_POOL_MODE == "transaction":
    DATABASES["default"]["DISABLE_SERVER_SIDE_CURSORS"] = True
    DATABASES["default"].setdefault("OPTIONS", {})["prepare_threshold"] = None
elif env.bool("PG_JIT", default=False) is False:
    DATABASES["default"].setdefault("OPTIONS", {}).setdefault("options", "-c jit=off")

# Login and API limits count in the cache: with several web processes, point CACHE_URL at Redis
# (e.g. redis://127.0.0.1:6379/1) so they share one count; the default is per process.
CACHES = {"default": env.cache("CACHE_URL", default="locmemcache://")}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"
STORAGES = {
    # Uploads, import progress and releases (traces/storage.py): MEDIA_ROOT on one machine, an
    # S3-compatible store with STORAGE_URL=s3://bucket/prefix on several (mast_site/storage_url.py).
    "default": storage_from_url(env.str("STORAGE_URL", default=""), os.environ),
    "staticfiles": {
        "BACKEND": (
            "whitenoise.storage.CompressedManifestStaticFilesStorage"
            if not DEBUG and env.bool("MANIFEST_STATIC", default=True)
            else "django.contrib.staticfiles.storage.StaticFilesStorage"
        )
    },
}
MEDIA_ROOT = Path(env.str("MEDIA_ROOT", default=str(VAR_DIR / "media")))
# Where a release download goes with an object store: streamed through the web process (the
# default: works whatever the network), or a redirect to a signed URL valid five minutes, when
# the browsers can reach the store (MAST_STORAGE_REDIRECT=true).
MAST_STORAGE_REDIRECT = env.bool("MAST_STORAGE_REDIRECT", default=False)

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

# --- Security (python manage.py check --deploy is clean with DEBUG off) ---
SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False  # htmx reads the token from the <body> hx-headers, not the cookie
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
if not DEBUG:
    SECURE_SSL_REDIRECT = env("SECURE_SSL_REDIRECT")
    SESSION_COOKIE_SECURE = env.bool("SESSION_COOKIE_SECURE", default=True)
    CSRF_COOKIE_SECURE = env.bool("CSRF_COOKIE_SECURE", default=True)
    SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=31536000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=True)
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# --- Content-Security-Policy (django-csp) ---
# Scripts come from our own origin only: no inline <script>, no on*= attributes, no eval (htmx runs
# with allowEval off, see base.html), so markup smuggled into trace content could not run even if
# escaping ever failed. Pages hand data to their modules through data-* attributes and json_script.
# Styles keep 'unsafe-inline': templates set data-driven style= attributes (progress widths,
# heat-map and agent colours) that no nonce or hash can cover, and the Swagger/Redoc bundles inject
# <style> elements. Inline CSS runs no code, and with default-src and img-src limited to this origin
# it cannot send what it matches to another host. The API docs pages widen this for themselves
# only, in mast_site/urls.py.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF, UNSAFE_INLINE],
        "img-src": [SELF, "data:"],
        "object-src": [NONE],
        "base-uri": [SELF],
        "frame-ancestors": [NONE],
        "form-action": [SELF],
    },
}

# --- REST API ---
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        # Token first so unauthenticated API calls get 401 + WWW-Authenticate, not 403.
        "traces.projects.token_auth.PlainSqlTokenAuthentication",  # DRF's, in one plain-SQL statement
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PAGINATION_CLASS": "traces.pagination.StrictPageNumberPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    # JSON in; multipart only on the operations that upload files (they say so with parser_classes).
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "TEST_REQUEST_DEFAULT_FORMAT": "json",
    "DEFAULT_THROTTLE_CLASSES": ["traces.projects.login.TokenRateThrottle"],
    "EXCEPTION_HANDLER": "traces.api_errors.api_exception_handler",
    "NUM_PROXIES": env.int("MAST_NUM_PROXIES", default=0) or None,
}
# Abuse limits (traces/projects/login.py): API calls per token, failed sign-ins per user name and
# per client address in 15 minutes. Behind a TLS proxy set MAST_NUM_PROXIES=1 so the client's
# address, not the proxy's, is counted.
MAST_API_TOKEN_RATE = env.str("MAST_API_TOKEN_RATE", default="1200/minute")
MAST_LOGIN_FAILURES = (
    env.int("MAST_LOGIN_FAILURES_PER_USER", default=10),
    env.int("MAST_LOGIN_FAILURES_PER_ADDRESS", default=50),
)
MAST_NUM_PROXIES = env.int("MAST_NUM_PROXIES", default=0)
# The cyclic garbage collector's first threshold in the web processes (mast_site/wsgi.py) and
# during imports (traces.importing.service): rarer collections, shorter pauses; 700 is CPython's own.
MAST_GC_GEN0 = env.int("MAST_GC_GEN0", default=50_000)
SPECTACULAR_SETTINGS = {
    "TITLE": "MAST failure-annotation API",
    "DESCRIPTION": "Traces, labels, calibration rounds, LLM judges and dataset releases.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # Request and response components apart (a read-only field is not asked for; an upload is
    # `format: binary`), so generated clients (openapi-python-client, tested in make test) work.
    "COMPONENT_SPLIT_REQUEST": True,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "traces.api_errors.schema_add_error_responses",
    ],
    # several models have a "status"; name each choice set so the schema has no collisions
    # Several models have a "status"/"state" field with different choices: name each enum.
    "ENUM_NAME_OVERRIDES": {
        "ImportJobStatusEnum": "traces.models.ImportJob.Status",
        "TaxonomyVersionStatusEnum": "taxonomy.models.TaxonomyVersion.Status",
        "ReleaseStatusEnum": "annotations.models.releases.Release.Status",
        "RoundKindEnum": "annotations.models.rounds.Round.Kind",
        "RaterFileFormatEnum": ["auto", "jsonl", "csv"],
    },
}

# --- Background jobs ---
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default="")
if not CELERY_BROKER_URL:
    # No Redis: a real worker still runs, fed through files on disk (kombu filesystem transport).
    _broker_dir = VAR_DIR / "broker"
    for _sub in ("in", "processed", "control"):
        (_broker_dir / _sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_URL = "filesystem://"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_dir / "in"),
        "data_folder_out": str(_broker_dir / "in"),
        "processed_folder": str(_broker_dir / "processed"),
        "store_processed": False,
        "control_folder": str(_broker_dir / "control"),
    }
else:
    # How long a message taken by a worker that then died waits in Redis' unacked set before it is
    # delivered again (kombu's default is an hour). Recovery no longer waits for it: the liveness
    # lock and the sweeps (traces/jobs.py, judge leases) re-queue a dead worker's imports, releases
    # and judge items within seconds, and the lock makes a redelivered import or release exit at
    # once. So this only has to outlast the longest task no lock guards, a judge item (5 attempts
    # of up to 120 s plus backoff, about 12 minutes), which a second delivery would ask twice.
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "visibility_timeout": env.int("CELERY_VISIBILITY_TIMEOUT", default=15 * 60),
    }
CELERY_RESULT_BACKEND = None  # job state lives in our own tables, not in Celery results
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_ACKS_LATE = False  # opted into per task, only where the task is idempotent
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A worker that loses the broker (Redis restarted) lets its running tasks finish: every job writes
# its results to PostgreSQL, not to the broker, and the late ack that then fails only means a
# redelivery, which the job's lock or claim turns away. Sweeps are sent again on reconnect
# (mast_site/celery.py SweepOnConnect).
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = False
# Import and release jobs whose worker died (traces/jobs.py): attempts before a job is failed,
# how often the sweep runs while jobs run, when a queued job's message is sent again.
MAST_JOB_MAX_ATTEMPTS = env.int("MAST_JOB_MAX_ATTEMPTS", default=3)
MAST_JOB_SWEEP_SECONDS = env.float("MAST_JOB_SWEEP_SECONDS", default=10.0)
# Alerts (annotations/monitoring/alerts.py): how often a rule is evaluated, and a webhook's tries
MAST_ALERT_EVERY_SECONDS = env.float("MAST_ALERT_EVERY_SECONDS", default=300.0)
MAST_WEBHOOK_ATTEMPTS = env.int("MAST_WEBHOOK_ATTEMPTS", default=5)
MAST_WEBHOOK_BACKOFF_SECONDS = env.float("MAST_WEBHOOK_BACKOFF_SECONDS", default=30.0)
# The OTLP receiver (traces/live): a live trace is assembled this long after its last span (its
# root span ended); a request body's limit (compressed or not); requests per second per ingest key
MAST_LIVE_QUIET_SECONDS = env.float("MAST_LIVE_QUIET_SECONDS", default=30.0)
MAST_LIVE_SWEEP_SECONDS = env.float("MAST_LIVE_SWEEP_SECONDS", default=1.0)
MAST_LIVE_MAX_BACKLOG = env.int("MAST_LIVE_MAX_BACKLOG", default=10_000)  # traces due, not yet assembled: 503
MAST_OTLP_MAX_BYTES = env.int("MAST_OTLP_MAX_BYTES", default=16 * 1024**2)
MAST_OTLP_REQUESTS_PER_SECOND = env.int("MAST_OTLP_REQUESTS_PER_SECOND", default=200)
MAST_JOB_QUEUED_RESEND_SECONDS = env.float("MAST_JOB_QUEUED_RESEND_SECONDS", default=300.0)

# --- Import limits (bytes); an import over a limit is refused whole ---
MAST_IMPORT_MAX_FILE_BYTES = env.int("MAST_IMPORT_MAX_FILE_BYTES", default=512 * 1024**2)
MAST_IMPORT_MAX_TOTAL_BYTES = env.int("MAST_IMPORT_MAX_TOTAL_BYTES", default=2 * 1024**3)
MAST_IMPORT_MAX_ZIP_RATIO = env.int("MAST_IMPORT_MAX_ZIP_RATIO", default=200)
MAST_IMPORT_MAX_ZIP_MEMBERS = env.int("MAST_IMPORT_MAX_ZIP_MEMBERS", default=20000)
# A failed import whose input was fine (the worker stopped, an internal error) keeps its upload
# this long so a manager can retry it; refused inputs are deleted at once.
MAST_IMPORT_KEEP_FAILED_HOURS = env.float("MAST_IMPORT_KEEP_FAILED_HOURS", default=24)
# An upload folder with no import job (its request died before committing) is removed by the
# import sweep once nothing in it changed for this long (traces/importing/jobs.py).
MAST_IMPORT_ORPHAN_MINUTES = env.float("MAST_IMPORT_ORPHAN_MINUTES", default=60)
DATA_UPLOAD_MAX_MEMORY_SIZE = 10 * 1024**2
FILE_UPLOAD_MAX_MEMORY_SIZE = 10 * 1024**2

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="WARNING")},
}

# --- LLM judge (annotations/judge/) ---
# Trace budget per prompt in characters (~4 chars per token: 120,000 ~ 30k tokens); longer traces
# keep their start, end and most telling steps (annotations/judge/prompting.py).
MAST_JUDGE_MAX_CHARS = env.int("MAST_JUDGE_MAX_CHARS", default=120_000)
MAST_JUDGE_MAX_ATTEMPTS = env.int("MAST_JUDGE_MAX_ATTEMPTS", default=5)
MAST_JUDGE_BACKOFF_BASE = env.float("MAST_JUDGE_BACKOFF_BASE", default=0.5)
MAST_JUDGE_BACKOFF_CAP = env.float("MAST_JUDGE_BACKOFF_CAP", default=30.0)
MAST_JUDGE_BACKOFF_FIRST = env.float("MAST_JUDGE_BACKOFF_FIRST", default=0.05)  # first retry of a 5xx/timeout
# A claimed item's lease is the request timeout plus this while it waits in the queue; an expired
# lease is claimed again by the sweep. Once a worker starts the item, the lease is the shorter of
# the timeout and three heartbeats, plus the slack, and a thread of the worker renews it every
# heartbeat while the model answers: a killed worker's items are claimed again within at most
# 3 x MAST_JUDGE_HEARTBEAT + MAST_JUDGE_LEASE_SLACK seconds (45 s), whatever the run's request
# timeout (annotations/judge/dispatch.py).
MAST_JUDGE_LEASE_SLACK = env.float("MAST_JUDGE_LEASE_SLACK", default=15.0)
MAST_JUDGE_HEARTBEAT = env.float("MAST_JUDGE_HEARTBEAT", default=10.0)
# Which environment variables a judge run may send as its API key, and to which base URLs:
# "NAME=URL,NAME=URL" (annotations/judge/providers/keys.py). Empty: no run may use a key.
MAST_JUDGE_API_KEYS = env.str("MAST_JUDGE_API_KEYS", default="")
# Fernet key(s) that encrypt the API keys stored on judge connections (annotations/judge/secrets.py),
# comma-separated, newest first (older ones still decrypt: rotation). Empty: derived from SECRET_KEY,
# so rotating SECRET_KEY then makes stored keys unreadable (the connection page says so).
MAST_SECRETS_KEYS = env.str("MAST_SECRETS_KEYS", default="")
