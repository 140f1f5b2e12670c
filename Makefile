# Two commands a newcomer needs: `make demo` and `make test`. Both bootstrap .venv once.
PYTHON ?= python3
VENV   ?= .venv
STAMP  := $(VENV)/.installed-stamp

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[test]'
	touch $(STAMP)

.PHONY: install demo test screenshots
install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/crawltop demo

test: $(STAMP)
	$(VENV)/bin/pytest

screenshots: $(STAMP)
	$(VENV)/bin/python -m crawltop.tui.screenshots
