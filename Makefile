# streamsdsl — two commands set everything up on a fresh machine (Python 3.11 + Java 17):
#   make run    installs, starts what it needs, runs the main example end to end
#   make test   installs and runs every test (unit, driver, streaming, integration, docs build)
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml constraints.txt | cksum | cut -d' ' -f1)
# The JVM operator's jar, built from the Java sources with the JDK's javac (jvm/build.py).
JAR    := streamsdsl/jars/streamsdsl-operator.jar
JAVA_SOURCES := $(shell find jvm/src -name '*.java' 2>/dev/null)
# The Kafka Streams oracle of the conformance harness (oracle/java, `make oracle`), built with Maven.
ORACLE_BUILT := oracle/java/target/classpath.txt
ORACLE_SOURCES := oracle/java/pom.xml $(shell find oracle/java/src -name '*.java' 2>/dev/null)
export PYSPARK_PYTHON := $(abspath $(PY))
export PYSPARK_DRIVER_PYTHON := $(abspath $(PY))

.PHONY: install install-base kafka-jars kafka-connector class-archive test-class-archive run run-cluster test test-hosts unit integration integration-process docs docs-check docs-serve bench clean lint \
	oracle oracle-jar deploy-context deploy-image run-yarn

install: install-base class-archive

# All that the applications and the tests need except the class archive, which is written per JDK:
# the tests' JDK (`test-class-archive`, TEST_JAVA_HOME) may not be the applications'.
install-base: $(STAMP) $(JAR) kafka-jars kafka-connector

# The archive of the Spark driver's classes (class data sharing) for this PySpark and JDK, written
# into the user's cache by a first application run in a child process (≈ 45 s, once): the sessions
# streamsdsl builds or configures start from it, a cold start ≈ 4 s sooner (docs/performance.md,
# P7). Nothing to do when it is there; STREAMSDSL_CLASS_ARCHIVE=off turns it off.
class-archive: $(STAMP) $(JAR)
	$(PY) -m streamsdsl.cli class-archive

# Apache Kafka's jars for the local broker (process and locally built image), resolved from Maven
# Central with mvn into the user's cache (~/.cache/streamsdsl/kafka-<version>), not into the
# repository: a fresh clone resolves them again; nothing to do when they are there.
kafka-jars: $(STAMP)
	@command -v mvn >/dev/null || { echo "Maven is required (mvn, to resolve Apache Kafka's jars for the local broker: apt-get install maven)"; exit 1; }
	$(PY) -m streamsdsl.cli kafka-jars

# Spark's Kafka connector (spark-sql-kafka-0-10 of the installed PySpark's version) and its runtime
# dependencies, resolved with mvn into the same cache: the sessions streamsdsl builds or configures
# load it, for kafka.connector = "jvm" (docs/kafka.md). PySpark is pinned in constraints.txt to a
# version whose connector Maven Central serves.
kafka-connector: $(STAMP)
	@command -v mvn >/dev/null || { echo "Maven is required (mvn, to resolve Spark's Kafka connector: apt-get install maven)"; exit 1; }
	$(PY) -m streamsdsl.cli kafka-connector

# Rebuilt when a Java source, the contract it is generated with (columns.py) or the install changed; without a JDK it says so and the Python
# operator runs the built-in aggregations.
$(JAR): $(JAVA_SOURCES) jvm/build.py streamsdsl/compiler/columns.py $(STAMP)
	$(PY) jvm/build.py

$(STAMP): pyproject.toml constraints.txt
	@command -v java >/dev/null || { echo "Java 17 is required (a JDK, to build the JVM operator: apt-get install openjdk-17-jdk-headless)"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,docs]' -c constraints.txt
	rm -f $(VENV)/.installed-*
	touch $@

# Kafka → Spark → Kafka: on BOOTSTRAP_SERVERS if set, else on a local broker started (and stopped) by
# the example. `$(PY) examples/quickstart.py --driver` runs it without a broker. CONNECTOR=jvm reads
# the input with Spark's own Kafka connector instead of streamsdsl's Python data source.
CONNECTOR ?= python
run: install
	$(PY) examples/quickstart.py --connector $(CONNECTOR)

# examples/order_enrichment.py on a Spark standalone cluster started for the run (a master and two
# workers whose Python has PySpark's dependencies only): streamsdsl ships itself (docs/deploy.md).
run-cluster: install
	$(PY) examples/order_enrichment.py --cluster

# docs/deploy.md's YARN command (spark-submit --master yarn --deploy-mode cluster ... $(streamsdsl ship)
# app.py) against Hadoop's MiniYARNCluster started for the run, whose Python has PySpark's
# dependencies only (integration/test_yarn_cluster.py; minutes of CPU, so `make test` leaves it out).
run-yarn: install
	STREAMSDSL_RUN_YARN=1 $(PY) -m pytest -p no:cacheprovider -q integration/test_yarn_cluster.py

# pytest exit code 5 ("no tests collected") is a failure here, as any non-zero code is. The
# slowest tests are listed at the end, and every test's time is in build/test-results.xml.
# TEST_WORKERS pytest-xdist processes share the tests, a whole file each, longest first
# (conftest.py, tests/durations.json; --no-loadscope-reorder keeps that order: xdist would sort the
# files by their number of tests); each worker that runs an integration file starts its own
# broker; TEST_WORKERS=0 runs them in this process. Three workers on two cores: with two the cores
# were busy 86 % of a run (the rest brokers, clusters and processes starting, queries waiting on
# their triggers), with three 97 % (docs/performance.md, "make test on three workers"). After a
# full run, `$(PY) tools/test_durations.py build/test-results.xml` refreshes the durations.
TEST_WORKERS ?= 3
# The JDK the tests run on: that of JAVA_HOME or the PATH, or `make test TEST_JAVA_HOME=/path/to/jdk`
# (Spark 4.2 runs on 17, 21 and 25 from 25.0.3; the suite passes on 17 and 25). Its class archive is
# written first (once per JDK, as `make class-archive` writes the applications'). Java 25 made the
# suite no quicker here (docs/performance.md, "The JDK of a test run").
TEST_JAVA_HOME ?=
TEST_JAVA = $(if $(strip $(TEST_JAVA_HOME)),JAVA_HOME=$(strip $(TEST_JAVA_HOME)))
test-class-archive: install-base
	$(TEST_JAVA) $(PY) -m streamsdsl.cli class-archive

test: test-class-archive $(ORACLE_BUILT)
	$(TEST_JAVA) $(PY) -m pytest -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=30 --junitxml=build/test-results.xml
	$(PY) -m mkdocs build --strict --site-dir build/site
	$(PY) tools/check_site.py build/site --static

unit: test-class-archive
	$(TEST_JAVA) $(PY) -m pytest -p no:cacheprovider tests

# Kafka Streams itself as the oracle (docs/testing.md#kafka-streams-as-the-oracle): N generated
# topologies and inputs, each run on Kafka Streams' TopologyTestDriver (oracle/java, built with
# Maven: kafka-streams 4.x resolves into ~/.m2) and on streamsdsl's; prints `N agree, M differ`
# and writes each difference, minimized, to $(CASES_DIR)/<id>.json (default oracle/cases, where
# tests/oracle asks for each file's triage). Exit code 1 when a case differs.
CASES  ?= 200
SEED   ?= 1
ENGINE ?= direct
CASES_DIR ?= oracle/cases
oracle: install $(ORACLE_BUILT)
	$(PY) -m oracle run --cases $(CASES) --seed $(SEED) --engine $(ENGINE) --cases-dir $(CASES_DIR)

# Rebuilt when the pom or a Java source changes (target/classes and the dependency classpath):
# with Maven once per version of the sources, kept in the user's cache, from which a fresh clone
# copies it (oracle/build.py).
oracle-jar: $(ORACLE_BUILT)
$(ORACLE_BUILT): $(ORACLE_SOURCES) oracle/build.py $(STAMP)
	$(PY) oracle/build.py
	touch $@

# The conformance suite on every host (tests/conftest.py: CONFORMANCE, HOSTS): every test of it on
# the direct engine, on the Spark plan with the Python and with the JVM operator, and the tests
# marked streaming_host as a streaming query. `make test` runs the same fixture on a sample (every
# test on the direct engine; the tests marked every_host on both Spark hosts and the first test
# of each class on one of them; the streaming subset): docs/testing.md says more.
test-hosts: test-class-archive $(ORACLE_BUILT)
	$(TEST_JAVA) STREAMSDSL_TEST_HOSTS=all $(PY) -m pytest -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile tests

integration: test-class-archive
	$(TEST_JAVA) $(PY) -m pytest -p no:cacheprovider integration

# A few integration tests with the broker forced to the Kafka JVM process (STREAMSDSL_BROKER=process),
# the broker of a machine without Docker: CI runs it after `make test`, which uses a container there.
# The reliability tests (test_faults.py: SIGKILL, broker paused, unreachable, topic re-created) run
# on both kinds of broker with the same assertions.
PROCESS_BROKER_TESTS := integration/test_local_broker.py integration/test_faults.py \
	integration/test_kafka_io.py::TestStreamingSource::test_reads_exactly_the_produced_records \
	integration/test_kafka_io.py::TestSink::test_streaming_copy_topic_to_topic
integration-process: test-class-archive
	$(TEST_JAVA) STREAMSDSL_BROKER=process $(PY) -m pytest -p no:cacheprovider -k 'not container' $(PROCESS_BROKER_TESTS)

# The site loads nothing from another host (Mermaid is vendored, diagrams generated at build
# time by tools/docs_hooks.py): check_site --static fails on any outside asset.
docs: install
	$(PY) -m mkdocs build --strict --site-dir build/site
	$(PY) tools/check_site.py build/site --static

# The built site in headless Chromium with the network off: no asset from another host, every
# Mermaid diagram and SVG drawn, no code block scrolling sideways at 1280 px; screenshots of
# every page and diagram in build/screenshots. Needs a Chromium (apt-get install
# chromium-headless-shell, or $(PY) -m playwright install chromium).
docs-check: docs
	$(PY) tools/check_site.py build/site --screenshots build/screenshots

docs-serve: install
	$(PY) -m mkdocs serve

# P5 compares with Quix Streams and Bytewax: the `bench` extra installs them.
bench: install
	$(PY) -m pip install --quiet -e '.[bench]'
	$(PY) benchmarks/run.py

# The image of the deploy example's application for Spark on Kubernetes (docs/deploy-kubernetes.md):
# its build context (examples/deploy/build_context.py: the Dockerfile, the requirements, streamsdsl's
# wheel, the jars, the application; DEPLOY_OFFLINE=1 adds a wheel of every requirement, for a build
# with no package index), then the image on the official Spark image, which must be pullable.
# integration/test_deploy_image.py builds the same image on a local stand-in of that base.
DEPLOY_CONTEXT ?= build/deploy-context
DEPLOY_IMAGE   ?= streamsdsl/orders-app:0.1.0
SPARK_IMAGE    ?= spark:4.2.0-scala2.13-java17-python3-ubuntu
deploy-context: install
	$(PY) examples/deploy/build_context.py $(DEPLOY_CONTEXT) --app examples/deploy/app.py $(if $(DEPLOY_OFFLINE),--offline)

deploy-image: deploy-context
	docker build --build-arg SPARK_IMAGE=$(SPARK_IMAGE) -t $(DEPLOY_IMAGE) $(DEPLOY_CONTEXT)

clean:
	rm -rf build site .pytest_cache .hypothesis spark-warehouse metastore_db derby.log
