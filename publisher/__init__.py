"""publisher: take a kernel-builder project from build.toml to the Kernel Hub."""

__version__ = "0.1.0"

# The distribution on PyPI (`pip install kernel-publisher`); the import package
# and the command stay `publisher` (PyPI's `publisher` is an unrelated project).
DISTRIBUTION = "kernel-publisher"
