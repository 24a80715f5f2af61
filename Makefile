# Two commands on a fresh machine (Python 3.11 and Java 17 present):
#   make demo   - install into .venv and run the demo job on local Spark into DuckDB
#   make test   - install into .venv (with test extras) and run the whole test suite
PYTHON ?= python3
VENV ?= .venv

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -e '.[test]'
	touch $@

.PHONY: demo test bench lint
demo: $(VENV)/.installed
	$(VENV)/bin/interlace demo

test: $(VENV)/.installed
	$(VENV)/bin/pytest

bench: $(VENV)/.installed
	$(VENV)/bin/python bench/join_bench.py

lint: $(VENV)/.installed
	$(VENV)/bin/pip install --quiet "ruff==0.17.6" "mypy==2.4.1"
	$(VENV)/bin/ruff check operators state interlace
	MYPY=$(VENV)/bin/mypy bash .ci/mypy.sh
