# Two entry points for a fresh clone: `make run` and `make test`. Both create .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint samples screenshot bench bench-quick bench-peer clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/truva-console --samples

# The whole suite in two phases: every test not marked `serial` on two workers (pytest-xdist, a
# test file to a worker), then the `serial` ones (wall-clock, CPU-time and peak-memory bounds,
# and the screen snapshots: syrupy reports a snapshot file no test uses only without xdist)
# alone, as they run today. The two -m expressions are complements: each test runs in one phase.
test: $(STAMP) lint
	$(BIN)/python -m pytest -q -n 2 --dist loadfile -m "not serial"
	$(BIN)/python -m pytest -q -m serial

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/lint-imports --no-cache

# Re-record sample_traces/ from the demo plans, then redraw the snapshots that show sample ids
# and times (tests/snapshots/test_screens_replay.py); read `git diff` of both before committing.
samples: $(STAMP)
	$(BIN)/python -m console.demo.rerecord
	$(BIN)/python -m pytest -q tests/snapshots/test_screens_replay.py "tests/snapshots/test_screens_sizes.py::test_replay_screen_side_by_side_at" --snapshot-update
	$(BIN)/python docs/screenshots/redraw.py
	$(BIN)/python -m pytest -q tests/functional/test_samples.py tests/functional/test_tui_replay.py tests/functional/test_tui_bundles.py

# Redraw the README screenshot (docs/screenshots/execution-failing-step.svg) from the samples.
screenshot: $(STAMP)
	$(BIN)/python docs/screenshots/redraw.py

# Every measure of issue 12's goals table beside its baseline, < 10 min on 2 cores
# (docs/performance.md). Pass options through BENCH_ARGS, e.g. BENCH_ARGS="--only executor".
bench: $(STAMP)
	$(BIN)/python bench/run_all.py $(BENCH_ARGS)

bench-quick: $(STAMP)
	$(BIN)/python bench/run_all.py --quick $(BENCH_ARGS)

# Arize Phoenix's OTLP ingest of the LLM-call row's spans beside ours (docs/performance.md);
# installs Phoenix into .venv-phoenix on first use, skips with the reason when it cannot.
bench-peer: $(STAMP)
	$(BIN)/python bench/bench_peer.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
