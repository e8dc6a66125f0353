# Everything a fresh machine needs goes through these targets.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PORT   ?= 5006
PYTEST_ARGS ?=

.PHONY: venv browser demo serve notebook lint format docs test test-slow bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@

venv: $(VENV)/.installed

# Browser tests drive Debian's chromium (browser downloads are impossible here).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq chromium >/dev/null; }

# `make demo` is asked for again and again: it replaces its own earlier output.
demo: venv
	$(VENV)/bin/lpviz demo --force

# JupyterLab comes with the test extra; the `lpviz` kernel (this checkout importable) opens the tour
# and any notebook of yours, in any folder (see docs/dashboard.md, "Jupyter").
notebook: venv
	$(PY) -m lpviz.dashboard.in_jupyter
	$(VENV)/bin/jupyter lab notebooks/tour.ipynb

# Listens on 127.0.0.1 only; serving a network is explicit: see docs/dashboard.md ("Serving").
# PROCS=N: N server processes behind the port, new sessions to the least busy (default: lpviz.dashboard.serve's).
PROCS  ?=
serve: venv
	$(VENV)/bin/lpviz serve --port $(PORT) $(if $(PROCS),--procs $(PROCS))

# ruff (lint + format check) and mypy over the library and the app; `make format` fixes the layout.
LINTED := lpviz app tests benchmarks tools
lint: venv
	$(VENV)/bin/ruff check $(LINTED)
	$(VENV)/bin/ruff format --check $(LINTED)
	$(VENV)/bin/mypy

format: venv
	$(VENV)/bin/ruff check --fix $(LINTED)
	$(VENV)/bin/ruff format $(LINTED)

# The documentation site (mkdocs.yml, docs/) into site/, warnings as errors; the docs extra pins its tools.
# NO_MKDOCS_2_WARNING silences Material's banner about its successor, which is not a build warning.
$(VENV)/.docs: $(VENV)/.installed
	$(PY) -m pip install --quiet -e '.[docs]'
	touch $@

docs: $(VENV)/.docs
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir site

test: venv browser lint
	$(PY) -m pytest -n 2 --dist loadfile $(PYTEST_ARGS)

test-slow: venv browser lint
	$(PY) -m pytest -n 2 --dist loadfile --runslow $(PYTEST_ARGS)

bench: venv
	for script in benchmarks/bench_*.py; do echo "== $$script"; $(PY) $$script || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache artifacts site
