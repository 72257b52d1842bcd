# The two commands: `make demo` (run the site with demo data on an embedded PostgreSQL, no services needed)
# and `make test` (the whole suite on PostgreSQL, Redis, a Celery worker and Chromium).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test install services lint bench clean-demo check-deploy outdated

$(STAMP): requirements.txt requirements-dev.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements-dev.txt
	touch $(STAMP)

install: $(STAMP)

demo: install
	scripts/demo.sh

# ensure_services.sh is sourced: where it starts the embedded PostgreSQL, it exports its URL for the suite.
test: install
	bash -c '. scripts/ensure_services.sh && exec scripts/test.sh $(ARGS)'

# Runtime pins behind the package index (a report; scripts/test.sh prints it too).
outdated: install
	$(BIN)/python scripts/outdated.py

lint: install
	$(BIN)/ruff check .

check-deploy: install
	DEBUG=false SECRET_KEY=$$(head -c 48 /dev/urandom | base64 | tr -d '/+=') ALLOWED_HOSTS=mast.example.org \
	  DATABASE_URL=$${DATABASE_URL:-postgres://check-only@localhost/none} \
	  $(BIN)/python manage.py check --deploy --fail-level WARNING

bench: install
	bash -c '. scripts/ensure_services.sh && for f in bench/bench_*.py; do echo "== $$f"; $(BIN)/python $$f || exit 1; done'

clean-demo:
	$(BIN)/python scripts/embedded_pg.py stop var/pg 2>/dev/null || true
	rm -rf var/pg var/broker var/media var/demo.env
