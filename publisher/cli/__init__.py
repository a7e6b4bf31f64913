"""Thin CLI glue. Each subcommand lives in its own module under publisher/cli/
and exposes `command`; modules are imported only when their command runs."""

from __future__ import annotations

import importlib
import importlib.util  # not imported by `import importlib`; an editable install happened to hide that
import signal
import sys
import threading
from collections.abc import Sequence
from typing import NoReturn

import click

from publisher import __version__
from publisher.cli.common import echo_error_json, start_command, wants_json
from publisher.errors import EXIT_BUG, EXIT_ENVIRONMENT, EXIT_INTERRUPTED, EXIT_USAGE, PublisherError
from publisher.findings import Finding
from publisher.secrets import redact

# command name -> module under publisher.cli
COMMANDS = {
    "init": "init",
    "check": "check",
    "migrate": "migrate",
    "matrix": "matrix",
    "build": "build",
    "test": "test",
    "bench": "bench",
    "push": "push",
    "release": "release",
    "hub-server": "hub_server",
    "completions": "completions",
    "adopt": "adopt",
    "skills": "skills",
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
    args = sys.argv[1:] if argv is None else list(argv)
    as_json = wants_json(args)
    start_command()
    if threading.current_thread() is threading.main_thread():
        # a launcher may start us with SIGINT ignored (`cmd &` in a script): Ctrl-C must still stop us
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        rc = cli.main(args=args, prog_name="publisher", standalone_mode=False)
    except PublisherError as err:
        _fail(err.message, err.hint, err.exit_code, as_json, getattr(err, "findings", ()))
    except click.exceptions.Abort:
        _fail("aborted", None, EXIT_INTERRUPTED, as_json)
    except click.ClickException as err:
        code = EXIT_USAGE if isinstance(err, click.UsageError) else err.exit_code
        if as_json:
            _fail(err.format_message(), None, code, as_json)
        err.show()
        sys.exit(code)
    except click.exceptions.Exit as err:
        sys.exit(err.exit_code)
    except OSError as err:
        # the disk, a permission, a path the system refuses: outside publisher, no traceback
        where = f": {err.filename}" if err.filename else ""
        _fail(f"{err.strerror or err}{where}", "check the path, free space and permissions", EXIT_ENVIRONMENT, as_json)
    except ModuleNotFoundError as err:
        if (err.name or "publisher").split(".")[0] == "publisher":
            _fail(f"internal error: {type(err).__name__}: {err}",
                  "this is a bug in publisher; please report it with the command line that caused it", EXIT_BUG, as_json)
        # a dependency missing or too old (installed without its dependencies, or pinned by another package)
        _fail(f"a package publisher needs cannot be imported: {err}",
              "install publisher with its dependencies: pip install --upgrade kernel-publisher "
              "(`pip check` names any package whose requirements conflict)", EXIT_ENVIRONMENT, as_json)
    except Exception as err:  # noqa: BLE001 - the last line of defence; tests treat EXIT_BUG as a failure
        _fail(f"internal error: {type(err).__name__}: {err}",
              "this is a bug in publisher; please report it with the command line that caused it", EXIT_BUG, as_json)
    sys.exit(rc if isinstance(rc, int) else 0)


def _fail(message: str, hint: str | None, code: int, as_json: bool, findings: Sequence[Finding] = ()) -> NoReturn:
    message, hint = redact(message), redact(hint) if hint else None
    if as_json:
        echo_error_json(message, hint, code, findings)
    click.echo("error: " + message + (f"\n  hint: {hint}" if hint else ""), err=True)
    sys.exit(code)
