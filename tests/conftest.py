"""Shared pytest fixtures. Each area keeps its fixtures in its own module,
loaded here as a plugin; tests run the CLI through tests/cli_helper.py."""

pytest_plugins = ["hub_fixtures", "push_fixtures", "matrix_fixtures", "smoke_fixtures", "bench_fixtures",
                  "metadata_fixtures"]
