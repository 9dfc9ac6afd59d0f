# `make demo` and `make test` each create .venv on first use and install what they need.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
DEMO_DIR ?= demo_output

.PHONY: demo test test-slow install clean

install: $(VENV)/.installed

$(VENV)/.installed: requirements.txt requirements-test.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-test.txt
	touch $@

test: install
	$(PY) -m pytest -q -m "not slow" --durations=30

test-slow: install
	$(PY) -m pytest -q -m slow

demo: install
	PYTHON=$(PY) bash scripts/demo.sh $(DEMO_DIR)

clean:
	rm -rf $(VENV) $(DEMO_DIR)
