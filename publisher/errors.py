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


class PushRefused(ProjectError):
    """The push gate or the coverage check refused the release; `findings` say why (PP codes)."""

    def __init__(self, message: str, findings: list):
        super().__init__(message)
        self.findings = tuple(findings)


class EnvironmentProblem(PublisherError):
    """Something outside the project is missing or broken (engine, nix, network)."""

    exit_code = EXIT_ENVIRONMENT


class PublishedIncomplete(PublisherError):
    """The version branch holds the verified release; a step after it failed."""

    exit_code = EXIT_PUBLISHED_INCOMPLETE


class AuthError(PublisherError):
    """401/403 from the Hub."""


class ConflictError(PublisherError):
    """The branch moved under us (another push landed first)."""


class TransientError(EnvironmentProblem):
    """The Hub kept failing after every retry."""


class OfflineError(EnvironmentProblem):
    """HF_HUB_OFFLINE is set and the call needs the Hub."""


class VerificationFailed(ProjectError):
    """The pushed branch does not hold the files of this build."""

    def __init__(self, problems: list[str]):
        super().__init__("verification failed: the branch does not hold this build:\n  " + "\n  ".join(problems))
        self.problems = problems


class MigrationRefused(Exception):
    """A legacy build.toml that cannot be upgraded without the user's answer (`check` turns it into a finding)."""

    def __init__(self, message: str, hint: str):
        super().__init__(message)
        self.message = message
        self.hint = hint


# Raised inside a backend and caught by the scheduler, which records them per
# variant: not PublisherErrors, because one variant's failure must not stop the command.
class BuildFailed(Exception):
    """The variant's build failed; `first_error` is the line to show in the summary."""

    def __init__(self, first_error: str):
        super().__init__(first_error)
        self.first_error = first_error


class ToolchainUnavailable(Exception):
    """The variant's toolchain cannot be obtained here; the reason is shown."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class HubError(Exception):
    """An error the Hub server (hub-server) answers with: HTTP status, X-Error-Code, message."""

    def __init__(self, status: int, message: str, code: str | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code


class ConnectionDropped(Exception):
    """hub-server closes the connection without an answer (fault injection, or the client went away)."""
