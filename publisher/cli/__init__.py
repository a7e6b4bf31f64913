"""Thin CLI glue. Each subcommand lives in its own module under publisher/cli/
and exposes `command`; modules are imported only when their command runs."""

from __future__ import annotations

import importlib
import importlib.util  # not imported by `import importlib`; an editable install happened to hide that
import sys

import click

from publisher import __version__
from publisher.errors import EXIT_USAGE, PublisherError
from publisher.secrets import redact

# command name -> module under publisher.cli
COMMANDS = {
    "check": "check",
    "migrate": "migrate",
    "matrix": "matrix",
    "build": "build",
    "test": "test",
    "push": "push",
    "release": "release",
    "hub-server": "hub_server",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(name for name in COMMANDS if self._available(name))

    def _available(self, name: str) -> bool:
        return importlib.util.find_spec(f"publisher.cli.{COMMANDS[name]}") is not None

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS or not self._available(name):
            return None
        module = importlib.import_module(f"publisher.cli.{COMMANDS[name]}")
        return module.command


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="publisher")
def cli() -> None:
    """Check, plan, build, test and publish kernel-builder projects to the Kernel Hub."""


def main(argv: list[str] | None = None) -> None:
    try:
        rc = cli.main(args=argv, prog_name="publisher", standalone_mode=False)
    except PublisherError as err:
        click.echo(f"error: {redact(err.render())}", err=True)
        sys.exit(err.exit_code)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as err:
        err.show()
        sys.exit(EXIT_USAGE if isinstance(err, click.UsageError) else err.exit_code)
    except click.exceptions.Exit as err:
        sys.exit(err.exit_code)
    sys.exit(rc if isinstance(rc, int) else 0)
