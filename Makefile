# Developer entry points; CI (.ci/run) calls `make check`.
PY      ?= .venv/bin/python
VENV    := .venv
PYTEST_ARGS ?=

.PHONY: setup run lint typecheck imports test check e2e bench chart flags-doc clean

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

setup: $(VENV)/.installed

# The main job: a simulated cluster and `vpa run` against it (Ctrl-C stops both).
run: setup
	bash hack/run-local.sh $(RUN_ARGS)

lint: setup
	$(PY) -m ruff check .

typecheck: setup
	$(PY) -m mypy

imports: setup
	$(VENV)/bin/lint-imports

test: setup
	$(PY) -m pytest $(PYTEST_ARGS); rc=$$?; if [ $$rc -eq 5 ]; then echo "no tests collected"; exit 1; fi; exit $$rc

check: lint typecheck imports test

e2e: setup
	$(PY) -m pytest e2e $(PYTEST_ARGS)

bench: setup
	$(PY) -m benchmarks

flags-doc: setup
	$(PY) -m vpa.cli flags-doc > docs/flags.md
	$(PY) -m vpa.cli gates-doc > docs/feature-gates.md

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache

/.run:
	mkdir -p .run
