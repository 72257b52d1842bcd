#!/usr/bin/env bash
# Make sure PostgreSQL and Redis answer on 127.0.0.1; start local installs that are stopped.
set -euo pipefail
PGHOST=${PGHOST:-127.0.0.1}; PGPORT=${PGPORT:-5432}; REDIS_PORT=${REDIS_PORT:-6379}

pg_up() { pg_isready -q -h "$PGHOST" -p "$PGPORT" 2>/dev/null || (exec 3<>"/dev/tcp/$PGHOST/$PGPORT") 2>/dev/null; }
redis_up() { redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping 2>/dev/null | grep -q PONG; }

if ! pg_up; then
  if command -v pg_ctlcluster >/dev/null && [ -d /etc/postgresql ]; then
    echo "Starting PostgreSQL..."
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -1)" main start || true
  fi
  for _ in $(seq 30); do pg_up && break; sleep 1; done
  pg_up || { echo "ERROR: PostgreSQL is not reachable on $PGHOST:$PGPORT and could not be started here." >&2
             echo "Install it (apt-get install postgresql) or point DATABASE_URL at a server." >&2; exit 1; }
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
