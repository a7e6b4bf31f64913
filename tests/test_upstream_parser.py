"""One oracle: `check` refuses a build.toml exactly when upstream's own parser
(`kernels._rust.Build.open`, the crate kernel-builder uses) does, on every
real file of the corpus and on hypothesis mutations of them (fields, version
strings, backends, names, dependencies). publisher's own rules are held to
the parser with the parser switched off, so the last word it adds at run time
(PB110) cannot hide a rule that is missing; where publisher refuses more, the
rule is one upstream applies a step later (upstream.LATER_REFUSALS)."""

from __future__ import annotations

import copy
import tempfile
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

import pytest
import tomlkit
import tomllib
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from publisher.project import upstream
from publisher.project.load import load_project
from publisher.project.model import BACKENDS
from publisher.project.versions import version_problem

from corpus_index import BUILD_TOMLS, cases, require_corpus

FILES = sorted(BUILD_TOMLS.glob("*.toml")) if BUILD_TOMLS.is_dir() else []


def _verdict(raw: bytes) -> upstream.UpstreamVerdict:
    return upstream.parse(raw)


@contextmanager
def _own_rules_only():
    with mock.patch.object(upstream, "parse", side_effect=upstream.ParserUnavailable("switched off by the test")):
        yield


def _own_findings(raw: bytes):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "build.toml"
        path.write_bytes(raw)
        with _own_rules_only():
            _, findings = load_project(path, layout=False)
    return findings


def _agree(raw: bytes) -> None:
    """The relation the issue asks for, on one file."""
    verdict = _verdict(raw)
    findings = _own_findings(raw)
    errors = [f for f in findings if f.is_error]
    if not verdict.accepted:
        assert errors, f"publisher's rules pass a file upstream refuses ({verdict.message}):\n{raw.decode(errors='replace')}"
        whole_file = ("PB100", "PB108")  # TOML syntax, not a kernel-builder file: no field to name
        located = [f for f in errors if f.line is not None and f.hint and (f.field or f.code in whole_file)]
        assert located, f"no located, fixable finding for upstream's {verdict.message!r}: {errors}"
    else:
        extra = {f.code for f in errors} - set(upstream.LATER_REFUSALS)
        assert not extra, (f"publisher refuses what upstream accepts: {[(f.code, f.field, f.message) for f in errors]}"
                           f"\n{raw.decode(errors='replace')}")


@pytest.mark.parametrize("path", cases(FILES), ids=[p.stem[-60:] for p in FILES] or None)
def test_check_and_upstream_agree_on_every_corpus_file(path):
    require_corpus()
    _agree(path.read_bytes())


def test_the_corpus_holds_files_both_accept_and_both_refuse():
    require_corpus()
    verdicts = [_verdict(p.read_bytes()).accepted for p in FILES]
    assert verdicts.count(True) > 50 and verdicts.count(False) > 30


# ---- generated files: mutations of the real files upstream accepts ----

ACCEPTED: list[dict] = []  # the small ones: a failing example must stay readable
for _file in (f for f in FILES if f.stat().st_size < 4096):
    try:
        _data = tomllib.loads(_file.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError):
        continue
    if _verdict(_file.read_bytes()).accepted:
        ACCEPTED.append(_data)

_digits = st.one_of(st.integers(0, 30).map(str), st.sampled_from(["0", "00", "+1", "18446744073709551616", "١", "x", ""]))
version_strings = st.one_of(
    st.lists(_digits, min_size=1, max_size=4).map(".".join),
    st.tuples(st.sampled_from(["", " ", "\t", "\u00a0", "\x1c"]), st.lists(_digits, min_size=1, max_size=3).map(".".join),
              st.sampled_from(["", " ", "\n"])).map("".join),
    st.sampled_from(["13", "12", "2", "2.13.0", "13.0.0", "12.8.1", "2.13", "13.0", "12.8", "9.0a", "2.x", " 2 . 13"]),
)
names = st.one_of(st.from_regex(r"[a-zA-Z0-9_\- ]{0,12}", fullmatch=True),
                  st.sampled_from(["relu", "relu_kernel", "Relu", "relu-", "-relu", "r", "r2", "a" * 100, "2relu"]))
DEPENDS = ["torch", "cutlass_2_10", "cutlass_3_6", "cutlass_4_0", "sycl_tla", "metal-cpp", "cutlass_sycl", "cutlass", ""]
PYDEPS = ["einops", "helion", "tvm-ffi", "nvidia-cutlass-dsl", "nki", "onednn", "numpy", "triton", ""]
backend_names = st.sampled_from([*BACKENDS, "mps", "universal", "CUDA", "", "npu"])
kernel_dep = st.fixed_dictionaries({"repo-id": st.sampled_from(["kernels-community/relu", "org/name", "x y", "noslash", ""])},
                                   optional={"version": st.integers(-2, 3), "revision": st.sampled_from(["main", "v1", ""])})
BOUND_FIELDS = [("torch", "minver"), ("torch", "maxver"), ("general", "cuda", "minver"), ("general", "cuda", "maxver"),
                ("torch", "stable-abi")]


def _tables(data: dict, path: tuple = ()) -> list[tuple]:
    found = [path] if isinstance(data, dict) else []
    for key, value in data.items():
        if isinstance(value, dict):
            found += _tables(value, (*path, key))
    return found


def _at(data: dict, path: tuple) -> dict:
    """The table at `path`, made (or made a table again) where a mutation left something else."""
    for key in path:
        if not isinstance(data.get(key), dict):
            data[key] = {}
        data = data[key]
    return data


@st.composite
def mutated(draw) -> bytes:
    data = copy.deepcopy(draw(st.sampled_from(ACCEPTED)))
    for _ in range(draw(st.integers(1, 3))):
        table = data.get("kernel")
        kernels = [k for k, v in table.items() if isinstance(v, dict)] if isinstance(table, dict) else []
        kind = draw(st.sampled_from(["bound", "kernel-bound", "delete", "unknown", "retype", "backends", "kernel-backend",
                                     "name", "kernel-name", "depends", "python-depends", "kernel-depends", "edition"]))
        if kind == "bound":
            *table, key = draw(st.sampled_from(BOUND_FIELDS))
            if isinstance(data.get(table[0]), dict):
                _at(data, tuple(table))[key] = draw(version_strings)
        elif kind == "kernel-bound" and kernels:
            data["kernel"][draw(st.sampled_from(kernels))]["cuda-minver"] = draw(version_strings)
        elif kind == "delete":
            path = draw(st.sampled_from(_tables(data)))
            table = _at(data, path)
            if table:
                del table[draw(st.sampled_from(sorted(table)))]
        elif kind == "unknown":
            path = draw(st.sampled_from(_tables(data)))
            _at(data, path)[draw(st.sampled_from(["universal", "language", "repo-id", "minver", "cuda-minver", "pyext",
                                                  "src", "capabilities", "backend", "foo"]))] = "x"
        elif kind == "retype":
            path = draw(st.sampled_from(_tables(data)))
            table = _at(data, path)
            if table:
                key = draw(st.sampled_from(sorted(table)))
                table[key] = draw(st.sampled_from([1, "1", ["1"], True, {"a": "b"}]))
        elif kind == "backends":
            _at(data, ("general",))["backends"] = draw(st.lists(backend_names, max_size=4))
        elif kind == "kernel-backend" and kernels:
            data["kernel"][draw(st.sampled_from(kernels))]["backend"] = draw(backend_names)
        elif kind == "name":
            _at(data, ("general",))["name"] = draw(names)
        elif kind == "kernel-name" and kernels:
            old = draw(st.sampled_from(kernels))
            data["kernel"][draw(names)] = data["kernel"].pop(old)
        elif kind == "depends" and kernels:
            data["kernel"][draw(st.sampled_from(kernels))]["depends"] = draw(st.lists(st.sampled_from(DEPENDS), max_size=3))
        elif kind == "python-depends":
            table = draw(st.sampled_from([("general",), ("general", "cuda"), ("general", "xpu"), ("general", "neuron")]))
            _at(data, table)["python-depends"] = draw(st.lists(st.sampled_from(PYDEPS), max_size=3))
        elif kind == "kernel-depends":
            table = draw(st.sampled_from([("general",), ("general", "cuda")]))
            _at(data, table)["kernel-depends"] = draw(st.lists(kernel_dep, max_size=2))
        elif kind == "edition":
            general = _at(data, ("general",))
            value = draw(st.sampled_from([None, 4, 5, 6, "5"]))
            if value is None:
                general.pop("edition", None)
            else:
                general["edition"] = value
    return tomlkit.dumps(data).encode("utf-8")


@settings(max_examples=250, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
@given(raw=mutated())
def test_check_and_upstream_agree_on_mutated_real_files(raw):
    require_corpus()
    _agree(raw)


@pytest.mark.slow
@settings(max_examples=3000, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(raw=mutated())
def test_check_and_upstream_agree_on_many_more_mutations(raw):
    require_corpus()
    _agree(raw)


# ---- version strings, field by field ----

def _bound_file(value: str) -> bytes:
    return (f'[general]\nname = "relu"\nversion = 1\nlicense = "mit"\nbackends = ["cuda"]\nedition = 5\n'
            f'[torch]\nsrc = ["a.cpp"]\nminver = {tomlkit.string(value).as_string()}\n'
            '[kernel.relu]\nbackend = "cuda"\ndepends = ["torch"]\nsrc = ["k.cu"]\n').encode()


@settings(max_examples=300, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
@given(value=st.one_of(version_strings, st.text(alphabet="0123456789.+- \t\u00a0", max_size=8)))
def test_a_version_bound_is_read_exactly_as_upstream_reads_it(value):
    assert (version_problem(value) is None) == _verdict(_bound_file(value)).accepted, value


# ---- upstream's parser at run time ----

def test_check_reports_upstreams_refusal_where_its_own_rules_miss_it(tmp_path):
    """Were publisher's rules to pass a file upstream refuses, upstream's message
    comes out located (a miss is simulated: the value rules are taken away)."""
    text = ('[general]\nname = "relu"\nversion = 1\nlicense = "mit"\nbackends = ["cpu"]\nedition = 5\n'
            '[torch]\nsrc = ["a.cpp"]\n\n[kernel.relu]\nbackend = "cpu"\ndepends = ["torch", "cutlass_sycl"]\nsrc = ["k.cpp"]\n')
    (tmp_path / "build.toml").write_text(text)
    with mock.patch("publisher.project.load.check_values", return_value=[]):
        project, findings = load_project(tmp_path / "build.toml", layout=False)
    [refused] = [f for f in findings if f.is_error]
    assert project is None and refused.code == "PB110"
    assert "cutlass_sycl" in refused.message and refused.line == 12 and refused.file == str(tmp_path / "build.toml")
    assert str(tmp_path) not in refused.message  # upstream's temporary folder is not shown


@pytest.mark.parametrize("problem", [ImportError("No module named 'kernels'"), OSError("undefined symbol: PyInit")])
def test_check_runs_on_its_own_rules_without_kernels(tmp_path, problem):
    text = ('[general]\nname = "relu"\nversion = 1\nlicense = "mit"\nbackends = ["cpu"]\nedition = 5\n'
            '[torch]\nsrc = ["a.cpp"]\nminver = "2"\n[kernel.relu]\nbackend = "cpu"\ndepends = ["torch"]\nsrc = ["k.cpp"]\n')
    (tmp_path / "build.toml").write_text(text)
    broken = mock.MagicMock()
    type(broken).Build = mock.PropertyMock(side_effect=problem)
    with mock.patch.dict("sys.modules", {"kernels._rust": broken}):
        _, findings = load_project(tmp_path / "build.toml", layout=False)
        assert [f.code for f in findings if f.is_error] == ["PB109"]  # its own rule still finds it
        (tmp_path / "build.toml").write_text(text.replace('"2"', '"2.12"'))
        project, findings = load_project(tmp_path / "build.toml", layout=False)
    note = [f for f in findings if f.code == "PB111"]
    assert project is not None and len(note) == 1 and type(problem).__name__ in note[0].message


def test_upstreams_own_notes_do_not_reach_the_user_and_a_closed_stderr_is_no_problem(tmp_path):
    import subprocess
    import sys

    v4 = ('[general]\nname = "relu"\nversion = 1\nlicense = "mit"\nbackends = ["cpu"]\n'
          '[torch]\nsrc = ["a.cpp"]\n[kernel.relu]\nbackend = "cpu"\ndepends = ["torch"]\nsrc = ["k.cpp"]\n')
    (tmp_path / "build.toml").write_text(v4)
    shown = subprocess.run([sys.executable, "-m", "publisher", "check", str(tmp_path / "build.toml")],
                           capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0 and "PB102" in shown.stdout  # publisher's own words for the v4 upgrade
    assert "update-build" not in shown.stdout + shown.stderr  # upstream's note, on file descriptor 2, is not shown
    closed = subprocess.run([sys.executable, "-c", "import os, sys; os.close(2); from publisher.cli import main; "
                             f"sys.exit(main(['check', {str(tmp_path / 'build.toml')!r}]))"],
                            stdout=subprocess.PIPE, text=True, timeout=120)
    assert closed.returncode == 0 and "PB102" in closed.stdout
