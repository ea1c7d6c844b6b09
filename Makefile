# contextops: `make run` serves the dashboard with demo data; `make test` runs the suite.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
PY := $(BIN)/python
PORT ?= 8000
STAMP := $(VENV)/.installed

.DEFAULT_GOAL := help
.PHONY: help install run test test-fast bench load fuzz lint format migrate demo clean

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

$(STAMP): requirements.lock
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "$(PYTHON) not found; set PYTHON=/path/to/python3.11"; exit 1; }
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet --require-virtualenv -r requirements.lock
	@touch $(STAMP)

install: $(STAMP) ## Create .venv with the pinned dependencies

migrate: install ## Apply database migrations
	$(PY) manage.py migrate --noinput

demo: migrate ## Load the demo organization, session and login
	$(PY) manage.py seed_demo

run: demo ## Serve the dashboard and a Celery worker on the embedded defaults
	DEBUG=1 $(PY) -m contextops.run --port $(PORT)

test: install ## Run the whole suite (SQLite, or PostgreSQL and Redis when DATABASE_URL / REDIS_URL are set)
	$(PY) -m pytest -p no:cacheprovider -n 2 --dist loadgroup

test-fast: install ## The suite without browser tests
	$(PY) -m pytest -p no:cacheprovider -n 2 --dist loadgroup -m "not browser"

bench: install ## Benchmarks: prints figures, asserts nothing about time (see docs/benchmarks.md)
	$(PY) -m pip install --quiet -r requirements-bench.txt -c requirements.lock
	$(PY) -m pytest -p no:cacheprovider tests/bench -s -q --bench

load: install ## 50 agents against gunicorn + a worker on PostgreSQL and Redis (LOAD_SECONDS=60)
	$(PY) -m tests.load.main --agents $${LOAD_AGENTS:-50} --seconds $${LOAD_SECONDS:-60}

fuzz: install ## Schemathesis over every API operation with many more examples (CONTEXTOPS_FUZZ_EXAMPLES=300)
	CONTEXTOPS_FUZZ_EXAMPLES=$${CONTEXTOPS_FUZZ_EXAMPLES:-300} $(PY) -m pytest -p no:cacheprovider tests/hardening/test_fuzz.py -q -n 2

lint: install ## ruff check and format check
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: install ## ruff format
	$(BIN)/ruff format .

clean: ## Remove the virtualenv and local data
	rm -rf $(VENV) var/*.sqlite3* var/broker var/media
