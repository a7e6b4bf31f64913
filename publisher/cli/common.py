"""Options and helpers shared by several commands."""

from __future__ import annotations

import json
from typing import Any

import click

format_option = click.option(
    "--format",
    "fmt",
    type=click.Choice(["human", "json"]),
    default="human",
    show_default=True,
    help="Output format.",
)
json_flag = click.option("--json", "as_json", is_flag=True, help="Print a JSON report instead of a table.")


def echo_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=False, default=str))
