# `make run` and `make test` work on a fresh machine: both create .venv and install first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PREPARED := $(VENV)/.prepared

.PHONY: run test test-fast test-differential lint install java kafka compiled bench docs clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[embedded,dev]'
	touch $(STAMP)

install: $(STAMP)

# kstool's bytecode, which pip writes for an installed package but not for this editable one: every
# Python that Spark or a test starts (hundreds: the sources' runners, transformWithState's pre-init,
# kstool subprocesses) compiled kstool's modules again where PYTHONDONTWRITEBYTECODE is set
# (~0.1 CPU-s each, measured); only what changed is compiled again
compiled: install
	@$(BIN)/python -m compileall -q kstool commands

java: install
	@$(BIN)/python -c 'from kstool.engine.spark.java import main; main()'

# the class-data archive Spark's JVMs start from, in .venv (kstool engine prepare: ~25 s, once)
$(PREPARED): $(STAMP)
	$(BIN)/kstool engine prepare
	touch $(PREPARED)

# Apache Kafka's jars for the tests (tests/reference/pom.xml, from Maven Central into .cache/; once),
# and the class-data archive their JVMs start from (a broker started and stopped: ~15 s, once)
kafka: install
	@$(BIN)/python -m tests.apache_kafka > /dev/null

run: java compiled $(PREPARED)
	PATH="$(CURDIR)/$(BIN):$$PATH" bash scripts/demo.sh

# four workers, each with its own Apache Kafka broker, Spark session and kstool home (and an
# embedded broker for the tests marked embedded_tier): the Spark tests wait (JVM starts,
# triggers, failovers), and with three a 2-core machine still had 13% idle (fresh clones of
# one commit: 3 workers 1383 and 1410 s, 4 workers 1277 s)
TEST_WORKERS ?= 4

# no worker restart: xdist 3.8 hangs for good when it hands a crashed worker's files to a new one
# (pytest-xdist#1378); a crash ends the run, its stacks printed (tests/crashes.py)
test: java kafka compiled $(PREPARED)
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --max-worker-restart 0

# no broker, no Spark: parsers, serdes, layouts, processors against their oracles (Kafka Streams'
# TopologyTestDriver among them: one JVM per worker), planning; CPU-bound (the hypothesis
# tests), so two workers: 58 s -> 35 s on a 2-core machine
test-fast: java kafka compiled
	$(BIN)/python -m pytest -m "not integration" -q -n 2

# kstool's processors against Kafka Streams (tests/twin.py) on many more random cases than `make test`
DIFFERENTIAL_EXAMPLES ?= 5000
test-differential: java kafka
	KSTOOL_DIFFERENTIAL_EXAMPLES=$(DIFFERENTIAL_EXAMPLES) $(BIN)/python -m pytest -q -n 2 -m "not integration" $(wildcard tests/streams/test_differential_*.py)

lint: install
	$(BIN)/ruff check kstool commands tests bench
	$(BIN)/mypy

docs: install
	$(BIN)/python -m kstool.commands.docs .

bench: java kafka compiled $(PREPARED)
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) .kstool-demo bench/.venv-quix
