"""Typed errors. Each kind of failure has one exit code; the CLI maps them.

Exit codes: 0 ok, 1 the job found errors (check errors, a failed variant,
a refused push), 2 usage errors (bad flags, missing path), 3 an outside
service failed (Hub unreachable, Docker engine down, nix missing, a path
the system refuses), 4 the kernel was published (branch committed and
verified) but a later step failed (the card commit to main): rerunning the
push finishes it, 5 a bug in publisher (reported without a traceback),
130 interrupted.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_ENVIRONMENT = 3
EXIT_PUBLISHED_INCOMPLETE = 4
EXIT_BUG = 5
EXIT_INTERRUPTED = 130


class PublisherError(Exception):
    """A failure the user can fix; printed without a traceback."""

    exit_code = EXIT_FAILED

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint

    def render(self) -> str:
        return self.message + (f"\n  hint: {self.hint}" if self.hint else "")


class UsageError(PublisherError):
    exit_code = EXIT_USAGE


class ProjectError(PublisherError):
    """The project (build.toml, layout) cannot be used as given."""


class EnvironmentProblem(PublisherError):
    """Something outside the project is missing or broken (engine, nix, network)."""

    exit_code = EXIT_ENVIRONMENT


class PublishedIncomplete(PublisherError):
    """The version branch holds the verified release; a step after it failed."""

    exit_code = EXIT_PUBLISHED_INCOMPLETE
