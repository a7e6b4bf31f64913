"""What a remote job is asked to do, and the shell that starts it.

The run folder a job mounts (read-only) holds:
  project/              the project (no build outputs but the variants sent), with
  project/build/<v>/    each variant the jobs test
  wheel/*.whl           the publisher that is running here (remote/wheel.py)
  requests/<key>.json   one per job: what to run, on which variants
  matrix.yaml           the matrix the caller named, if any
The job copies the folder to a writable place, installs the wheel with the
image's Python and runs `python -m publisher.remote.job` on its request.
Nothing of the caller's environment or token is in the folder or the job."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

MOUNT = "/publisher-run"  # where the job sees the run folder
SETUP_FAILED = 3  # the bootstrap's exit code when publisher could not be installed in the job

# The job's command (bash -c). It reads only PUBLISHER_RUN and PUBLISHER_REQUEST, set by the caller
# to fixed words: nothing a project or a user wrote becomes part of a command.
BOOTSTRAP = r"""set -u
run="${PUBLISHER_RUN:?}"
work="$(mktemp -d /tmp/publisher-run.XXXXXX)"
cp -R "$run/." "$work/" || { echo "publisher job: could not copy the run folder $run"; exit 3; }
py="$(command -v python3 || command -v python)" || { echo "publisher job: the image has no python3"; exit 3; }
whl="$(ls "$work"/wheel/*.whl)"
# An environment of the job's own that sees the image's packages (torch): publisher goes there, the
# image's Python is left as it is; without the venv module, the image's Python itself.
# The image's site folders go on the new environment's path after its own (a .pth file): they reach
# it even when the image's Python is itself a venv, whose packages --system-site-packages misses.
if "$py" -m venv --system-site-packages "$work/env" >/dev/null 2>&1 && [ -x "$work/env/bin/python" ]; then
  outer="$("$py" -c 'import site, sys; print("\n".join(site.getsitepackages() + [site.getusersitepackages()]))')"
  inner="$("$work/env/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  printf '%s\n' "$outer" > "$inner/publisher-job-image.pth"
  py="$work/env/bin/python"
fi
echo "publisher job: installing $(basename "$whl") with $("$py" --version 2>&1) ($py)"
pip=("$py" -m pip install --quiet --disable-pip-version-check --no-warn-script-location)
# its dependencies first (a no-op where the image has them), then exactly this publisher over any other;
# an image that has the dependencies but no index to check them against still works
if ! "${pip[@]}" "$whl" >"$work/pip.log" 2>&1; then
  tail -n 5 "$work/pip.log"
  echo "publisher job: pip could not install publisher's dependencies; trying with the image's own"
fi
"${pip[@]}" --force-reinstall --no-deps "$whl" && "$py" -c "import publisher.cli, kernels, pytest" \
  || { echo "publisher job: pip could not install publisher (and its dependencies) in this image"; exit 3; }
exec "$py" -m publisher.remote.job "$work" "${PUBLISHER_REQUEST:?}"
"""


@dataclass(frozen=True)
class JobRequest:
    kind: str  # test | bench
    variants: tuple[str, ...]
    timeout: float = 1800.0
    test_timeout: float = 300.0
    all_tests: bool = False
    repo_id: str | None = None
    matrix: str | None = None  # file name in the run folder
    extra: dict = field(default_factory=dict)  # kind-specific settings (bench: warmup, iterations)

    def write(self, path: Path) -> None:
        data = asdict(self)
        data["variants"] = list(self.variants)
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(data, indent=2, sort_keys=True))

    @classmethod
    def read(cls, path: Path) -> JobRequest:
        data = json.loads(Path(path).read_text())
        data["variants"] = tuple(data.get("variants") or ())
        return cls(**data)
