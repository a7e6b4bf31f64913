"""Run a setup.py only to see what it declares (`publisher adopt`, when reading
the script is not enough). Started as its own program in a scratch copy of
the project: setuptools.setup, the torch extension classes and BuildExtension
are replaced by recorders, so nothing is compiled, installed or packaged; any
subprocess, os.system and network connection is refused (the refusal is
recorded, with the line of setup.py that made it), but a git command that only
reads (`git rev-parse HEAD`, `git describe`: a version from the checkout) is
answered from the project's own repository (PUBLISHER_ADOPT_GIT_DIR and
PUBLISHER_ADOPT_GIT_WORK_TREE: the repository holding the original folder; the
scratch copy has none), as it is where the author runs the script (without a
repository it is refused); torch.cuda.is_available() answers True so the CUDA build is the one
recorded, and where this machine has no CUDA toolkit the script is answered as
if it had one of the version given: CUDA_HOME points at a stand-in folder,
torch.version.cuda and `nvcc -V` / `nvcc --version` name that version (the
common `get_cuda_bare_metal_version` pattern). With `cpu` after the version,
the script is answered as on a machine without CUDA instead (no GPU, no
CUDA_HOME, no nvcc, FORCE_CUDA unset): what it builds there, for a kernel's cpu
backend. Writes one JSON document to the path given. Standard library only, and run from a folder of its own: a file
beside it named like a standard-library module would shadow that module
(python puts a script's folder first on sys.path).

    python record_setup.py OUT.json setup.py CUDA_VERSION [cpu]
"""

import json
import os
import runpy
import socket
import subprocess
import sys
import traceback
import types

records = {"extensions": [], "setup": None, "blocked": [], "answered": [], "git": [], "error": None, "error_line": None,
           "missing": None, "module_file": None, "torch": None, "environ": {}}
CUDA = {"version": "13.0", "home": None, "absent": False}  # the toolkit a machine without one is answered as having
# (absent: answered as a machine without CUDA)
CUDA_ENVIRON = ("CUDA_HOME", "CUDA_PATH", "FORCE_CUDA", "CUDA_ROOT", "CUDACXX")
GIT = {"dir": None, "tree": None, "script": None}  # the project's repository (.git, work tree); setup.py's path
# git subcommands that only read the repository: answered from it, as on the author's machine
GIT_READS = frozenset({"rev-parse", "describe", "log", "rev-list", "show", "symbolic-ref", "ls-files", "status",
                       "diff", "name-rev", "cat-file"})
GIT_OPTIONS_WITH_VALUE = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace"})
ORIGINAL = {}  # the functions the recorders replace, for the calls they answer


def _jsonable(value, depth=0):
    if depth > 8:
        return repr(value)
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, dict):
        return {str(k): _jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_jsonable(v, depth + 1) for v in value]
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, RecordedExtension):
        return value.record
    return repr(value)


class RecordedExtension:
    def __init__(self, kind, name, sources, args, kwargs):
        caller = sys._getframe(2)
        self.record = {"kind": kind, "name": name, "sources": _jsonable(list(sources or [])),
                       "kwargs": _jsonable(kwargs), "extra_args": _jsonable(list(args)),
                       "line": caller.f_lineno if caller.f_code.co_filename.endswith("setup.py") else None}
        self.name = name
        self.sources = list(sources or [])


def _extension(kind):
    def make(name, sources=(), *args, **kwargs):
        return RecordedExtension(kind, name, sources, args, kwargs)
    return make


class BuildExtension:
    """Stands in for torch's BuildExtension (and subclasses of it the script defines)."""

    def __init__(self, *args, **kwargs):
        pass

    @classmethod
    def with_options(cls, **kwargs):
        return cls


def setup(**kwargs):
    ext_modules = kwargs.get("ext_modules") or []
    records["setup"] = {
        "name": _jsonable(kwargs.get("name")),
        "packages": _jsonable(kwargs.get("packages")),
        "package_dir": _jsonable(kwargs.get("package_dir")),
        "ext_modules": [e.record for e in ext_modules if isinstance(e, RecordedExtension)],
        "other_ext_modules": [repr(e) for e in ext_modules if not isinstance(e, RecordedExtension)],
    }


def _shown(args):
    return " ".join(str(a) for a in (args[0] if args and isinstance(args[0], (list, tuple)) else args[:1]))[:200]


def _words(command):
    if isinstance(command, str):
        return command.split()
    return [str(w) for w in command] if isinstance(command, (list, tuple)) else []


def _nvcc_version_query(command):
    """Whether `command` asks nvcc for its version (`nvcc -V`, `/usr/local/cuda/bin/nvcc --version`)."""
    words = _words(command)
    return bool(words) and os.path.basename(words[0]) == "nvcc" and any(w in ("-V", "--version") for w in words[1:])


def _git_read(command):
    """Whether `command` is git asked something it only reads (`git -C . rev-parse --short HEAD`)."""
    if isinstance(command, str) and any(c in command for c in ";|&$`<>()\n\\*?~{}"):
        return False  # a shell line that could run more than git: refused like any other
    words = _words(command)
    if not words or os.path.basename(words[0]) != "git" or GIT["dir"] is None:
        return False
    rest = iter(words[1:])
    for word in rest:
        if word in GIT_OPTIONS_WITH_VALUE:
            next(rest, None)
        elif not word.startswith("-"):
            return word in GIT_READS
    return False


def _in_repository(call, *args, **kwargs):
    """`call` with git pointed at the project's own repository (the copy it runs in has none)."""
    records["git"].append(" ".join(_words(args[0] if args else kwargs.get("args")))[:120])
    env = dict(kwargs.get("env") or os.environ)
    # GIT_OPTIONAL_LOCKS=0: `git status` does not refresh (write) the author's index
    env.update(GIT_DIR=GIT["dir"], GIT_WORK_TREE=GIT["tree"], GIT_OPTIONAL_LOCKS="0")
    kwargs["env"] = env
    return call(*args, **kwargs)


def _script_line():
    """The line of setup.py the call under way was made from (None outside it)."""
    for frame in reversed(traceback.extract_stack()):
        if GIT["script"] and os.path.abspath(frame.filename) == GIT["script"]:
            return frame.lineno
    return None


def _nvcc_answer(kwargs):
    version = CUDA["version"]
    text = ("nvcc: NVIDIA (R) Cuda compiler driver\n"
            f"Cuda compilation tools, release {version}, V{version}.0\n")
    textual = kwargs.get("text") or kwargs.get("universal_newlines") or kwargs.get("encoding")
    return text if textual else text.encode()


def _refuse(what, answer="raise"):
    """A refused call fails the way that call fails: a command that exits 1 (os.system, subprocess.run,
    call), CalledProcessError (check_call, check_output, run(check=True)), OSError (Popen, a connection).
    Asking nvcc for its version is answered (the stand-in toolkit's), not refused."""
    def refused(*args, **kwargs):
        command = args[0] if args else kwargs.get("args")
        if _git_read(command) and what.startswith("subprocess."):
            return _in_repository(ORIGINAL[what], *args, **kwargs)
        if _git_read(command) and what == "os.system":
            return _in_repository(ORIGINAL["subprocess.call"], command, shell=True)
        if _git_read(command) and what == "os.popen":
            os.environ.update(GIT_DIR=GIT["dir"], GIT_WORK_TREE=GIT["tree"], GIT_OPTIONAL_LOCKS="0")
            try:
                records["git"].append(" ".join(_words(command))[:120])
                return ORIGINAL["os.popen"](*args, **kwargs)
            finally:
                for name in ("GIT_DIR", "GIT_WORK_TREE", "GIT_OPTIONAL_LOCKS"):
                    os.environ.pop(name, None)
        if answer in ("run", "check", "output", "statusoutput") and _nvcc_version_query(command) \
                and not CUDA["absent"]:
            records["answered"].append(f"nvcc {' '.join(_words(command)[1:])}: release {CUDA['version']}")
            out = _nvcc_answer(kwargs if answer != "output" and answer != "statusoutput" else {"text": True})
            if answer == "run":
                return subprocess.CompletedProcess(command, 0, out, "" if isinstance(out, str) else b"")
            if answer == "statusoutput":
                return 0, out.rstrip("\n")
            return out.rstrip("\n") if answer == "output" else out
        records["blocked"].append({"what": f"{what}: {_shown(args)}", "line": _script_line()})
        if answer == "status":
            return 1
        if answer == "run" and not kwargs.get("check"):
            empty = "" if kwargs.get("text") or kwargs.get("universal_newlines") or kwargs.get("encoding") else b""
            return subprocess.CompletedProcess(command, 1, empty, empty)
        if answer in ("run", "check"):
            raise subprocess.CalledProcessError(1, command)
        if answer == "output":
            return ""
        if answer == "statusoutput":
            return 1, ""
        raise OSError(f"refused by publisher adopt (it only reads setup.py): {what}")
    return refused


def _stand_in_cuda_home():
    """A folder shaped like a CUDA toolkit (bin/nvcc, include/, lib64/) beside the scratch copy: scripts
    test for those paths. Nothing in it runs (subprocesses are refused)."""
    home = os.path.join(os.path.dirname(os.getcwd()), "cuda-stand-in")
    for sub in ("bin", "include", "lib64"):
        os.makedirs(os.path.join(home, sub), exist_ok=True)
    with open(os.path.join(home, "bin", "nvcc"), "w", encoding="utf-8") as fh:
        fh.write(f"# a stand-in for nvcc {CUDA['version']} (publisher adopt records setup.py; nothing runs)\n")
    with open(os.path.join(home, "version.json"), "w", encoding="utf-8") as fh:
        json.dump({"cuda": {"name": "CUDA SDK", "version": f"{CUDA['version']}.0"}}, fh)
    CUDA["home"] = home
    os.environ.setdefault("CUDA_HOME", home)
    return home


def _install_recorders():
    import setuptools

    setuptools.setup = setup
    try:
        import distutils.core

        distutils.core.setup = setup
    except ImportError:
        pass
    try:
        import torch
        import torch.utils.cpp_extension as cpp_extension

        records["torch"] = torch.__version__
        torch.cuda.is_available = (lambda: False) if CUDA["absent"] else (lambda: True)
        if CUDA["absent"]:
            torch.cuda.device_count = lambda: 0
            torch.version.cuda = None  # as a CPU build of torch answers
        elif torch.version.cuda is None:
            torch.version.cuda = CUDA["version"]
            records["answered"].append(f"torch.version.cuda: {CUDA['version']}")
    except Exception as err:  # noqa: BLE001 - torch missing or broken: a stand-in answers the few names scripts use
        records["torch"] = f"unavailable ({type(err).__name__}: {err})"
        torch = types.ModuleType("torch")
        torch.__version__ = "0.0.0"
        torch.version = types.SimpleNamespace(cuda=None if CUDA["absent"] else CUDA["version"], hip=None)
        torch.cuda = types.SimpleNamespace(is_available=(lambda: False) if CUDA["absent"] else (lambda: True))
        torch.utils = types.ModuleType("torch.utils")
        cpp_extension = types.ModuleType("torch.utils.cpp_extension")
        cpp_extension.CUDA_HOME = os.environ.get("CUDA_HOME")
        cpp_extension.ROCM_HOME = None
        torch.utils.cpp_extension = cpp_extension
        sys.modules.update({"torch": torch, "torch.utils": torch.utils, "torch.utils.cpp_extension": cpp_extension})
    if CUDA["absent"]:
        cpp_extension.CUDA_HOME = None
    elif getattr(cpp_extension, "CUDA_HOME", None) is None:
        cpp_extension.CUDA_HOME = _stand_in_cuda_home()
        records["answered"].append(f"CUDA_HOME: a stand-in for CUDA {CUDA['version']}")
    cpp_extension.CUDAExtension = _extension("cuda")
    cpp_extension.CppExtension = _extension("cpp")
    cpp_extension.BuildExtension = BuildExtension
    answers = {"run": "run", "call": "status", "check_call": "check", "check_output": "check", "Popen": "raise",
               "getoutput": "output", "getstatusoutput": "statusoutput"}
    for name, answer in answers.items():
        ORIGINAL[f"subprocess.{name}"] = getattr(subprocess, name)
        setattr(subprocess, name, _refuse(f"subprocess.{name}", answer))
    ORIGINAL["os.popen"] = os.popen
    os.system = _refuse("os.system", "status")
    os.popen = _refuse("os.popen")
    socket.socket.connect = _refuse("a network connection")
    socket.create_connection = _refuse("a network connection")


def _script_first_on_path(setup_path):
    """sys.path as `python setup.py` has it: the script's folder first. This file runs from a folder of its own
    (publisher copies it there), which the script's folder replaces; where the interpreter put no script folder
    first (PYTHONSAFEPATH, -P) the script's folder is added in front."""
    here = os.path.dirname(os.path.abspath(__file__))
    folder = os.path.dirname(os.path.abspath(setup_path))
    if sys.path and sys.path[0] and os.path.abspath(sys.path[0]) == here:
        sys.path[0] = folder
    else:
        sys.path.insert(0, folder)


def main():
    out_path, setup_path = sys.argv[1], sys.argv[2]
    if len(sys.argv) > 3:
        CUDA["version"] = sys.argv[3]
    CUDA["absent"] = len(sys.argv) > 4 and sys.argv[4] == "cpu"
    if CUDA["absent"]:
        for name in CUDA_ENVIRON:
            os.environ.pop(name, None)
    else:
        os.environ.setdefault("FORCE_CUDA", "1")
    GIT["dir"] = os.environ.pop("PUBLISHER_ADOPT_GIT_DIR", None) or None
    GIT["tree"] = os.environ.pop("PUBLISHER_ADOPT_GIT_WORK_TREE", None) or None
    GIT["script"] = os.path.abspath(setup_path)
    before = dict(os.environ)
    try:
        _install_recorders()
        sys.argv = [setup_path, "build_ext"]
        _script_first_on_path(setup_path)
        runpy.run_path(setup_path, run_name="__main__")
    except SystemExit as err:
        if err.code not in (0, None):
            records["error"] = f"setup.py exited with {err.code}"
    except BaseException as err:  # noqa: BLE001 - reported to publisher, which says what the script did
        frames = [f for f in traceback.extract_tb(err.__traceback__) if f.filename.endswith("setup.py")]
        records["error"] = f"{type(err).__name__}: {err}"
        records["error_line"] = frames[-1].lineno if frames else None
        if isinstance(err, ImportError):
            records["missing"] = err.name
            records["module_file"] = getattr(err, "path", None)
    records["environ"] = {k: v for k, v in os.environ.items() if before.get(k) != v}
    with open(out_path, "w", encoding="utf-8") as fh:
        json.dump(records, fh)


if __name__ == "__main__":
    main()
