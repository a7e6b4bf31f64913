"""The names a new kernel project takes from its Hub repository id OWNER/NAME:
the kernel name of build.toml (NAME in lowercase, other characters as dashes,
then held to check's rule), its Python package name, and the class and variable
names the templates use."""

from __future__ import annotations

import keyword
import re
from dataclasses import dataclass

from publisher.errors import UsageError
from publisher.hub_names import repo_id_problem
from publisher.project.values import MAX_NAME, NAME

_SEPARATORS = re.compile(r"[^a-z0-9]+")


@dataclass(frozen=True)
class KernelNames:
    repo_id: str  # OWNER/NAME as given: the Hub repository
    name: str  # general.name

    @property
    def repo_name(self) -> str:
        return self.repo_id.split("/", 1)[1]

    @property
    def python_name(self) -> str:
        return self.name.replace("-", "_")

    @property
    def class_name(self) -> str:
        return "".join(part.capitalize() for part in self.name.split("-"))

    @property
    def module_var(self) -> str:
        """A Python variable for the loaded kernel in examples (the package name unless it is a keyword)."""
        return "kernel" if keyword.iskeyword(self.python_name) else self.python_name


def kernel_name(repo_name: str) -> str:
    return _SEPARATORS.sub("-", repo_name.lower()).strip("-")


def names_for(repo_id: str) -> KernelNames:
    """The names for a new project published as `repo_id`; UsageError with the fix otherwise."""
    problem = repo_id_problem(repo_id)
    if problem:
        raise UsageError(f"`{repo_id}` is not a Hub repository id: {problem}",
                         "give the repository the kernel is published to as OWNER/NAME, e.g. my-org/my-kernel")
    owner, repo_name = repo_id.split("/", 1)
    name = kernel_name(repo_name)
    if not NAME.fullmatch(name) or len(name) > MAX_NAME:
        raise UsageError(
            f"`{repo_name}` gives no valid kernel name (`{name}`): a kernel name has lowercase letters, digits and "
            f"dashes, starts with a letter, ends with a letter or digit, and has 2 to {MAX_NAME} characters",
            f"name the repository after the kernel, e.g. {owner}/my-kernel")
    return KernelNames(repo_id=repo_id, name=name)
