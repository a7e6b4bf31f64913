"""Shared pytest fixtures. Each area keeps its fixtures in its own module,
loaded as a plugin; the CLI helper tests import is tests/cli_helper.py."""

pytest_plugins = ["hub_fixtures", "push_fixtures", "matrix_fixtures", "smoke_fixtures"]
