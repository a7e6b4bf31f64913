"""Where publisher's world facts live: publisher/resources/ (YAML tables,
templates, sources compiled into every variant). Every module reads them
through here, so moving a module never moves the data it reads."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import yaml

DATA_DIR = Path(__file__).resolve().parent / "resources"


def data_path(name: str) -> Path:
    return DATA_DIR / name


def load_yaml(stream):
    """yaml.safe_load, with libyaml where present: the pure-Python loader is
    ~10x slower, and every command reads a few data files."""
    return yaml.load(stream, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


@cache
def read_yaml(name: str):
    with data_path(name).open() as fh:
        return load_yaml(fh)
