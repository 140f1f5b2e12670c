"""Helpers the tests call (sites, waiting, the CLI as child processes, Redis, a proxy, a
browser), imported as `from support.sites import page`: tests/ is on sys.path (pyproject.toml,
[tool.pytest.ini_options] pythonpath). Fixtures are in the conftest.py files."""
