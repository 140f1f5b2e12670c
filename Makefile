# Two commands a newcomer needs: `make demo` and `make test`. Both bootstrap .venv once.
PYTHON ?= python3
VENV   ?= .venv
STAMP  := $(VENV)/.installed-stamp

# No stamp means no finished venv: whatever lies at its name (a half-built venv, a stale link) goes first.
# setuptools says "Editable installation." on every editable install: information, not a warning.
QUIET_BUILD := PYTHONWARNINGS="ignore:Editable installation"

$(STAMP): pyproject.toml
	rm -rf $(VENV)
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(QUIET_BUILD) $(VENV)/bin/pip install -q -e '.[test]'
	touch $(STAMP)

# The archive tests replay our WARCs in pywb and check WACZs with `wacz validate`
# (tests/support/archive_tools.py): webrecorder's tools, in a virtualenv of their own
# because pywb pins redis 2.10, which crawltop (redis>=5) cannot share.
ARCHIVE_VENV  := .venv-archive
ARCHIVE_STAMP := $(ARCHIVE_VENV)/.installed-stamp

$(ARCHIVE_STAMP):
	rm -rf $(ARCHIVE_VENV)
	$(PYTHON) -m venv $(ARCHIVE_VENV)
	$(ARCHIVE_VENV)/bin/pip install -q 'pywb>=2.8' 'wacz>=0.5' 'cdxj-indexer>=1.4'
	touch $(ARCHIVE_STAMP)

.PHONY: install demo test screenshots lint typecheck pkgtree reference docs
install: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/crawltop demo

# The suite on TEST_WORKERS pytest-xdist workers. Most tests wait on sockets, child processes
# and timers, so more workers than cores pay: 4 on a 2-core machine. loadgroup: the tests that
# drive Chromium share one worker (tests/conftest.py). `make test TEST_WORKERS=0`: one process.
TEST_WORKERS ?= 4
test: $(STAMP) $(ARCHIVE_STAMP)
	$(VENV)/bin/pytest -n $(TEST_WORKERS) --dist loadgroup

screenshots: $(STAMP)
	$(VENV)/bin/python scripts/screenshots.py

# mypy and import-linter read the package as it is installed (`crawltop.core` is core/, and
# so on: pyproject.toml), so they run on a copy laid out that way.
PKGTREE := build/pkgtree
pkgtree:
	rm -rf $(PKGTREE) && mkdir -p $(PKGTREE)/crawltop
	cp crawltop/*.py $(PKGTREE)/crawltop/
	cp -r core tui cli demo $(PKGTREE)/crawltop/

lint: $(STAMP) pkgtree
	$(VENV)/bin/ruff check .
	cd $(PKGTREE) && PYTHONPATH=. $(CURDIR)/$(VENV)/bin/lint-imports --no-cache $(CURDIR)/pyproject.toml

typecheck: $(STAMP) pkgtree
	cd $(PKGTREE) && $(CURDIR)/$(VENV)/bin/mypy --config-file $(CURDIR)/pyproject.toml -p crawltop

# The commands' pages in docs/reference/ and README's option table, from the parser, and
# docs/reference/keys.md, from the action tables of tui/actions.py and tui/top/app.py
# (tests/cli/test_reference.py checks them all)
reference: $(STAMP)
	$(VENV)/bin/python -m crawltop.cli.reference

# The docs site (mkdocs.yml, docs/; README, ARCHITECTURE, BENCHMARKS and screenshots/ come in
# through docs/hooks.py) into build/site. --strict: a broken link, anchor or nav entry fails it.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir build/site
