"""publisher: take a kernel-builder project from build.toml to the Kernel Hub.

Installed as the distribution `kernel-publisher` (PyPI's `publisher` is an
unrelated project); the import package and the command are `publisher`."""

__version__ = "0.1.0"
