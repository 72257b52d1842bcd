#!/usr/bin/env bash
# Run the whole suite, browser tests included, against PostgreSQL and Redis.
set -euo pipefail
cd "$(dirname "$0")/.."
export SECRET_KEY=${SECRET_KEY:-test-only-secret-key-not-for-production-0123456789abcdefghijkl}
export DATABASE_URL=${TEST_DATABASE_URL:-postgres://root@127.0.0.1:5432/mast}
export CELERY_BROKER_URL=${TEST_CELERY_BROKER_URL:-redis://127.0.0.1:6379/15}
export DJANGO_ALLOW_ASYNC_UNSAFE=true
rm -rf test-artifacts && mkdir -p test-artifacts
# The main database must exist for the missing-migration check (pytest makes its own test_ copy).
if command -v psql >/dev/null; then
  db=${DATABASE_URL##*/}
  psql "${DATABASE_URL%/*}/postgres" -tAc "SELECT 1 FROM pg_database WHERE datname = '$db'" | grep -q 1 \
    || psql "${DATABASE_URL%/*}/postgres" -qc "CREATE DATABASE \"$db\"" || true
fi
.venv/bin/ruff check .
.venv/bin/lint-imports --no-cache >/dev/null || { .venv/bin/lint-imports --no-cache | sed -n '/Broken contracts/,$p' >&2
  echo "ERROR: an import breaks a layer contract (pyproject.toml [tool.importlinter])." >&2; exit 1; }
.venv/bin/python manage.py makemigrations --check --dry-run >/dev/null || {
  echo "ERROR: models changed without a migration (run manage.py makemigrations)." >&2; exit 1; }
# Two processes (pytest-xdist, one file at a time each): on two cores the browser, worker and
# network waits of one overlap the other's work. MAST_TEST_WORKERS=0 runs in one process.
# The two slower checks run beside the tests (on two cores the tests leave CPU idle while they wait
# for the browser, the worker and the network); their verdicts are printed at the end:
# mypy (a failure fails the run) and the report of runtime pins behind the package index.
checks=$(mktemp -d)
( status=0; .venv/bin/mypy --no-error-summary > "$checks/mypy" 2>&1 || status=$?; echo $status > "$checks/mypy.rc" ) &
( .venv/bin/python scripts/outdated.py > "$checks/outdated" 2>&1 || true ) &
rc=0
# --no-loadscope-reorder: the files come in conftest.py's order (SLOW_FIRST, then most tests first).
.venv/bin/pytest --create-db -n "${MAST_TEST_WORKERS:-2}" --dist loadfile --no-loadscope-reorder "$@" || rc=$?
wait
cat "$checks/outdated"
if [ "$(cat "$checks/mypy.rc")" != 0 ]; then
  cat "$checks/mypy" >&2
  echo "ERROR: mypy found type errors ([tool.mypy] in pyproject.toml)." >&2
  rc=1
fi
rm -rf "$checks"
exit $rc
