"""Shared pytest fixtures. Each area keeps its fixtures in its own module,
loaded here as a plugin; tests run the CLI through tests/cli_helper.py."""

pytest_plugins = ["hub_fixtures", "push_fixtures", "matrix_fixtures", "smoke_fixtures", "bench_fixtures",
                  "metadata_fixtures"]


def pytest_collection_modifyitems(config, items):
    """Files that hold slow tests first, each file's tests together and in their own order: the
    parallel run (xdist, a file per process at a time) then starts the long files while the short
    ones fill in behind them, instead of ending on one."""
    has_slow = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in has_slow)  # stable: keeps the order within each group
