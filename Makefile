# The two commands of the README: `make run` serves the example site, `make test` runs every test.
PYTHON ?= python3
VENV ?= .venv
PORT ?= 8000
BIN := $(VENV)/bin
STAMP := $(VENV)/.requirements.stamp

.PHONY: run test clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(STAMP): requirements.txt | $(BIN)/python
	$(BIN)/pip install --quiet -r requirements.txt
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/python manage.py migrate --noinput
	@echo "MCP endpoint: http://127.0.0.1:$(PORT)/mcp"
	exec $(BIN)/daphne -b 127.0.0.1 -p $(PORT) example_site.asgi:application

test: $(STAMP)
	$(BIN)/python -m pytest $(ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
