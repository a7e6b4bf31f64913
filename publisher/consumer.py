"""What the consumers of a published kernel run, rendered in one place: the
`kernels` load call and the benchmark commands. The card, `publisher init`'s
files, adopt's generated tests and push's consumer check all use these, so
what a user copies is what push checked.

kernels 0.17 loads a Hub kernel without `trust_remote_code` only when the Hub
marks the repository's owner a trusted kernel publisher (the org overview's
`trustedKernelPublisher`); a user account has no org overview, so a kernel
under a user name never loads without it. `trust_remote_code=["<org>/<name>"]`,
an allowlist of exactly this repository, loads for every owner."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Publisher(Enum):
    """What the Hub says about a repository's owner, as `kernels` asks it."""

    TRUSTED = "trusted"  # an org the Hub marks a trusted kernel publisher
    UNTRUSTED = "untrusted"  # an org the Hub does not mark
    USER = "user"  # no org overview: a user account
    UNKNOWN = "unknown"  # not asked (a new project), or the Hub could not answer


@dataclass(frozen=True)
class LoadCall:
    """`get_kernel(repo_id, version=N)` as a consumer writes it for this owner."""

    repo_id: str
    version: int
    publisher: Publisher = Publisher.UNKNOWN

    @property
    def owner(self) -> str:
        return self.repo_id.split("/", 1)[0]

    @property
    def trust_remote_code(self) -> list[str] | None:
        """The allowlist the call passes (None: the bare call, for a trusted org)."""
        return None if self.publisher is Publisher.TRUSTED else [self.repo_id]

    def render(self, function: str = "get_kernel", prefix: str = "") -> str:
        """`function` of `kernels` (get_kernel, install_kernel, has_kernel), called through `prefix` ("kernels.")."""
        args = f'"{self.repo_id}", version={self.version}'
        if self.trust_remote_code is not None:
            args += f', trust_remote_code=["{self.repo_id}"]'
        return f"{prefix}{function}({args})"

    def untrusted_because(self) -> str:
        """Why `kernels` refuses this repository without trust_remote_code (for an owner it does not trust)."""
        return {
            Publisher.TRUSTED: f"{self.owner} is a trusted kernel publisher on the Hub",
            Publisher.UNTRUSTED: f"{self.owner} is not a trusted kernel publisher on the Hub",
            Publisher.USER: f"{self.owner} is a user account, which the Hub never marks a trusted kernel publisher",
            Publisher.UNKNOWN: f"the Hub could not confirm {self.owner} a trusted kernel publisher",
        }[self.publisher]

    def why(self) -> str | None:
        """One comment line on why the call passes `trust_remote_code` (None for the bare call)."""
        return {
            Publisher.TRUSTED: None,
            Publisher.UNTRUSTED: f"# {self.owner} is not a trusted kernel publisher on the Hub: "
                                 "allow this repository by name to load its code",
            Publisher.USER: f"# {self.owner} is a user account, and the Hub trusts only some orgs as kernel "
                            "publishers: allow this repository by name to load its code",
            Publisher.UNKNOWN: "# kernels loads code only from publishers the Hub trusts, or from repositories "
                               "allowed by name",
        }[self.publisher]


def benchmark_commands(repo_id: str, version: int) -> list[str]:
    """Shell lines that run the kernel's published benchmarks (benchmarks/benchmark*.py on its version
    branch) on a consumer's machine. `kernels benchmark REPO` (remote mode) cannot load a third-party
    kernel in kernels 0.17.2 (it downloads without repo_type="kernel" and loads without
    trust_remote_code); on a local snapshot of the branch it works."""
    folder = f"{repo_id.split('/', 1)[1]}-v{version}"
    return [
        "pip install -U 'kernels[benchmark]'",
        f"hf download {repo_id} --repo-type kernel --revision v{version} --local-dir {folder}",
        f"kernels benchmark ./{folder}",
    ]
