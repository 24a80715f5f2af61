# Two commands on a fresh machine (Python 3.11 and Java 17 present):
#   make demo   - install into .venv and run the demo job on local Spark into DuckDB
#   make test   - install into .venv (with test extras) and run the whole test suite
# (make compat runs the compatibility tier: the older PySpark lines, .ci/compat)
PYTHON ?= python3
VENV ?= .venv
# The lint tools (ruff, mypy) get an environment of their own: the venv the demo and the tests
# use holds only what pyproject.toml declares.
LINT_VENV ?= .venv-lint

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -e '.[test]'
	touch $@

.PHONY: demo test compat bench curves lint wheel kafka
demo: $(VENV)/.installed
	$(VENV)/bin/interlace demo

# Two workers (pytest-xdist), each running whole test files (their SparkSession and module
# fixtures are not duplicated): most tests wait on Spark's micro-batch cycle or a JVM starting,
# so two of them share the two cores well. TEST_WORKERS=0 runs in one process.
TEST_WORKERS ?= 2
test: $(VENV)/.installed
	$(VENV)/bin/pytest $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile)

# A Kafka broker on 127.0.0.1:9092 until Ctrl-C (KRaft, one node, from the kafka_2.13 jars that
# Maven resolves into ~/.cache/interlace-jars), for trying a pipeline on Kafka: docs/kafka.md.
KAFKA_PORT ?= 9092
kafka: $(VENV)/.installed
	$(VENV)/bin/python -m interlace.testing.kafka broker --port $(KAFKA_PORT)

# The compatibility tier (.ci/compat): the tests marked `compat` on each older PySpark line of
# .ci/compat-lines, each in a venv of that line's cluster-image packages (kept in
# ~/.cache/interlace-compat). COMPAT_LINES='3.5 4.0' for some lines; 2.5-4 min a line on 2 cores.
COMPAT_LINES ?=
compat:
	bash .ci/compat $(COMPAT_LINES)

# The whole benchmark (bench/run.py throughput: every workload of bench/harness's registry,
# native vs interlace, HDFS and RocksDB state stores) -> bench/results/<date>-full.md and .json.
# 70 min on 2 cores (2026-11-26); run it alone on the machine. BENCH_ARGS=--quick is a smoke
# run (~20 min). In parts: BENCH_ARGS='--workloads ...', then BENCH_ARGS='--merge A.json
# B.json'. bench/run.py --help lists the other measurements (state, profile, ...).
BENCH_ARGS ?=
bench: $(VENV)/.installed
	$(VENV)/bin/python bench/run.py throughput $(BENCH_ARGS)

# Cost curves (bench/run.py curves: time per micro-batch vs rows, keys and key groups, native vs
# interlace; a PNG in docs/ and a fitted cost model) -> bench/results/<date>-curves.md. Needs
# the `bench` extra (matplotlib), installed here into .venv. About an hour on 2 cores.
CURVES_ARGS ?=
$(VENV)/.bench: $(VENV)/.installed
	$(VENV)/bin/pip install --quiet -e '.[test,bench]'
	touch $@
curves: $(VENV)/.bench
	$(VENV)/bin/python bench/run.py curves $(CURVES_ARGS)

$(LINT_VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(LINT_VENV)
	$(LINT_VENV)/bin/pip install --quiet --upgrade pip
	$(LINT_VENV)/bin/pip install --quiet "ruff==0.17.6" "mypy==2.4.1" -e .
	touch $@

lint: $(LINT_VENV)/.installed
	$(LINT_VENV)/bin/ruff check operators state interlace
	MYPY=$(LINT_VENV)/bin/mypy bash .ci/mypy.sh

wheel:
	PYTHON=$(PYTHON) bash .ci/wheel
