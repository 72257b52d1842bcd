# The two commands: `make demo` (run the site with demo data, no services needed)
# and `make test` (the whole suite on PostgreSQL, Redis, a Celery worker and Chromium).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test install services lint bench clean-demo check-deploy

$(STAMP): requirements.txt requirements-dev.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements-dev.txt
	touch $(STAMP)

install: $(STAMP)

demo: install
	scripts/demo.sh

test: install
	scripts/ensure_services.sh
	scripts/test.sh $(ARGS)

lint: install
	$(BIN)/ruff check .

check-deploy: install
	DEBUG=false SECRET_KEY=$$(head -c 48 /dev/urandom | base64 | tr -d '/+=') ALLOWED_HOSTS=mast.example.org \
	  $(BIN)/python manage.py check --deploy --fail-level WARNING

bench: install
	scripts/ensure_services.sh
	for f in bench/bench_*.py; do echo "== $$f"; $(BIN)/python $$f || exit 1; done

clean-demo:
	rm -rf var/mast.sqlite3 var/broker var/media
