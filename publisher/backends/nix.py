"""The Nix backend: drive a kernel-builder flake.

`nix build <flake>#redistributable.<variant>` builds one variant (or, with
`bundle=True`, `<flake>#bundle` is built once and every variant is taken from
it); each output holds a `<variant>/` folder, copied into the staging folder
as upstream's `build-and-copy` does. The flake is the project's `flake.nix`,
or, for a project without one, a generated flake that applies kernel-builder
to the project (publisher/resources/nix/wrapper-flake.nix)."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import tempfile
import threading
from importlib import resources
from pathlib import Path
from typing import ClassVar

from publisher import env, git
from publisher.builder.backend import BackendSettings, BuildOutcome, BuildRequest, LineSink
from publisher.errors import BuildFailed, EnvironmentProblem, ProjectError, ToolchainUnavailable
from publisher.plan.planner import PlannedVariant
from publisher.project.model import Project
from publisher.runner import RunResult, run

MIN_NIX = (2, 4)  # first release with flakes
FLAKES_FIX = (
    "add `experimental-features = nix-command flakes` to ~/.config/nix/nix.conf "
    "(or /etc/nix/nix.conf for every user, then restart nix-daemon if you run one)"
)


class NixBackend:
    name: ClassVar[str] = "nix"

    def __init__(
        self,
        project: Project,
        *,
        bundle: bool = False,
        kernel_builder: str | None = None,
        nix: str = "nix",
    ):
        """`bundle`: build `.#bundle` once instead of one attribute per variant.
        `kernel_builder`: flake URL that replaces the `kernel-builder` input
        (e.g. a local checkout when GitHub is out of reach; default:
        $PUBLISHER_NIX_KERNEL_BUILDER)."""
        if project.root is None:
            raise ProjectError("the nix backend needs a project folder, not a lone build.toml")
        self.project = project
        self.bundle = bundle
        self.kernel_builder = kernel_builder or env.nix_kernel_builder()
        self.nix = nix
        self._lock = threading.RLock()
        self._scratch: Path | None = None
        self._flake: str | None = None
        self._variants: tuple[str, ...] | None = None
        self._bundle_out: Path | None = None

    @classmethod
    def from_settings(cls, settings: BackendSettings, project: Project) -> NixBackend:
        return cls(project, bundle=settings.nix_bundle)

    # -- the Backend interface -------------------------------------------

    def check_environment(self) -> None:
        exe = shutil.which(self.nix)
        if exe is None:
            raise EnvironmentProblem(
                f"the nix backend needs `{self.nix}`, which is not on PATH",
                "install Nix (https://nixos.org/download, or `apt-get install nix-bin` on Debian/Ubuntu), "
                "or build with `--backend local` or `--backend docker`",
            )
        version = run([exe, "--version"]).output
        m = re.search(r"(\d+)\.(\d+)", version)
        if not m or (int(m.group(1)), int(m.group(2))) < MIN_NIX:
            raise EnvironmentProblem(
                f"{version.strip() or exe}: flakes need Nix {MIN_NIX[0]}.{MIN_NIX[1]} or newer",
                "upgrade Nix",
            )
        probe = run([exe, "eval", "--expr", "builtins ? getFlake"])
        if not (probe.ok and probe.output.strip().endswith("true")):
            detail = probe.first_error_line() if not probe.ok else "flakes are disabled"
            raise EnvironmentProblem(f"Nix flakes are not enabled ({detail})", FLAKES_FIX)
        self._flake_ref()

    def input_identity(self, planned: PlannedVariant) -> str:
        """The flake and its lock pin kernel-builder (and so every toolchain)."""
        h = hashlib.sha256(f"nix bundle={self.bundle} kernel-builder={self.kernel_builder}\n".encode())
        root = self.project.root
        for name in ("flake.nix", "flake.lock"):
            path = root / name
            h.update(path.read_bytes() if path.exists() else b"-")
        if not (root / "flake.nix").exists():
            h.update(_wrapper_template().encode())
        return h.hexdigest()

    def build(self, request: BuildRequest, on_line: LineSink) -> BuildOutcome:
        variant = request.planned.name
        available = self._available_variants(request)
        if variant not in available:
            raise ToolchainUnavailable(
                f"the flake does not build {variant}; it builds: {', '.join(available) or 'nothing for this system'}"
            )
        if self.bundle:
            out = self._build_bundle(request, on_line)
        else:
            link = self._scratch_dir() / f"result-{variant}"
            out = self._nix_build(f"redistributable.{variant}", link, request, on_line)
        source = out / variant
        if not source.is_dir():
            raise BuildFailed(f"{out} has no folder {variant}/ (it has: {', '.join(sorted(p.name for p in out.iterdir()))})")
        _copy_writable(source, request.stage_dir)
        return BuildOutcome(toolchain={"nix": self._flake_ref(), "store-path": str(out)})

    def close(self) -> None:
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None

    # -- helpers ----------------------------------------------------------

    def _scratch_dir(self) -> Path:
        with self._lock:
            if self._scratch is None:
                self._scratch = Path(tempfile.mkdtemp(prefix="publisher-nix-"))
            return self._scratch

    def _flake_ref(self) -> str:
        """The flake to build: the project's, or a generated one around it."""
        if self._flake is not None:
            return self._flake
        root = self.project.root.resolve()
        git_top = git.toplevel(root)
        if (root / "flake.nix").exists():
            if git_top is not None and not git.tracks(git_top, root / "flake.nix"):
                raise ProjectError(
                    f"{root / 'flake.nix'}: not tracked by git, and Nix only sees the files git tracks",
                    f"run `git -C {root} add flake.nix flake.lock` (add new sources too)",
                )
            self._flake = str(root)
            return self._flake
        if git_top is not None:
            src = f"git+file://{git_top}"
            subdir = "" if git_top == root else "/" + root.relative_to(git_top).as_posix()
        else:
            src, subdir = f"path:{root}", ""
        wrapper = self._scratch_dir() / "flake"
        wrapper.mkdir(exist_ok=True)
        text = _wrapper_template().replace("@KERNEL_SRC@", src).replace("@SUBDIR@", subdir)
        (wrapper / "flake.nix").write_text(text)
        self._flake = f"path:{wrapper}"
        return self._flake

    def _common_flags(self) -> list[str]:
        flags = ["--no-write-lock-file"]
        if self.kernel_builder:
            flags += ["--override-input", "kernel-builder", self.kernel_builder]
        return flags

    def _available_variants(self, request: BuildRequest) -> tuple[str, ...]:
        with self._lock:
            if self._variants is None:
                ref = self._flake_ref()
                if not (self.project.root / "flake.nix").exists():
                    _note(request, None, f"no flake.nix in {self.project.root}: using kernel-builder's template ({ref})")
                result = self._nix(
                    ["eval", "--json", f"{ref}#redistributable", "--apply", "builtins.attrNames"],
                    request,
                    on_line=None,
                )
                try:
                    self._variants = tuple(json.loads(result.output.strip().splitlines()[-1]))
                except (ValueError, IndexError):
                    raise BuildFailed(f"cannot read the flake's variants: {result.output.strip()[:300]}") from None
            return self._variants

    def _build_bundle(self, request: BuildRequest, on_line: LineSink) -> Path:
        with self._lock:
            if self._bundle_out is None:
                self._bundle_out = self._nix_build("bundle", self._scratch_dir() / "result-bundle", request, on_line)
            else:
                _note(request, on_line, f"taking {request.planned.name} from the bundle built earlier ({self._bundle_out})")
            return self._bundle_out

    def _nix_build(self, attr: str, link: Path, request: BuildRequest, on_line: LineSink) -> Path:
        """Build `<flake>#attr` with logs (-L) streamed; the out-link keeps the
        result alive (a GC root) while we copy from it."""
        options = request.options
        self._nix(
            [
                "build",
                f"{self._flake_ref()}#{attr}",
                "-L",
                "--out-link",
                str(link),
                "--max-jobs",
                str(max(1, options.jobs)),
                "--cores",
                str(max(1, options.cores)),
            ],
            request,
            on_line,
        )
        return link.resolve()

    def _nix(self, args: list[str], request: BuildRequest, on_line: LineSink | None) -> RunResult:
        argv = [self.nix, *args[:1], *self._common_flags(), *args[1:]]
        result = run(argv, cwd=self.project.root, log=request.log, on_line=on_line)
        if not result.ok:
            raise BuildFailed(result.first_error_line())
        return result


def _wrapper_template() -> str:
    return resources.files("publisher.resources").joinpath("nix/wrapper-flake.nix").read_text()


def _note(request: BuildRequest, on_line: LineSink | None, text: str) -> None:
    with open(request.log, "a", encoding="utf-8") as fh:
        fh.write(text + "\n")
    if on_line:
        on_line(text)


def _copy_writable(source: Path, dest: Path) -> None:
    """Copy a store folder's contents; store files are read-only, the copy is not."""
    dest.mkdir(parents=True, exist_ok=True)
    for item in source.iterdir():
        target = dest / item.name
        if item.is_dir():
            shutil.copytree(item, target, symlinks=False, copy_function=shutil.copy)
        else:
            shutil.copy(item, target)
    for path in [dest, *dest.rglob("*")]:
        path.chmod(path.stat().st_mode | 0o200)


