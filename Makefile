# mcp_django: run the example site, run the tests.
#
#   make run              serve the example library on http://127.0.0.1:8000/mcp
#   make run PORT=8001    ... on another port
#   MCP_TASKS_BACKEND=database make run    ... with django-tasks-db's worker running durable tasks
#   make run-wsgi         ... with gunicorn (WSGI, example_site/wsgi.py) and django-tasks-db's worker
#   make test             the whole test suite
#   make test ARGS="tests/e2e -q"
#   make test-fast COVERAGE=1   ... under coverage.py (branch coverage); then `make coverage` prints it
#   make test-fast        the inner loop: in-process tests only (no servers, browsers or other processes)
#   make test-fast ARGS="-x tests/test_sites.py"
#   make matrix           the other Python/Django cells (noxfile.py), all of which CI runs
#   make multihost        (root) two app hosts, a data host and HAProxy in network namespaces: tests/multihost/
#   make docs             build the documentation site into docs/_build/html (warnings are errors)
#   make screenshots      regenerate docs/_static/screenshots/ (the browser tests, in headless Chromium)
#   make clean            back to a fresh clone: remove .venv, caches and the demo database
#
# Both run and test first make sure .venv exists and holds requirements.txt.

PYTHON ?= python3
VENV ?= .venv
PORT ?= 8000
ARGS ?=
NOX_ARGS ?=

BIN := $(VENV)/bin
# COVERAGE=1: under coverage.py (branches; [tool.coverage] in pyproject.toml), a fresh measurement.
PYTEST = $(if $(COVERAGE),$(BIN)/coverage erase && $(BIN)/coverage run -m pytest,$(BIN)/python -m pytest)
DAPHNE = $(BIN)/daphne -b 127.0.0.1 -p $(PORT) example_site.asgi:application
# One process, a few threads (gthread): the SQLite file and the cache's counters stay in one place.
GUNICORN = $(BIN)/gunicorn --bind 127.0.0.1:$(PORT) --threads 4 example_site.wsgi
# Touched after each successful install: pip runs again only when requirements.txt is newer.
STAMP := $(VENV)/.requirements.stamp

.PHONY: run run-wsgi test coverage test-fast matrix multihost docs screenshots venv clean

run: $(STAMP)
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py load_demo_data
	@$(BIN)/python manage.py demo_banner --port $(PORT)
# OAuth tokens are bound to the endpoint's URL: it follows PORT unless MCP_RESOURCE_URL is set.
# MCP_TASKS_BACKEND=database: django-tasks-db's worker runs durable tasks, started and stopped with Daphne.
	export MCP_RESOURCE_URL=$${MCP_RESOURCE_URL:-http://127.0.0.1:$(PORT)/mcp}; \
	if [ -n "$$MCP_TASKS_BACKEND" ]; then exec $(BIN)/python -m example_site.with_worker -- $(DAPHNE); else exec $(DAPHNE); fi

# The same site under WSGI: the endpoint's plain view (docs/howto/deploy.md, "Under WSGI").
# Durable tasks run in django-tasks-db's worker by default here, as under make run: without one,
# each runs on the gunicorn worker's event loop and ends with that process. MCP_TASKS_BACKEND=
# make run-wsgi: no worker.
run-wsgi: export MCP_TASKS_BACKEND ?= database
run-wsgi: $(STAMP)
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py load_demo_data
	@$(BIN)/python manage.py demo_banner --port $(PORT) --server gunicorn
	export MCP_RESOURCE_URL=$${MCP_RESOURCE_URL:-http://127.0.0.1:$(PORT)/mcp}; \
	if [ -n "$$MCP_TASKS_BACKEND" ]; then exec $(BIN)/python -m example_site.with_worker -- $(GUNICORN); else exec $(GUNICORN); fi

test: $(STAMP)
	$(PYTEST) $(ARGS)

# The last run with COVERAGE=1: the total, then the 25 modules with the most uncovered lines.
coverage: $(STAMP)
	@$(BIN)/coverage report > $(VENV)/coverage.txt
	@echo "branch coverage of mcp_django: $$($(BIN)/coverage report --format=total)%"
	@head -n 27 $(VENV)/coverage.txt
	@grep -E "^TOTAL|skipped" $(VENV)/coverage.txt

# What to run while working: the markers below start servers, browsers or processes (make test runs them).
test-fast: $(STAMP)
	$(PYTEST) -m 'not e2e and not conformance and not multiprocess and not browser' $(ARGS)

# The in-process suite and one end-to-end test on each other cell, in a venv of its own (.nox/).
matrix: $(STAMP)
	$(BIN)/nox $(NOX_ARGS)

# Several hosts made with network namespaces (needs root; skipped otherwise unless CI=true):
# the scenarios of tests/multihost/, ending with one summary line. `make multihost ARGS="--only 1,2"`.
multihost: $(STAMP)
	$(BIN)/python -m tests.multihost $(ARGS)

docs: $(STAMP)
	$(BIN)/sphinx-build -W --keep-going -b html docs docs/_build/html

# The browser tests (tests/browser/) save their screenshots into the docs instead of a temporary directory.
screenshots: $(STAMP)
	MCP_SCREENSHOTS_DIR=docs/_static/screenshots $(BIN)/python -m pytest -m browser tests/browser -q

venv: $(STAMP)

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Order-only on the interpreter: creating files in .venv must not look like a change.
$(STAMP): requirements.txt | $(BIN)/python
	@echo "Installing requirements.txt into $(VENV) (the first time takes a minute or two)"
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
	touch $@

clean:
	rm -rf $(VENV) .nox .pytest_cache .hypothesis build dist *.egg-info docs/_build .coverage .coverage.*
	rm -rf .conformance .oidc-provider .inspector bench/.venvs  # what the tests and bench/ install
	rm -f example_site.sqlite3 example_site.sqlite3-shm example_site.sqlite3-wal
	find . -type d -name __pycache__ -prune -exec rm -rf {} +
