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


def _duration(text: str) -> float:
    """'90', '90s', '45m', '2h' -> seconds."""
    value = str(text).strip().lower()
    scale = {"s": 1, "m": 60, "h": 3600, "d": 86400}.get(value[-1:], None)
    number = value[:-1] if scale else value
    try:
        seconds = float(number) * (scale or 1)
    except ValueError:
        raise click.BadParameter(f"{text!r} is not a duration: write seconds, or a number with s, m, h or d (45m)") from None
    if seconds <= 0:
        raise click.BadParameter(f"{text!r}: a duration must be positive")
    return seconds


class Duration(click.ParamType):
    name = "DURATION"

    def convert(self, value, param, ctx):
        if isinstance(value, (int, float)):
            return float(value)
        try:
            return _duration(value)
        except click.BadParameter as err:
            self.fail(err.message, param, ctx)


ON_HELP = ("Run on another machine: hf-jobs:FLAVOUR[,FLAVOUR...] sends the variants that need a GPU to Hugging "
           "Face Jobs (one job per flavour), e.g. hf-jobs:l4x1,a100-large.")


IMAGE_HELP = "Image of every remote job (default: PyTorch's public image for each variant's torch and CUDA)."


def remote_options(prefix: str = "--on", on_help: str = ON_HELP, image_help: str = IMAGE_HELP):
    """Where to send work (`--on hf-jobs:FLAVOUR,...`) and how the jobs run."""
    def wrap(f):
        for option in reversed([
            click.option(prefix, "on", metavar="PLACE:TARGETS", help=on_help),
            click.option("--image", help=image_help),
            click.option("--job-timeout", type=Duration(), default="1h", show_default=True,
                         help="Longest a remote job may run (setup included), e.g. 45m, 2h; it bounds the cost."),
            click.option("--staging-repo", metavar="REPO",
                         help="Private model repo that carries the run to the jobs (default: <user>/publisher-staging)."),
        ]):
            f = option(f)
        return f
    return wrap
