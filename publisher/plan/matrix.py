"""matrix.yaml: the torch x compute x platform cells kernels are built for,
where each toolchain comes from, and the default architectures per toolkit."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml

from publisher.data import data_path, load_yaml
from publisher.errors import UsageError
from publisher.plan.variants import Platform, backend_of_compute, compute_version
from publisher.project.versions import parse_version

DEFAULT_MATRIX = data_path("matrix.yaml")


@dataclass(frozen=True)
class Cell:
    torch: str  # "2.15"
    compute: str  # cpu, cu130, rocm71, xpu20253, metal
    platform: str  # x86_64-linux
    required: bool
    index_url: str | None  # None = PyPI default wheel
    torch_requirement: str

    @property
    def backend(self) -> str:
        return backend_of_compute(self.compute)

    @property
    def toolkit(self) -> str | None:
        """CUDA/ROCm/XPU version of the cell ("13.0"), None for cpu/metal."""
        return compute_version(self.compute)


@dataclass(frozen=True)
class Matrix:
    path: Path
    cells: tuple[Cell, ...]
    cuda_toolkits: Mapping[str, tuple[str, ...]]
    rocm_toolkits: Mapping[str, tuple[str, ...]]

    def toolkit_archs(self, cell: Cell) -> tuple[str, ...] | None:
        table = {"cuda": self.cuda_toolkits, "rocm": self.rocm_toolkits}.get(cell.backend)
        if table is None:
            return None
        return table.get(cell.toolkit or "")


def find_matrix(project_root: Path | None, explicit: Path | None = None) -> Path:
    """--matrix FILE, else the project's own matrix.yaml, else the default."""
    if explicit is not None:
        return Path(explicit)
    if project_root is not None and (Path(project_root) / "matrix.yaml").is_file():
        return Path(project_root) / "matrix.yaml"
    return DEFAULT_MATRIX


def load_matrix(path: Path | None = None) -> Matrix:
    path = Path(path) if path is not None else DEFAULT_MATRIX
    try:
        data = load_yaml(path.read_text())
    except FileNotFoundError:
        raise UsageError(f"{path}: no such matrix file", "pass --matrix FILE or drop the option") from None
    except (OSError, yaml.YAMLError) as err:
        raise UsageError(f"{path}: not readable YAML ({err})", "fix the YAML syntax") from None
    try:
        return _parse(path, data)
    except (KeyError, TypeError, ValueError) as err:
        raise UsageError(f"{path}: invalid matrix ({err})", "compare with the default matrix.yaml shipped with publisher") from None


def _parse(path: Path, data: dict) -> Matrix:
    if not isinstance(data, dict) or data.get("schema") != 1:
        raise ValueError("`schema: 1` is required")
    indexes = data.get("indexes") or {}
    # A matrix of one machine's cells need not repeat the toolkit defaults, a world fact kept once
    toolkits = data["toolkits"] if "toolkits" in data else _default_toolkits(path)
    cells: list[Cell] = []
    seen: set[tuple[str, str, str]] = set()
    for release in data["torch"]:
        version = release["version"]
        if not isinstance(version, str) or parse_version(version) is None:
            raise ValueError(f"torch version {version!r} must be a quoted MAJOR.MINOR string, e.g. \"2.15\" "
                             "(build.toml bounds are compared with it as two numbers)")
        required = bool(release.get("required", False))
        for flavour in release["flavours"]:
            compute = str(flavour["compute"])
            backend_of_compute(compute)  # validates the name
            source = flavour.get("source", "pypi")
            if source != "pypi" and source not in indexes:
                raise ValueError(f"torch {version} {compute}: unknown source {source!r} (not in `indexes`)")
            requirement = flavour.get("requirement", f"torch=={version}.*")
            for platform in flavour["platforms"]:
                Platform.parse(platform)
                key = (version, compute, platform)
                if key in seen:
                    raise ValueError(f"cell torch {version} {compute} {platform} is listed twice")
                seen.add(key)
                cells.append(
                    Cell(
                        torch=version,
                        compute=compute,
                        platform=platform,
                        required=bool(flavour.get("required", required)),
                        index_url=None if source == "pypi" else indexes[source],
                        torch_requirement=requirement,
                    )
                )
    for kind in ("cuda", "rocm"):
        for key in toolkits.get(kind) or {}:
            if not isinstance(key, str) or parse_version(key) is None:
                raise ValueError(f"toolkits.{kind}: {key!r} must be a quoted MAJOR.MINOR string, e.g. \"13.0\"")
    as_tuples = lambda table: {str(k): tuple(str(a) for a in v) for k, v in (table or {}).items()}  # noqa: E731
    return Matrix(
        path=path,
        cells=tuple(cells),
        cuda_toolkits=as_tuples(toolkits.get("cuda")),
        rocm_toolkits=as_tuples(toolkits.get("rocm")),
    )


def _default_toolkits(path: Path) -> dict:
    if Path(path).resolve() == DEFAULT_MATRIX.resolve():
        raise ValueError("the default matrix must list `toolkits`")
    return yaml.safe_load(DEFAULT_MATRIX.read_text())["toolkits"]
