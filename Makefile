# Two entry points (see README): `make demo` and `make test`. Each creates .venv and installs
# PowerZoo with every extra on first use; later runs reuse it.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The CPU build of torch; an unpinned `torch` would pull several GB of CUDA wheels.
TORCH ?= torch==2.13.0

.PHONY: install demo test lint docs bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH)"
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	@# headless Chromium for the site's browser test (tests/docs/): tried, never required
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then sudo=; else sudo="sudo -n"; fi; \
	  apt="$$sudo env DEBIAN_FRONTEND=noninteractive apt-get -y -qq"; \
	  { $$apt install chromium || { $$apt update && $$apt install chromium; }; } >/dev/null 2>&1 \
	  || echo "chromium not installed (needs apt-get and root): the browser test will be skipped"; }
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/powerzoo demo

lint: $(STAMP)
	$(BIN)/ruff check powerzoo tests benchmarks tools

# the documentation site, built into site/ with every warning an error; the task pages and
# their figures (docs/tasks/, committed: commit them again when they change) are generated
# first from the tasks' specs
docs: $(STAMP)
	$(BIN)/powerzoo docs-pages --out docs/tasks
	NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs build --strict --quiet

test: lint docs
	$(BIN)/pytest -n 2 -q

bench: $(STAMP)
	$(BIN)/python benchmarks/throughput.py

clean:
	rm -rf $(VENV) results site .pytest_cache
