# `make test` works on a fresh machine with only Python 3.10+: it builds .venv and runs pytest.
# TORCH picks the torch build; the default is the CPU build these project machines keep on
# disk. Elsewhere, e.g.: make test TORCH=torch
PYTHON ?= python3
VENV ?= .venv
TORCH ?= torch==2.13.0

.PHONY: setup test clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q "$(TORCH)"
	$(VENV)/bin/python -m pip install -q -e ".[test]"
	touch $@

setup: $(VENV)/.installed

test: setup
	$(VENV)/bin/python -m pytest -q

clean:
	rm -rf $(VENV) .pytest_cache
