"""Build backends by name. `local` builds here; `docker` and `nix` run the
same build inside a container / the Nix sandbox (publisher/builder/backend.py
is the interface they implement)."""

from __future__ import annotations

import importlib

from publisher.builder.backend import Backend, BackendSettings
from publisher.errors import UsageError
from publisher.project.model import Project

# name -> (module, class)
BACKENDS = {
    "local": ("publisher.backends.local", "LocalBackend"),
    "docker": ("publisher.backends.docker", "DockerBackend"),
    "nix": ("publisher.backends.nix", "NixBackend"),
}


def get_backend(name: str, project: Project, settings: BackendSettings = BackendSettings()) -> Backend:
    """The backend called `name`, configured from the settings it reads."""
    if name not in BACKENDS:
        raise UsageError(f"unknown build backend {name!r}", f"use one of: {', '.join(BACKENDS)}")
    module_name, class_name = BACKENDS[name]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        if err.name != module_name:
            raise
        raise UsageError(f"the {name} backend is not available in this installation") from None
    return getattr(module, class_name).from_settings(settings, project)
