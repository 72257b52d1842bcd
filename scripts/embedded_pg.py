#!/usr/bin/env python3
"""Start, stop or locate the embedded PostgreSQL server (mast_site/embedded_pg.py) on a data directory.

    .venv/bin/python scripts/embedded_pg.py start [DIR] [--database NAME]   # prints its URL
    .venv/bin/python scripts/embedded_pg.py url [DIR] [--database NAME]     # exit 1 if not running
    .venv/bin/python scripts/embedded_pg.py stop [DIR]

DIR defaults to var/pg (the demo's). Used by scripts/demo.sh and scripts/ensure_services.sh.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from mast_site.embedded_pg import DEFAULT_DATABASE, embedded_pg_start, embedded_pg_stop, embedded_pg_url  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["start", "stop", "url"])
    parser.add_argument("pgdata", nargs="?", default=str(REPO / "var" / "pg"), type=Path)
    parser.add_argument("--database", default=DEFAULT_DATABASE)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
    try:
        if args.command == "start":
            print(embedded_pg_start(args.pgdata, args.database))
        elif args.command == "url":
            url = embedded_pg_url(args.pgdata, args.database)
            if url is None:
                print(f"no PostgreSQL is running on {args.pgdata.resolve()}", file=sys.stderr)
                return 1
            print(url)
        elif not embedded_pg_stop(args.pgdata):
            print(f"no PostgreSQL was running on {args.pgdata.resolve()}", file=sys.stderr)
    except ImportError as exc:
        print(f"ERROR: {exc}. Install the requirements (make install) for the embedded PostgreSQL.", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - one clear line for the shell script, then the details
        print(f"ERROR: embedded PostgreSQL {args.command} on {args.pgdata}: {exc}", file=sys.stderr)
        log = args.pgdata / "log"
        if log.is_file():
            print(f"(server log: {log})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
