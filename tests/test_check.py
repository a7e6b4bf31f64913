"""`check` on small build.toml files, one problem at a time: the finding a user
gets (code, field, line, hint) and whether the project loads."""

from __future__ import annotations

import textwrap

import pytest

from publisher.project.archs import check_archs
from publisher.project.load import load_project

GOOD = """\
[general]
name = "relu-kernel"
version = 1
edition = 5
license = "apache-2.0"
backends = ["cpu", "cuda"]

[general.hub]
repo-id = "my-org/relu-kernel"

[torch]
src = ["torch-ext/torch_binding.cpp"]

[kernel.relu_cpu]
backend = "cpu"
depends = ["torch"]
src = ["relu_cpu/relu.cpp"]

[kernel.relu_cuda]
backend = "cuda"
depends = ["torch"]
cuda-capabilities = ["8.0", "9.0"]
src = ["relu_cuda/relu.cu"]
"""


def check(tmp_path, text: str):
    path = tmp_path / "build.toml"
    path.write_text(textwrap.dedent(text))
    return load_project(path)


def errors(findings):
    return [f for f in findings if f.is_error]


def only(findings, code):
    found = [f for f in findings if f.code == code]
    assert found, [(f.code, f.message) for f in findings]
    return found[0]


def test_good_file_loads(tmp_path):
    project, findings = check(tmp_path, GOOD)
    assert not errors(findings) and not [f for f in findings if f.severity.value == "warning"]
    assert project.config.edition == 5
    assert project.python_name == "relu_kernel"
    assert [k.name for k in project.config.kernels_for("cuda")] == ["relu_cuda"]
    assert project.config.kernels_for("cuda")[0].cuda_capabilities == ("8.0", "9.0")
    assert project.root is None  # a lone build.toml is config only


def test_architectures_are_reported_per_toolkit(tmp_path):
    _, findings = check(tmp_path, GOOD)
    info = only(findings, "PB305")
    assert "relu_cuda" in info.message and "CUDA 13.0: 8.0 9.0" in info.message


@pytest.mark.parametrize("old, new, code, field, line", [
    ('name = "relu-kernel"', 'name = "relu_kernel"', "PB201", "general.name", 2),
    ('name = "relu-kernel"', 'name = "Relu"', "PB201", "general.name", 2),
    ("version = 1", 'version = "1"', "PB106", "general.version", 3),
    ("version = 1", "version = -1", "PB202", "general.version", 3),
    ("edition = 5", "edition = 6", "PB101", "general.edition", 4),
    ("edition = 5", 'edition = "5"', "PB106", "general.edition", 4),
    ('backends = ["cpu", "cuda"]', 'backends = ["cpu", "cuda", "mps"]', "PB204", "general.backends", 6),
    ('repo-id = "my-org/relu-kernel"', 'repo-id = "relu kernel"', "PB213", "general.hub.repo-id", 9),
    ('depends = ["torch"]\nsrc = ["relu_cpu/relu.cpp"]', 'depends = ["torch", "cutlass_sycl"]\nsrc = ["relu_cpu/relu.cpp"]',
     "PB206", "kernel.relu_cpu.depends", 16),
    ('backend = "cpu"', 'backend = "cpux"', "PB204", "kernel.relu_cpu.backend", 15),
    ('cuda-capabilities = ["8.0", "9.0"]', 'cuda-capabilities = ["99999.0"]', "PB302", "kernel.relu_cuda.cuda-capabilities", 22),
    ('cuda-capabilities = ["8.0", "9.0"]', 'cuda-capabilities = "8.0"', "PB106", "kernel.relu_cuda.cuda-capabilities", 22),
    ('cuda-capabilities = ["8.0", "9.0"]', 'rocm-archs = ["gfx942"]', "PB104", "kernel.relu_cuda.rocm-archs", 22),
    ('src = ["relu_cuda/relu.cu"]', "src = []", "PB212", "kernel.relu_cuda.src", 23),
    ('src = ["relu_cuda/relu.cu"]', "", "PB105", "kernel.relu_cuda.src", 19),
])
def test_one_problem_one_finding(tmp_path, old, new, code, field, line):
    assert old in GOOD
    project, findings = check(tmp_path, GOOD.replace(old, new, 1))
    f = only(findings, code)
    assert f.field == field
    assert f.line == line
    assert f.hint
    assert project is None


@pytest.mark.parametrize("old, new, code, field, line", [
    ('license = "apache-2.0"', 'license = ""', "PB112", "general.license", 5),
    ('backends = ["cpu", "cuda"]', "backends = []", "PB112", "general.backends", 6),
    ('name = "relu-kernel"', f'name = "{"r" * 97}"', "PB113", "general.name", 2),
])
def test_what_upstreams_parser_accepts_is_at_most_a_warning(tmp_path, old, new, code, field, line):
    project, findings = check(tmp_path, GOOD.replace(old, new, 1))
    f = only(findings, code)
    assert (f.field, f.line, f.severity.value) == (field, line, "warning") and f.hint
    assert project is not None


def test_unknown_key_suggests_the_right_one(tmp_path):
    _, findings = check(tmp_path, GOOD.replace('license = "apache-2.0"', 'licence = "apache-2.0"'))
    f = only(findings, "PB104")
    assert f.field == "general.licence" and "license" in f.hint and f.line == 5
    missing = only(findings, "PB105")
    assert missing.field == "general.license"


def test_unknown_table_and_moved_key(tmp_path):
    text = GOOD.replace("[general.hub]\n", "[genral.hub]\n") + '\n[general.extra]\nx = 1\n'
    _, findings = check(tmp_path, text)
    fields = {f.field for f in findings if f.code == "PB104"}
    assert {"genral", "general.extra"} <= fields
    _, findings = check(tmp_path, GOOD.replace("[general.hub]\n", ""))
    moved = [f for f in findings if f.field == "general.repo-id"]
    assert moved and "[general.hub]" in moved[0].hint


def test_framework_table_count(tmp_path):
    _, findings = check(tmp_path, GOOD + "\n[torch-noarch]\n")
    assert only(findings, "PB107").line is not None
    _, findings = check(tmp_path, GOOD.replace('[torch]\nsrc = ["torch-ext/torch_binding.cpp"]\n', ""))
    assert "found none" in only(findings, "PB107").message


def test_python_depends_are_curated_per_backend(tmp_path):
    text = GOOD.replace('backends = ["cpu", "cuda"]', 'backends = ["cpu", "cuda"]\npython-depends = ["einops", "nvidia-cutlass-dsl", "triton"]')
    _, findings = check(tmp_path, text)
    messages = {f.message: f for f in findings if f.code == "PB207"}
    assert len(messages) == 2
    cutlass = next(f for m, f in messages.items() if "nvidia-cutlass-dsl" in m)
    assert "[general.cuda]" in cutlass.hint
    ok = GOOD + '\n[general.cuda]\npython-depends = ["nvidia-cutlass-dsl"]\n'
    assert not errors(check(tmp_path, ok)[1])


def test_kernel_depends_need_exactly_one_of_version_or_revision(tmp_path):
    text = GOOD.replace('backends = ["cpu", "cuda"]',
                        'backends = ["cpu", "cuda"]\nkernel-depends = [{ repo-id = "org/dep" }, { repo-id = "bad", version = 1 }]')
    _, findings = check(tmp_path, text)
    problems = [f.message for f in findings if f.code == "PB208"]
    assert any("neither" in m for m in problems) and any("`bad`" in m for m in problems)
    text = GOOD.replace('backends = ["cpu", "cuda"]', 'backends = ["cpu", "cuda"]\nkernel-depends = [{ repo-id = "org/dep", revision = "abc123" }]')
    project, findings = check(tmp_path, text)
    assert project.config.general.kernel_depends[0].revision == "abc123"


@pytest.mark.parametrize("url, ok", [
    ("https://github.com/org/repo", True),
    ("git@github.com:org/repo.git", True),
    ("git+ssh://git@github.com/org/repo.git", True),
    ("ftp://example.com/repo.git", False),
    ("not a url", False),
    ("file:///home/user/repo", False),
])
def test_git_urls(tmp_path, url, ok):
    _, findings = check(tmp_path, GOOD.replace('backends = ["cpu", "cuda"]', f'backends = ["cpu", "cuda"]\nupstream = "{url}"'))
    assert (not [f for f in findings if f.code == "PB209"]) == ok


def test_version_bounds(tmp_path):
    text = GOOD + '\n[general.cuda]\nminver = "13.0"\nmaxver = "12.8"\n'
    project, findings = check(tmp_path, text)
    crossed = only(findings, "PB210")  # upstream's parser accepts it; nothing is built
    assert crossed.field == "general.cuda.minver" and crossed.severity.value == "warning" and project is not None
    text = GOOD.replace('[torch]\n', '[torch]\nminver = "2.x"\n')
    assert only(check(tmp_path, text)[1], "PB109").field == "torch.minver"


def test_an_unknown_capability_is_a_warning_while_others_remain(tmp_path):
    # upstream's parser accepts it and the build's intersection drops it (megablocks lists "11.8")
    project, findings = check(tmp_path, GOOD.replace('["8.0", "9.0"]', '["8.0", "11.8"]'))
    unknown = only(findings, "PB301")
    assert unknown.severity.value == "warning" and unknown.line == 22 and "11.8" in unknown.message
    assert project is not None


def test_cuda_bounds_limit_the_toolkits_checked(tmp_path):
    # 12.0a only exists for toolkits whose defaults include 12.0; with maxver 12.6 none do
    text = GOOD.replace('["8.0", "9.0"]', '["12.0a"]') + '\n[general.cuda]\nmaxver = "12.6"\n'
    f = only(check(tmp_path, text)[1], "PB302")
    assert "CUDA 12.6" in f.message and "7.0" in f.message


def test_v4_file_is_upgraded_in_memory_with_a_warning(tmp_path):
    project, findings = check(tmp_path, GOOD.replace("edition = 5\n", ""))
    warning = only(findings, "PB102")
    assert "publisher migrate" in warning.hint and warning.line == 1
    assert project is not None and project.config.edition == 4


def test_v4_file_may_not_use_edition_5_keys(tmp_path):
    text = GOOD.replace("edition = 5\n", "") + '\n[general.tpu]\npython-depends = []\n'
    assert only(check(tmp_path, text)[1], "PB104").field == "general.tpu"


def test_v3_file_is_refused_with_migrate_options(tmp_path):
    text = GOOD.replace("edition = 5\n", "").replace("version = 1\n", "").replace('license = "apache-2.0"\n', "")
    project, findings = check(tmp_path, text)
    f = only(findings, "PB103")
    assert project is None
    assert "--license" in f.hint and "--version" in f.hint


def test_stable_abi_forms(tmp_path):
    text = GOOD.replace("[torch]\n", '[torch]\nstable-abi = "2.10"\n')
    project, _ = check(tmp_path, text)
    assert project.config.framework.stable_abi == {"cpu": "2.10", "cuda": "2.10"}
    text = GOOD.replace("[torch]\n", '[torch]\nstable-abi = { cuda = "2.10", gpu = "2.10" }\n')
    assert only(check(tmp_path, text)[1], "PB204").field == "torch.stable-abi.gpu"


def test_noarch_keys_use_underscores(tmp_path):
    text = textwrap.dedent("""\
        [general]
        name = "py-kernel"
        version = 1
        edition = 5
        license = "mit"
        backends = ["cuda", "rocm"]

        [torch-noarch]
        cuda_capabilities = ["8.0", "9.0"]
        rocm_archs = ["gfx942"]
    """)
    project, findings = check(tmp_path, text)
    assert not errors(findings)
    assert project.config.framework.cuda_capabilities == ("8.0", "9.0")
    _, findings = check(tmp_path, text.replace("cuda_capabilities", "cuda-capabilities"))
    assert "cuda_capabilities" in only(findings, "PB104").hint


def test_license_warning_is_not_an_error(tmp_path):
    project, findings = check(tmp_path, GOOD.replace('"apache-2.0"', '"Apache 2"'))
    assert only(findings, "PB203").severity.value == "warning"
    assert project is not None
    project, findings = check(tmp_path, GOOD.replace('"apache-2.0"', '"BSD-3-Clause AND MIT"'))
    assert not [f for f in findings if f.code == "PB203"]


def test_archs_with_inline_toolkits():
    data = {"general": {"backends": ["cuda", "rocm"]},
            "kernel": {"k": {"backend": "cuda", "cuda-capabilities": ["7.0", "5.0"]},
                       "r": {"backend": "rocm", "rocm-archs": ["gfx1100", "gfx99999"]}}}
    cuda = {"12.8": ("7.0", "8.0", "9.0+PTX"), "13.0": ("7.5", "8.0", "9.0", "12.1+PTX")}
    rocm = {"7.1": ("gfx942",)}
    findings = check_archs(data, cuda, rocm)
    codes = [f.code for f in findings]
    assert "PB303" in codes  # gfx99999 does not exist
    empty_rocm = only(findings, "PB304")
    assert "ROCm 7.1" in empty_rocm.message and "gfx942" in empty_rocm.message
    # 7.0 is kept by 12.8 and (as the highest 7.x <= 7.5) by 13.0; 5.0 by none
    assert only(findings, "PB306").message.count("5.0") == 1
    info = only(findings, "PB305")
    assert "CUDA 12.8: 7.0" in info.message and "CUDA 13.0: 7.0" in info.message
