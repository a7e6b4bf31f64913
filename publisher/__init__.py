"""publisher: take a kernel-builder project from build.toml to the Kernel Hub."""

__version__ = "0.1.0"
