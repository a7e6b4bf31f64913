"""`publisher adopt --record`: what the original extension computes, on the
calls the project's own code makes. The original is built its author's way
(setup.py build_ext --inplace, or its own load() call when imported), cached
by its sources; then the project's tests (under pytest), its scripts (check,
grad-check, test, example, demo, benchmark scripts beside setup.py and in
examples/) and its README's Python blocks are run, each in a scratch copy and
time-limited, with every call into the extension recorded (call_recorder.py).
The calls kept (a few per op, size-capped) are what adopt's replay tests
compare the kernel with."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from publisher import runner
from publisher.adopt import call_recorder, project_tests, sources
from publisher.adopt.discover import copy_project
from publisher.adopt.model import Discovery
from publisher.secrets import _SECRET_ENV

PROGRAM_TIMEOUT = 600.0  # seconds one program of the project may run (the first one may compile a load())
BUILD_TIMEOUT = 3600.0  # seconds the original's setup.py build_ext may take
MAX_CRASHES = 3  # tests taking the process down, each then deselected, before the rest is given up
PER_OP = 6  # calls kept per op (distinct argument shapes first)
MAX_BYTES = 8 * 1024 * 1024  # the recorded calls' file, all told
# scripts a project ships that call its ops: beside setup.py, or anywhere in examples/
_SCRIPT = re.compile(r"^(tests?|check|grad|gradcheck|example|demo|bench|benchmark|sample|verify|validate|run_tests?)"
                     r"([_\-.].*)?\.py$", re.I)
_EXAMPLE_DIRS = ("examples", "example", "demo", "demos")
_FENCE = re.compile(r"^```(?:python|py)\s*\n(.*?)^```", re.M | re.S)
_BUILT = (".so", ".pyd")
_COMPILER_ERROR = re.compile(r"^.*(?:fatal error|error:|\): error).*$", re.M)  # a compiler's first error line


@dataclass(frozen=True)
class Program:
    label: str  # what the user knows it as: "tests/test_ops.py", "demo.py", "README.md"
    argv: tuple[str, ...]  # after the recorder: a script path (relative to the copy) or -m pytest ...
    cwd: str = ""  # relative to the copy


@dataclass(frozen=True)
class Recording:
    calls: tuple[dict, ...] = ()  # the kept calls, each {op, module, from, where, args, kwargs, result, mutated, spread}
    seen: int = 0  # calls into the original observed, all told
    ran: tuple[tuple[str, str], ...] = ()  # (program, what happened): "3 call(s)", "no call", "failed (exit 1)", ...
    built: str = ""  # how the original was built (and whether from the cache)
    why_not: str = ""  # nothing recorded: why
    device: str = ""  # where the calls ran: cuda, cpu
    nondeterministic: tuple[str, ...] = field(default=())  # ops whose second call on the same inputs differed
    left_out: tuple[tuple[str, int], ...] = field(default=())  # (why, how many) of the calls not recorded
    # the project's tests that failed or crashed with the original: {node id under tests/ as adopt carries it: how}
    original_failures: tuple[tuple[str, str], ...] = field(default=())

    @property
    def ops(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(c["op"] for c in self.calls))

    @property
    def sources(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(c["from"] for c in self.calls))

    def to_json(self) -> dict:
        return {"calls": len(self.calls), "ops": list(self.ops), "seen": self.seen, "from": list(self.sources),
                "ran": [{"program": p, "outcome": o} for p, o in self.ran], "built": self.built,
                "device": self.device, "nondeterministic": list(self.nondeterministic),
                "original_failures": dict(self.original_failures), "left_out": dict(self.left_out),
                **({"why_not": self.why_not} if self.why_not else {})}


def record(root: Path, discovery: Discovery, *, timeout: float = PROGRAM_TIMEOUT, log: Path | None = None) -> Recording:
    root = Path(root)
    if discovery.route not in ("setup.py", "load()"):
        return Recording(why_not=f"the project is built by {discovery.route}, not by torch.utils.cpp_extension: "
                                 "there is no original extension to record")
    programs = find_programs(root, discovery)
    if not programs:
        return Recording(why_not="the project has no tests, scripts or README code that could call the original")
    modules = sorted({e.module for e in discovery.extensions})
    with tempfile.TemporaryDirectory(prefix="publisher-record-") as tmp:
        work = Path(tmp)
        base = work / "original"
        copy_project(root, base)
        env = _environment(base, work / "calls.jsonl", modules)
        overlay, problem = _test_overlay(root, discovery, programs, log)
        if problem:
            return Recording(why_not=problem)
        if overlay is not None:
            env[call_recorder.OVERLAY] = str(overlay)
        if discovery.route == "setup.py":
            built, problem = _build_setup(base, env, log)
            if problem:
                return Recording(built=built, why_not=problem)
        else:
            built = "its own load() call, when the project's code imports it (torch's extension cache: " \
                    f"{env['TORCH_EXTENSIONS_DIR']})"
        ran: list[tuple[str, str]] = []
        lines_before = 0
        for i, program in enumerate(programs):
            deselected: list[str] = []
            while True:
                copy = work / f"run-{i}"
                copy_project(base, copy)
                if program.label == "README.md":
                    (copy / "_publisher_readme.py").write_text(readme_code(root) or "", encoding="utf-8")
                argv = [sys.executable, call_recorder.__file__, program.label, *program.argv,
                        *(f"--deselect={n}" for n in deselected)]
                done = runner.run(argv, cwd=copy / program.cwd, env={**env, "PYTHONPATH": _pythonpath(copy, discovery)},
                                  log=log, timeout=timeout)
                shutil.rmtree(copy, ignore_errors=True)
                crashed = _crashed(_read_tests(work / "calls.jsonl")) if done.returncode < 0 else None
                if crashed is None or crashed in deselected or len(deselected) >= MAX_CRASHES \
                        or program.argv[:2] != ("-m", "pytest"):
                    break
                deselected.append(crashed)  # the rest of the tests, without the one that took the process down
            lines = _read_lines(work / "calls.jsonl")
            made = len(lines) - lines_before
            lines_before = len(lines)
            outcome = f"{made} call(s)" if made else "no call into the original"
            if deselected:
                outcome += f"; crashed in {', '.join(deselected)}, run again without it"
            if done.timed_out:
                outcome += f"; stopped after {int(timeout)} s"
            elif done.returncode != 0:
                outcome += f"; exited {done.returncode}: {_why(done.output) or done.first_error_line()}"[:300]
            ran.append((program.label, outcome))
        lines = _read_lines(work / "calls.jsonl")
        failures = _failures(_read_tests(work / "calls.jsonl"), root)
    kept = select(lines)
    device = next((_device(c) for c in kept if _device(c) != "cpu"), "cpu" if kept else "")
    shaky = tuple(dict.fromkeys(c["op"] for c in kept if _nondeterministic(c)))
    why = "" if kept else "no program of the project made a call into the original that could be kept"
    skipped: dict[str, int] = {}
    for line in lines:
        if "skipped" in line:
            reason = _LEFT_OUT.get(line["skipped"], line["skipped"])
            skipped[reason] = skipped.get(reason, 0) + 1
    return Recording(tuple(kept), len(lines), tuple(ran), built, why, device, shaky, tuple(skipped.items()),
                     failures)


def _read_tests(path: Path) -> list[dict]:
    """The test outcomes the recorder's pytest plugin wrote, in order."""
    return _read(path, "test")


def _crashed(tests: list[dict]) -> str | None:
    """The test that started last, if nothing was said of it after: it took the process down."""
    last = max((i for i, t in enumerate(tests) if t.get("outcome") == "started"), default=None)
    if last is None or any(t["test"] == tests[last]["test"] for t in tests[last + 1:]):
        return None
    return tests[last]["test"]


def _failures(tests: list[dict], root: Path) -> tuple[tuple[str, str], ...]:
    """The project's tests that failed or crashed with the original, named as adopt carries them under tests/."""
    moved = {t.source: t.target for t in project_tests.find(root)[0]}
    how: dict[str, str] = {}
    for t in tests:
        if t.get("outcome") == "failed":
            how[t["test"]] = "failed"
        elif t.get("outcome") == "started":
            how.setdefault(t["test"], "crashed")
        else:
            how[t["test"]] = how.get(t["test"]) if how.get(t["test"]) == "failed" else "finished"
    out = []
    for node, what in how.items():
        if what in ("failed", "crashed"):
            source, sep, rest = node.partition("::")
            out.append((moved.get(source, source) + sep + rest, what))
    return tuple(out)


# the line that says why a program stopped: pytest's short summary, or a traceback's last line
# why the recorder left a call out, said for the user
_LEFT_OUT = {"large": f"more than {call_recorder.MAX_CALL_BYTES // (1024 * 1024)} MiB of tensors",
             "many": f"past the first {call_recorder.MAX_CALLS} calls of its op in one program"}
_WHY = re.compile(r"^(?:E +\w+(?:Error|Exception)\b|\w+(?:Error|Exception)\b:?).*$", re.M)
_SUMMARY = re.compile(r"^(?:ERROR|FAILED) .*$", re.M)


def _why(output: str) -> str:
    """An error's own line first (what was raised), else pytest's summary line."""
    found = _WHY.findall(output) or _SUMMARY.findall(output)
    return found[-1].removeprefix("E ").strip() if found else ""


def find_programs(root: Path, discovery: Discovery) -> list[Program]:
    """The project's tests (one pytest run), its scripts, its README's Python code."""
    programs: list[Program] = []
    tests, _ = project_tests.find(root)
    test_files = [t.source for t in tests if not t.helper and t.source.endswith(".py")]
    if test_files:
        programs.append(Program(", ".join(test_files[:3]) + (" ..." if len(test_files) > 3 else ""),
                                ("-m", "pytest", "-q", "-p", "no:cacheprovider", *test_files)))
    taken = set(test_files) | {"setup.py"}
    candidates = [p.name for p in sorted(root.glob("*.py"))]
    for folder in _EXAMPLE_DIRS:
        if (root / folder).is_dir():
            candidates += [f"{folder}/{p.name}" for p in sorted((root / folder).glob("*.py"))]
    told = readme_commands(root)
    for rel in candidates:
        name = rel.rsplit("/", 1)[-1]
        if rel in taken or not (_SCRIPT.match(name) or "/" in rel or rel in told) or name.startswith(("_", "setup")):
            continue
        folder, _, _ = rel.rpartition("/")
        for args in told.get(rel) or [()]:  # as the README says to run it, else bare
            programs.append(Program(" ".join([rel, *args]), (name, *args), folder))
    if readme_code(root):
        programs.append(Program("README.md", ("_publisher_readme.py",)))
    return programs


# `python check.py forward`, `python3 benchmark.py {cpu, cuda}` (one run per choice), in README text or blocks
_COMMAND = re.compile(r"(?:^|[`\s])python3? +([\w./-]+\.py)((?: +[^`\n|;&<>$]*)?)")
_CHOICES = re.compile(r"\{([^{}]+)\}")


def readme_commands(root: Path) -> dict[str, list[tuple[str, ...]]]:
    """script (relative to the root) -> the argument lists the README runs it with."""
    text = sources.read_text(root / "README.md") if (root / "README.md").is_file() else None
    found: dict[str, list[tuple[str, ...]]] = {}
    for script, rest in _COMMAND.findall(text or ""):
        script = script.removeprefix("./")
        if re.match(r"(.*/)?setup\w*\.py$", script) or not (root / script).is_file():  # builds, installs: not run
            continue
        choices = _CHOICES.search(rest)
        options = [c.strip() for c in choices.group(1).split(",")] if choices else [None]
        for option in options:
            args = tuple((_CHOICES.sub(option, rest, count=1) if option else rest).split())
            if args not in found.setdefault(script, []):
                found[script].append(args)
    return found


def readme_code(root: Path) -> str | None:
    """The Python blocks of README.md, in order, as one script (a block that is not Python-only is left out)."""
    text = sources.read_text(root / "README.md") if (root / "README.md").is_file() else None
    blocks = [b for b in _FENCE.findall(text or "") if not re.search(r"^\s*[!$%]", b, re.M)]
    return "\n\n".join(blocks) if blocks else None


def select(lines: list[dict]) -> list[dict]:
    """A few calls per op, those of argument shapes not seen yet first, within MAX_BYTES all told."""
    recorded = [c for c in lines if "skipped" not in c and "result" in c]
    by_op: dict[str, list[dict]] = {}
    for call in recorded:
        by_op.setdefault(call["op"], []).append(call)
    kept: list[dict] = []
    size = 0
    for calls in by_op.values():
        seen: set[str] = set()
        fresh = [c for c in calls if not (_signature(c) in seen or seen.add(_signature(c)))]
        ordered = fresh + [c for c in calls if c not in fresh]
        for call in ordered[:PER_OP]:
            n = len(json.dumps(call))
            if size + n <= MAX_BYTES:
                kept.append(call)
                size += n
    return kept


def _signature(call: dict) -> str:
    def sig(v):
        if isinstance(v, dict) and v.get("t") == "tensor":
            return [v["dtype"], v["shape"], v["device"]]
        if isinstance(v, dict) and "items" in v:
            return [sig(i) for i in v["items"]]
        return v if not isinstance(v, dict) else v.get("v")

    return json.dumps([sig(call["args"]), {k: sig(v) for k, v in call["kwargs"].items()}])


def _device(call: dict) -> str:
    def devices(v):
        if isinstance(v, dict) and v.get("t") == "tensor":
            yield v["device"]
        elif isinstance(v, dict) and "items" in v:
            for i in v["items"]:
                yield from devices(i)

    found = [d for d in devices(call["args"]) if d != "cpu"]
    return found[0] if found else "cpu"


def _nondeterministic(call: dict) -> bool:
    spread = call.get("spread")
    return "spread_error" in call or (isinstance(spread, list) and any(s != 0.0 for s in spread))


def _read_lines(path: Path) -> list[dict]:
    """The calls the recorder wrote, in order."""
    return _read(path, "op")


def _read(path: Path, key: str) -> list[dict]:
    """The recorder's JSON lines that name `key` (a line cut short by a killed program is left out)."""
    out = []
    if path.is_file():
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict) and isinstance(entry.get(key), str):
                out.append(entry)
    return out


def _test_overlay(root: Path, discovery: Discovery, programs: list[Program],
                  log: Path | None) -> tuple[Path | None, str]:
    """What the project's tests import and this interpreter lacks (expecttest for torch.testing._internal, say),
    installed into publisher's test overlay, as `publisher test` does for the kernel's tests: (its folder, or why
    it could not be made)."""
    from publisher.errors import EnvironmentProblem
    from publisher.project import test_imports
    from publisher.testing import overlay

    tests, _ = project_tests.find(root)
    texts = {root / "tests" / Path(t.source).name: sources.read_text(root / t.source) or ""
             for t in tests if t.source.endswith(".py")}
    if not texts or not any(p.label.startswith(tuple(t.source for t in tests)) for p in programs):
        return None, ""
    names = [p.name for p in discovery.packages] or [e.module.split(".")[0] for e in discovery.extensions]
    needed = test_imports.undeclared_test_requirements(root, texts, names[0], [], ["cpu"])
    try:
        return overlay.ensure_overlay(needed, log=log) if needed else None, ""
    except EnvironmentProblem as err:
        return None, f"the project's tests need what this interpreter lacks: {err}"


def _environment(base: Path, out: Path, modules: list[str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _SECRET_ENV}  # the project's code needs no Hub token
    env.update({call_recorder.OUT: str(out), call_recorder.MODULES: json.dumps(modules),
                "PYTHONDONTWRITEBYTECODE": "1",
                "TORCH_EXTENSIONS_DIR": env.get("TORCH_EXTENSIONS_DIR") or str(cache_root() / "torch_extensions")})
    return env


def _pythonpath(copy: Path, discovery: Discovery) -> str:
    """The copy's root first (the extension as build_ext --inplace leaves it), the folders holding the packages
    setup.py installs (package_dir), then the caller's: the project as if installed."""
    homes = [str(copy / p.path).removesuffix(p.name.replace(".", "/")).rstrip("/") for p in discovery.packages]
    return os.pathsep.join(dict.fromkeys(p for p in (str(copy), *homes, os.environ.get("PYTHONPATH", "")) if p))


def cache_root() -> Path:
    from publisher import env

    if env.cache_dir():
        return Path(env.cache_dir()) / "originals"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "publisher" / "originals"


def _source_key(base: Path) -> str:
    """The original's sources, the interpreter and torch: what its built extension depends on."""
    digest = hashlib.sha256()
    for rel in sources.walk(base, (".py", ".cpp", ".cc", ".cxx", ".c", ".cu", ".cuh", ".h", ".hpp", ".hh", ".inl")):
        digest.update(rel.encode() + b"\0" + (base / rel).read_bytes() + b"\0")
    probe = runner.run([sys.executable, "-c", "import sys, torch; print(sys.version, torch.__version__, "
                        "torch.version.cuda, torch.cuda.is_available())"], timeout=300)
    digest.update(probe.output.encode() + os.environ.get("TORCH_CUDA_ARCH_LIST", "").encode())
    return digest.hexdigest()[:24]


def _build_setup(base: Path, env: dict[str, str], log: Path | None) -> tuple[str, str]:
    """(how it was built, why it was not): setup.py build_ext --inplace, or the same build's files from the cache."""
    cached = cache_root() / _source_key(base)
    if (cached / "done").is_file():
        for built in cached.rglob("*"):
            if built.is_file() and built.suffix in _BUILT:
                target = base / built.relative_to(cached)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(built, target)
        return f"setup.py build_ext --inplace (cached in {cached})", ""
    before = {p for p in base.rglob("*") if p.suffix in _BUILT}
    done = runner.run([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=base, env=env, log=log,
                      timeout=BUILD_TIMEOUT)
    if not done.ok:
        first = _COMPILER_ERROR.search(done.output)
        said = first.group(0).strip() if first else " | ".join(done.output.strip().splitlines()[-3:])
        why = "timed out" if done.timed_out else f"exit {done.returncode}"
        return "setup.py build_ext --inplace", f"the original did not build here ({why}): {said[:400]}"
    shutil.rmtree(cached, ignore_errors=True)
    for built in sorted({p for p in base.rglob("*") if p.suffix in _BUILT} - before):
        target = cached / built.relative_to(base)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(built, target)
    (cached / "done").write_text("")
    return "setup.py build_ext --inplace", ""
