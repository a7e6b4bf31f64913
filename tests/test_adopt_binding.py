"""The pybind11 module read and ported (publisher/adopt/binding.py): op
schemas from the bound functions' signatures, what stays behind at its line,
and a port that a second run reads back to the author's original."""

from __future__ import annotations

from publisher.adopt import binding, cpp

from adopt_fixtures import BINDING_CPP, HANDS_CPP, OPS_H


def _lookup(*files: tuple[str, str]):
    def find(name):
        return [(rel, text, d) for rel, text in files for d in cpp.find_declarations(text, cpp.mask(text), name)]
    return find


def _read(text, *headers, defines=("MINI_FAST",)):
    return binding.read_binding("binding.cpp", text, _lookup(("binding.cpp", text), *headers), defines)


def test_each_m_def_becomes_an_op_with_the_schema_of_its_function():
    read = _read(BINDING_CPP, ("ops.h", OPS_H))
    schemas = {op.name: op.schema() for op in read.ops}
    assert schemas == {
        "scale": "scale(Tensor x, float factor=2.0) -> Tensor",
        "add_into": "add_into(Tensor(a!) out, Tensor a, Tensor b) -> ()",
        "split_sign": "split_sign(Tensor x) -> (Tensor, Tensor)",
        "maybe_bias": "maybe_bias(Tensor x, Tensor? bias=None, bool twice=False) -> Tensor",
        "sum_dims": "sum_dims(Tensor x, int[] dims) -> Tensor",
        "count": "count(Tensor x, int times) -> int",
        "by_mode": 'by_mode(Tensor x, *, str mode="double") -> Tensor',
    }
    assert read.findings == ()
    assert {op.name for op in read.ops if op.needs_shim} == {"scale", "count"}  # float and int parameters
    assert read.ops[0].doc == "x times factor" and read.ops[0].line == 8


def test_an_m_def_under_a_condition_the_build_does_not_meet_is_left_out_like_the_compiler_would():
    read = _read(BINDING_CPP, ("ops.h", OPS_H), defines=())
    assert "by_mode" not in {op.name for op in read.ops}


def test_what_no_op_can_carry_is_listed_at_its_line_and_the_rest_is_ported():
    read = _read(HANDS_CPP)
    assert [op.name for op in read.ops] == ["good"]
    found = {(f.code, f.line) for f in read.findings}
    assert ("PA111", 12) in found  # the lambda
    assert ("PA112", 13) in found  # the overload
    assert ("PA111", 15) in found  # py::class_
    assert ("PA111", 16) in found  # m.attr
    assert any(f.line == 6 and "pybind11::object" in f.message for f in read.findings)  # takes_object and its use
    assert all(f.is_error for f in read.findings)


def test_the_port_guards_pybind11_and_registers_the_kernels_beside_the_module():
    read = _read(BINDING_CPP, ("ops.h", OPS_H))
    ported = binding.port_binding(read, ("cpu",), "torch-ext/torch_binding.cpp")
    assert "#ifdef Py_LIMITED_API" in ported and "TORCH_LIBRARY_IMPL_EXPAND(TORCH_EXTENSION_NAME, CPU, ops)" in ported
    assert 'ops.impl("add_into", &add_into);' in ported
    # float through a shim taking double, as the dispatcher requires
    assert 'ops.impl("scale", [](const at::Tensor& x, double factor) { return scale(x, static_cast<float>(factor)); });' \
        in ported
    # the original module stays, whole, for the project's own setup.py build
    assert BINDING_CPP[BINDING_CPP.index("PYBIND11_MODULE"):].rstrip() in ported
    # what the limited API refuses is only reached without Py_LIMITED_API: publisher check's PB407 finds nothing
    from publisher.project.abi3 import refused_lines
    assert refused_lines(ported) == []
    assert refused_lines(BINDING_CPP) != []


def test_a_ported_file_reads_back_as_the_original_so_a_second_port_changes_nothing():
    read = _read(BINDING_CPP, ("ops.h", OPS_H))
    ported = binding.port_binding(read, ("cpu",), "torch-ext/torch_binding.cpp")
    assert binding.unport(ported) == BINDING_CPP
    again = _read(binding.unport(ported), ("ops.h", OPS_H))
    assert binding.port_binding(again, ("cpu",), "torch-ext/torch_binding.cpp") == ported


def test_headers_get_their_pybind11_includes_guarded_even_inside_an_include_guard():
    header = "#ifndef OPS_H\n#define OPS_H\n#include <torch/extension.h>\n#include <pybind11/stl.h>\nint f();\n#endif\n"
    guarded = binding.guard_includes(header)
    assert guarded.count("#ifdef Py_LIMITED_API") == 1  # the two includes guarded together
    assert "#include <torch/all.h>" in guarded and binding.unport(guarded) == header
    assert binding.guard_includes(guarded) == guarded
    # an include the author already put under a condition of their own is theirs
    optional = "#ifdef WITH_PYTHON\n#include <torch/extension.h>\n#endif\n"
    assert binding.guard_includes(optional) == optional


def test_ops_for_several_backends_register_per_backend_and_tensorless_ops_once():
    text = ("#include <torch/extension.h>\nint64_t version() { return 3; }\n"
            "torch::Tensor neg(torch::Tensor x) { return -x; }\n"
            "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def(\"version\", &version); m.def(\"neg\", &neg); }\n")
    read = _read(text)
    ported = binding.port_binding(read, ("cpu", "cuda"), "torch-ext/torch_binding.cpp")
    assert "#if defined(CPU_KERNEL)" in ported and "#elif defined(CUDA_KERNEL)" in ported
    assert "TORCH_LIBRARY_IMPL_EXPAND(TORCH_EXTENSION_NAME, CompositeExplicitAutograd, ops)" in ported
    assert binding.unport(ported) == text


def test_the_defs_file_lists_each_schema_with_where_it_came_from():
    read = _read(BINDING_CPP, ("ops.h", OPS_H))
    text = binding.defs_file_text(read.ops, "mini_ops._C", ["csrc/binding.cpp"])
    assert text.startswith("// Written by publisher adopt")
    assert 'ops.def("scale(Tensor x, float factor=2.0) -> Tensor");' in text
    assert 'ops.def("by_mode(Tensor x, *, str mode=\\"double\\") -> Tensor");' in text
    assert "REGISTER_EXTENSION(TORCH_EXTENSION_NAME)" in text and "binding.cpp:8: x times factor" in text


def test_an_optional_tensor_taken_by_reference_is_a_mutable_optional_through_a_shim():
    # causal-conv1d: `c10::optional<at::Tensor> &final_states_out_` (pybind11 passes a copy; so does the shim)
    text = ("#include <torch/extension.h>\n"
            "void fwd(const at::Tensor &x, at::Tensor &out, c10::optional<at::Tensor> &final_states_out_, bool silu) {}\n"
            "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def(\"fwd\", &fwd); }\n")
    (op,) = _read(text).ops
    assert op.schema() == "fwd(Tensor x, Tensor(a!) out, Tensor(b!)? final_states_out_, bool silu) -> ()"
    ported = binding.port_binding(_read(text), ("cuda",), "torch-ext/torch_binding.cpp")
    assert ("const std::optional<at::Tensor>& final_states_out_, bool silu) { c10::optional<at::Tensor> "
            "final_states_out__arg(final_states_out_); fwd(x, out, final_states_out__arg, silu); }") in ported


def test_one_module_per_build_flavour_is_ported_as_each_flavour_compiles_it(tmp_path):
    """`#ifdef USE_CUDA` module / `#else` module: no PA111 (only one is compiled); each block registers its own
    function in the variants of its flavour, inside its own branch."""
    import json

    from adopt_fixtures import write_flavours_project
    from cli_helper import run_cli

    root = write_flavours_project(tmp_path / "flavours")
    done = run_cli("adopt", str(root), "--force", "--json")
    assert done.returncode == 0, done.output
    report = json.loads(done.stdout)
    assert not [f for f in report["findings"] if f["code"] == "PA111"], report["findings"]
    ported = (root / "csrc/ops.cpp").read_text()
    cuda_part = ported[ported.index("#ifdef USE_CUDA"):ported.index("&scale_cuda, \"scale (CUDA)\")")]
    cpu_part = ported[ported.index("&scale_cuda, \"scale (CUDA)\")"):]
    assert "TORCH_LIBRARY_IMPL_EXPAND(TORCH_EXTENSION_NAME, CUDA, ops) {\n  ops.impl(\"scale\", &scale_cuda);" in cuda_part
    assert "TORCH_LIBRARY_IMPL_EXPAND(TORCH_EXTENSION_NAME, CPU, ops) {\n  ops.impl(\"scale\", &scale_cpu);" in cpu_part
    assert "scale_cpu);" not in cuda_part and "&scale_cuda);" not in cpu_part
    # a second adopt reads the file as the author wrote it, and ports it the same way
    again = run_cli("adopt", str(root), "--force")
    assert again.returncode == 0, again.output
    assert (root / "csrc/ops.cpp").read_text() == ported
