"""Reading C++ without a compiler (publisher/adopt/cpp.py) and its types as op
schema types (publisher/adopt/types.py)."""

from __future__ import annotations

import pytest

from publisher.adopt import cpp, types

SOURCE = """\
#include <torch/extension.h>
// int fake(int x);  a declaration in a comment is not one
const char* s = "int also_fake(int x);";
namespace outer { namespace inner {
at::Tensor nested(const at::Tensor& x, double eps = 1e-6f);
}}
static inline torch::Tensor local(torch::Tensor x) { return x; }
extern "C" void launch(float* out, int n);
template <typename T> T templated(T x) { return x; }
torch::Tensor uses() { return local(torch::ones({1})); }
"""


def _declared(name):
    return cpp.find_declarations(SOURCE, cpp.mask(SOURCE), name)


def test_mask_blanks_comments_and_literals_but_keeps_offsets_and_lines():
    masked = cpp.mask(SOURCE)
    assert len(masked) == len(SOURCE) and masked.count("\n") == SOURCE.count("\n")
    assert "fake" not in masked and "also_fake" not in masked
    assert "nested" in masked


def test_declarations_are_found_at_namespace_scope_only():
    assert _declared("fake") == [] and _declared("also_fake") == []
    (nested,) = _declared("nested")
    assert nested.namespace == ("outer", "inner") and nested.return_type == "at::Tensor"
    assert nested.params == ("const at::Tensor& x", "double eps = 1e-6f")
    (local,) = _declared("local")  # the call inside uses() is not a declaration
    assert "static" in local.specifiers and local.is_definition
    (launch,) = _declared("launch")
    assert launch.namespace == () and launch.return_type == "void"
    (templated,) = _declared("templated")
    assert "template" in templated.specifiers


def test_parameters_split_into_type_name_and_default():
    p = cpp.parse_parameter("const c10::optional<torch::Tensor>& bias = c10::nullopt")
    assert (p.type, p.name, p.default) == ("const c10::optional<torch::Tensor>&", "bias", "c10::nullopt")
    assert cpp.parse_parameter("unsigned int").name is None  # an unnamed parameter
    assert cpp.parse_parameter("std::tuple<int, float> t").type == "std::tuple<int, float>"


@pytest.mark.parametrize("written, schema, mutable, shim", [
    ("torch::Tensor", "Tensor", False, False),
    ("const at::Tensor&", "Tensor", False, False),
    ("torch::Tensor&", "Tensor", True, False),
    ("const c10::optional<torch::Tensor>&", "Tensor?", False, False),
    ("std::optional<at::Tensor>", "Tensor?", False, False),
    ("double", "float", False, False),
    ("float", "float", False, True),
    ("int64_t", "int", False, False),
    ("int", "int", False, True),
    ("unsigned int", "int", False, True),
    ("bool", "bool", False, False),
    ("const std::string&", "str", False, False),
    ("c10::string_view", "str", False, False),
    ("std::vector<int64_t>", "int[]", False, False),
    ("at::IntArrayRef", "int[]", False, False),
    ("std::vector<int>", "int[]", False, True),
    ("const std::vector<torch::Tensor>&", "Tensor[]", False, False),
    ("c10::optional<float>", "float?", False, True),
    ("at::ScalarType", "ScalarType", False, False),
])
def test_parameter_types_become_schema_types(written, schema, mutable, shim):
    parsed = types.parse(written)
    assert (parsed.schema, parsed.mutable, parsed.needs_shim) == (schema, mutable, shim)


def test_return_types():
    assert types.parse("void", is_return=True).schema == "()"
    assert types.parse("std::tuple<torch::Tensor, torch::Tensor>", is_return=True).schema == "(Tensor, Tensor)"
    assert types.parse("std::vector<at::Tensor>", is_return=True).schema == "Tensor[]"


@pytest.mark.parametrize("written", ["float*", "py::object", "pybind11::array_t<float>", "MyStruct", "int&",
                                     "std::map<int, int>", "torch::Tensor&&"])
def test_types_no_schema_can_carry_are_refused_with_a_reason(written):
    with pytest.raises(types.Unsupported) as refused:
        types.parse(written)
    assert str(refused.value)


def test_shims_convert_to_what_the_function_wants():
    assert types.parse("float").shim_type() == "double"
    assert types.parse("float").convert("eps") == "static_cast<float>(eps)"
    assert types.parse("std::vector<int>").convert("d") == "std::vector<int>(d.begin(), d.end())"
    assert types.parse("torch::Tensor&").shim_type() == "at::Tensor&"


@pytest.mark.parametrize("written, value, schema", [
    ("double", "1e-6", "1e-06"), ("float", "1e-6f", "1e-06"), ("int64_t", "-1", "-1"), ("bool", "true", "True"),
    ("const c10::optional<torch::Tensor>&", "c10::nullopt", "None"), ("c10::optional<torch::Tensor>", "py::none()", "None"),
    ("const std::string&", '"mean"', '"mean"'), ("std::vector<int64_t>", "{1, 2}", "[1, 2]"),
])
def test_default_values_in_schema_spelling(written, value, schema):
    assert types.schema_default(types.parse(written), value) == schema


def test_a_default_that_is_an_expression_is_not_carried():
    assert types.schema_default(types.parse("double"), "kEps * 2") is None


def test_a_comment_between_parameters_is_not_part_of_the_next_one():
    # longcw/RoIAlign.pytorch: `torch::Tensor boxes,  // [y1,x1,y2,x2]` then `torch::Tensor box_index` on the next line
    text = ("void forward(torch::Tensor image,\n    torch::Tensor boxes,  // [y1,x1,y2,x2]\n"
            "    torch::Tensor box_index,  /* [n] */ const std::string& mode = \"a // b\") {}\n")
    (decl,) = cpp.find_declarations(text, cpp.mask(text), "forward")
    assert decl.params == ("torch::Tensor image", "torch::Tensor boxes", "torch::Tensor box_index",
                           'const std::string& mode = "a // b"')
