# rlaudit — the two set-up commands: `make run` (main job) and `make test` (test suite).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# torch 2.13.0 is a CPU wheel on this project's machines; elsewhere `make TORCH=torch` takes PyPI's default.
TORCH  ?= torch==2.13.0
# The suite runs its test files in parallel, one pytest worker per core (pytest-xdist; a file's tests stay in one
# worker, so the Ray tests share their module's cluster): 868 s on 2 cores where one worker took 1,170 s (both
# with trainings beside them at nice 10); 487 s on 2 quiet cores from a fresh clone (2026-12-03).
# `make test PYTEST_ARGS=` runs it in one process.
PYTEST_ARGS ?= -n auto --dist loadfile

.PHONY: run published-example record test install install-test browser latex reports flagship bench clean reference-venv

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip setuptools wheel

# torch and the package in one pip call: one resolver pass instead of two.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q "$(TORCH)" -e .
	touch $@

# The test extras and the JAX backend's (its tests run in the default suite; they skip without it).
$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q "$(TORCH)" -e ".[test,jax]"
	touch $(VENV)/.installed $@

install: $(VENV)/.installed
install-test: $(VENV)/.installed-test

# The fidelity harness's Dopamine reference (rlaudit fidelity ... --against dopamine; docs/fidelity.md) in a venv
# of its own: dopamine-rl brings TensorFlow, JAX and flax, which rlaudit's own environment does not need.
REFERENCE_VENV ?= /work/venvs/dopamine
reference-venv: $(REFERENCE_VENV)/.installed
$(REFERENCE_VENV)/.installed:
	$(PYTHON) -m venv $(REFERENCE_VENV)
	$(REFERENCE_VENV)/bin/python -m pip install -q --no-compile -r requirements/dopamine-reference.txt
	# dopamine-rl 4.1.2 imports OpenAI baselines' atari_wrappers without declaring it; its other requirements
	# (mpi4py, zmq, ...) are not needed for that module
	$(REFERENCE_VENV)/bin/python -m pip install -q --no-compile --no-deps baselines==0.1.5
	touch $@

# Headless Chromium for the HTML report's browser test (Debian package; needs root and apt).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
	      || echo "warning: could not install chromium; the browser test will be skipped"; \
	  else echo "note: chromium not installed and cannot install it here; the browser test will be skipped"; fi; }

# pdfLaTeX + booktabs for the report's LaTeX compile test (Debian packages, ~25 s; needs root and apt).
latex:
	@command -v pdflatex >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	      texlive-latex-base texlive-latex-recommended >/dev/null) \
	      || echo "warning: could not install pdflatex; the LaTeX compile test will be skipped"; \
	  else echo "note: pdflatex not installed and cannot install it here; the LaTeX compile test will be skipped"; fi; }

# Recorded reports: every bundled published protocol and the quickstart sweep -> reports/<name>/.
reports: install
	$(BIN)/python scripts/make_reports.py --data ../shared/data

# The main job: train the default protocol into RUN_DIR (resumable: run it again to finish an interrupted
# sweep), export its tidy table, audit it (the summary is printed) and write its report. ~8 min on 2 quiet
# cores (measured: protocols/quickstart.toml's header). RUN_DIR is runs/quickstart/ (git-ignored), not the
# committed record in sweeps/quickstart/: a fresh run must neither resume into nor overwrite the record
# (`make record` rebuilds that). Should the rerun decide no ordering (its runs differ from machine to machine),
# it also audits a bundled published comparison that does, so that the first run shows what a finding looks like.
RUN_DIR ?= runs/quickstart
PUBLISHED ?= protocols/published/dopamine-atari-200m.toml
run: install
	$(BIN)/rlaudit run protocols/quickstart.toml --store $(RUN_DIR)/store.sqlite
	$(BIN)/rlaudit export $(RUN_DIR)/store.sqlite -o $(RUN_DIR)/scores.csv
	$(BIN)/rlaudit audit $(RUN_DIR)/store.sqlite --out $(RUN_DIR)/audit
	$(BIN)/rlaudit report $(RUN_DIR)/audit/audit.json -o $(RUN_DIR)/report
	@echo "report: $(RUN_DIR)/report/index.html"
	@$(BIN)/python -c 'import json, sys; a = json.load(open(sys.argv[1])); sys.exit(not any(o["decision"] != "inconclusive" for o in a["orderings"]))' \
	  $(RUN_DIR)/audit/audit.json || $(MAKE) --no-print-directory published-example RUN_DIR=$(RUN_DIR)

# A bundled published comparison with decided orderings and inversions (Dopamine's Atari 200M baselines):
# from ../shared/data when that folder exists, else downloaded into the cache (sha256-checked).
published-example: install
	@echo "the rerun decided no ordering at these run counts; auditing $(PUBLISHED) as an example of findings"
	@if [ -d ../shared/data ]; then data="--data ../shared/data"; else $(BIN)/rlaudit fetch $(PUBLISHED) || exit 0; data=; fi; \
	  $(BIN)/rlaudit audit $(PUBLISHED) $$data --out $(RUN_DIR)/published/audit && \
	  $(BIN)/rlaudit report $(RUN_DIR)/published/audit/audit.json -o $(RUN_DIR)/published/report && \
	  echo "report: $(RUN_DIR)/published/report/index.html"

# Rebuild the recorded quickstart sweep (sweeps/quickstart/) from scratch, then its report.
record: install
	rm -rf sweeps/quickstart
	$(MAKE) run RUN_DIR=sweeps/quickstart
	rm -rf sweeps/quickstart/report sweeps/quickstart/published
	$(BIN)/python scripts/make_reports.py --data ../shared/data

# The flagship on the published MinAtar settings (protocols/dqn-family-minatar.toml; its header gives the cost):
# resume its store seed by seed, so that a partial store covers every game and agent, and regenerate its report
# after each seed that finished runs, from the second seed on (the bootstrap needs 2 runs per task; the report of a
# partial store says it is incomplete), so the report grows with the store; with nothing left to train it is
# regenerated once at the end (and at the end whenever the store changed after the last report). A report that fails
# keeps the previous one and does not stop the training (exit status 1 at the end). Interrupt and rerun at will: a
# run stopped part-way resumes from its last checkpoint (every 10 min of its training, in $(FLAGSHIP).checkpoints/),
# so the ~2 CPU-hour IQN runs span sittings. The checkpoints are committed with the store (a sitting's checkout
# holds only what is committed), and a sitting's machine is not always the last one's, so the flagship resumes
# checkpoints written on another machine (--resume-on-any-machine): such a run records each machine it trained on,
# and replays as a distribution, not bit for bit (docs/protocol.md, Checkpoints). Stop it with Ctrl-C (SIGINT)
# before committing. Commit the store as runs finish, but the checkpoints once a sitting, at its end: each is ~10 MB
# that git cannot delta, and what one sitting submits is capped in size (the sitting of 2026-12-07 10:29 committed
# them at every stop, about ten times, and was refused whole, losing the 8 runs it had finished). (The first
# flagship, 250k steps on other settings, is the complete record sweeps/dqn-family-minatar-250k/.)
FLAGSHIP = sweeps/dqn-family-minatar/store.sqlite
FLAGSHIP_REPORT = $(BIN)/python scripts/make_reports.py --data ../shared/data --only dqn-family-minatar
# its finished runs (the store's bytes change on every `rlaudit run`, even one with nothing to train)
FLAGSHIP_DONE = $(BIN)/python -c "from rlaudit.store import done_run_ids; print(len(done_run_ids('$(FLAGSHIP)')))" \
	2>/dev/null
flagship: install
	@seeds=$$($(BIN)/python -c "from rlaudit.protocol import load_protocol; print(*load_protocol('protocols/dqn-family-minatar.toml').seeds)"); \
	first=$${seeds%% *}; stale=1; failed=; \
	for s in $$seeds; do \
	  before=$$($(FLAGSHIP_DONE)); \
	  $(BIN)/rlaudit run protocols/dqn-family-minatar.toml --store $(FLAGSHIP) --only seed=$$s \
	    --resume-on-any-machine || exit 1; \
	  if [ "$$before" != "$$($(FLAGSHIP_DONE))" ]; then \
	    stale=1; if [ "$$s" != "$$first" ]; then $(FLAGSHIP_REPORT) || failed=1; stale=; fi; fi; \
	done; \
	if [ -n "$$stale" ]; then $(FLAGSHIP_REPORT) || failed=1; fi; \
	[ -z "$$failed" ]

test: install-test browser latex
	$(BIN)/python -m pytest $(PYTEST_ARGS)

bench: install-test
	for f in bench/bench_*.py; do echo "== $$f"; $(BIN)/python $$f || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
