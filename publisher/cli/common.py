"""Options and helpers shared by several commands."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from publisher.findings import Finding

format_option = click.option(
    "--format",
    "fmt",
    type=click.Choice(["human", "json"]),
    default="human",
    show_default=True,
    help="Output format.",
)
matrix_option = click.option(
    "--matrix", "matrix_file", type=click.Path(path_type=Path),
    help="Matrix file (default: the project's or publisher's).",
)
json_flag = click.option("--json", "as_json", is_flag=True, help="Print a JSON report instead of a table.")


def test_options(f):
    """Options `test` and `release` share."""
    for option in reversed([
        click.option("--repo-id", help="Repo id the project's tests load with get_kernel "
                     "(default: [general.hub] repo-id, else the one the tests name)."),
        click.option("--require-gpu/--allow-load-only", default=True, show_default=True,
                     help="A variant whose accelerator is missing here is loaded and its ops checked ('loaded, not run'); "
                          "that fails the run unless --allow-load-only."),
        click.option("--timeout", type=float, default=1800, show_default=True, help="Seconds for all tests of one variant."),
        click.option("--all-tests", is_flag=True, help="Run all of tests/, not only the tests marked kernels_ci."),
        click.option("--test-timeout", type=float, default=300, show_default=True,
                     help="Seconds for one test (needs pytest-timeout in the environment)."),
    ]):
        f = option(f)
    return f


_printed: list[bool] = [False]  # whether this command has printed its JSON document


def echo_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=False, default=str))
    _printed[0] = True


def start_command() -> None:
    _printed[0] = False


def wants_json(argv: Sequence[str]) -> bool:
    """Whether the command line asks for JSON output (`--json`, `--format json`).
    Read from argv because an error can stop the command before its options are parsed."""
    args = list(argv[: argv.index("--")] if "--" in argv else argv)
    for i, arg in enumerate(args):
        if arg == "--json" or arg == "--format=json" or (arg == "--format" and args[i + 1:i + 2] == ["json"]):
            return True
    return False


def echo_error_json(message: str, hint: str | None, exit_code: int, findings: Sequence[Finding] = ()) -> None:
    """The JSON answer of a command that stopped with an error: scripts reading
    stdout always get a document, with the same text stderr shows, and the coded
    findings behind it (a refused push: its PP findings) as `check --format json` shows them."""
    if not _printed[0]:  # a report already printed (push --dry-run, then refused) says it: stdout stays one document
        error = {"message": message, "hint": hint, "exit_code": exit_code}
        echo_json({"ok": False, "error": error, **({"findings": [f.to_json() for f in findings]} if findings else {})})
