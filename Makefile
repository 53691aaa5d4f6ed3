# Two entry points for a fresh clone: `make run` and `make test`. Both create .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint samples clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/truva-console --samples

test: $(STAMP) lint
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check .

# Re-record sample_traces/ from the demo plans, then redraw the snapshots that show sample ids
# and times (tests/snapshots/test_screens_replay.py); read `git diff` of both before committing.
samples: $(STAMP)
	$(BIN)/python -m console.demo.rerecord
	$(BIN)/python -m pytest -q tests/snapshots/test_screens_replay.py --snapshot-update
	$(BIN)/python -m pytest -q tests/functional/test_samples.py tests/functional/test_tui_replay.py tests/functional/test_tui_bundles.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
