"""What an op's own C++ says of its tensor arguments, read from the bound
function's definition (its one-argument check macros expanded): the dtype it
checks or reads its data as (`CHECK_IS_INT(idx)` -> `idx.scalar_type() ==
at::ScalarType::Int`, `idx.data_ptr<int>()`, `x.accessor<int64_t, 2>()`),
its rank (`x.dim() == 3`, an accessor's), sizes it requires (`x.size(2) ==
3`, `idx.size(0) == src.size(0)`) and a CPU tensor where it checks for one
(`CHECK_CPU(x)` -> `TORCH_CHECK(!x.device().is_cuda(), ...)`: CPU code built
into a CUDA extension). What the function hands to helpers is not followed. The facts are in resources/adopt_inputs.yaml."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache

from publisher.adopt import cpp
from publisher.adopt.model import Op
from publisher.data import read_yaml


@cache
def _facts() -> dict:
    return read_yaml("adopt_inputs.yaml")


@dataclass(frozen=True)
class Expected:
    """What the C++ requires of one tensor argument; None where it says nothing."""

    dtype: str | None = None
    rank: int | None = None
    dims: tuple[tuple[int, object], ...] = ()  # (index, a literal size or ("size", other argument, index))
    least_rank: int | None = None  # the dimensions it reads (`x.size(2)`: at least 3)
    device: str | None = None  # "cpu": it checks the tensor is not on CUDA (CHECK_CPU: CPU code in a CUDA build)


_MACRO = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(\w+)\([ \t]*(\w+)[ \t]*\)((?:[^\n]*\\\n)*[^\n]*)", re.M)


def _macros(texts: Mapping[str, str]) -> dict[str, tuple[str, str]]:
    out = {}
    for text in texts.values():
        for m in _MACRO.finditer(text):
            out[m.group(1)] = (m.group(2), m.group(3).replace("\\\n", " "))
    return out


def _expand(body: str, macros: dict[str, tuple[str, str]]) -> str:
    def replace(m: re.Match) -> str:
        param, text = macros[m.group(1)]
        return re.sub(rf"#?\b{re.escape(param)}\b", m.group(2), text)

    if not macros:
        return body
    call = re.compile(r"\b(" + "|".join(map(re.escape, macros)) + r")\(\s*(\w+)\s*\)")
    return call.sub(replace, body)


def _definition(op: Op, texts: Mapping[str, str]) -> tuple[str, list[str], str, int] | None:
    """(body, parameter names, file, line) of the function an op binds."""
    name = op.function.rsplit("::", 1)[-1]
    for rel, text in texts.items():
        masked = cpp.mask(text)
        for decl in cpp.find_declarations(text, masked, name):
            if not decl.is_definition or len(decl.params) != len(op.args):
                continue
            params_open = masked.index("(", decl.offset)
            body_open = masked.index("{", cpp.matching(masked, params_open))
            end = cpp.matching(masked, body_open)
            if end < 0:
                continue
            names = [cpp.parse_parameter(p).name or "" for p in decl.params]
            return masked[body_open:end], names, rel, cpp.line_of(text, decl.offset)
    return None


def expectations(op: Op, texts: Mapping[str, str]) -> tuple[dict[str, Expected], str] | None:
    """Op argument -> what the op's C++ requires of it, and where the function is ("csrc/x.cpp:12");
    None when its definition is not among `texts` (project sources and headers: path -> text)."""
    found = _definition(op, texts)
    if found is None:
        return None
    body, names, rel, line = found
    body = _expand(body, _macros(texts))
    by_cpp = {cpp_name: arg.name for cpp_name, arg in zip(names, op.args, strict=True)
              if cpp_name and arg.ctype.kind == "tensor"}
    out = {}
    for cpp_name, arg in by_cpp.items():
        expected = _read(body, cpp_name, by_cpp)
        if expected != Expected():
            out[arg] = expected
    return out, f"{rel}:{line}"


def _read(body: str, name: str, others: dict[str, str]) -> Expected:
    facts = _facts()
    element, scalar = facts["cpp_element_types"], facts["cpp_scalar_types"]
    n = re.escape(name)
    dtype = None
    for m in re.finditer(rf"\b{n}\s*\.\s*(?:scalar_type|dtype)\s*\(\s*\)\s*==\s*(?:[\w:]*::)?(\w+)", body):
        dtype = dtype or scalar.get(m.group(1))
    for m in re.finditer(rf"\b{n}\s*\.\s*(?:data_ptr|data|mutable_data_ptr|const_data_ptr)\s*<\s*([\w:<> ]+?)\s*>\s*\(",
                         body):
        dtype = dtype or element.get(" ".join(m.group(1).split()))
    rank = None
    for m in re.finditer(rf"\b{n}\s*\.\s*(?:generic_)?(?:packed_)?accessor(?:32|64)?\s*<\s*([\w:<> ]+?)\s*,\s*(\d+)", body):
        dtype = dtype or element.get(" ".join(m.group(1).split()))
        rank = rank or int(m.group(2))
    if dtype is None and re.search(rf"\b{n}\s*\.\s*is_complex\s*\(\s*\)", body):
        dtype = "complex64"
    for m in re.finditer(rf"\b{n}\s*\.\s*(?:dim|ndimension)\s*\(\s*\)\s*==\s*(\d+)|"
                         rf"\b{n}\s*\.\s*sizes\s*\(\s*\)\s*\.\s*size\s*\(\s*\)\s*==\s*(\d+)", body):
        rank = int(m.group(1) or m.group(2))
    dims: dict[int, object] = {}
    size = rf"\b{n}\s*\.\s*size\s*\(\s*(-?\d+)\s*\)\s*==\s*"
    for m in re.finditer(size + r"(\d+)\b(?!\s*[-+*/.(])", body):
        dims.setdefault(int(m.group(1)), int(m.group(2)))
    for m in re.finditer(size + r"(\w+)\s*\.\s*size\s*\(\s*(-?\d+)\s*\)(?!\s*[-+*/])", body):
        if m.group(2) in others and m.group(2) != name:
            dims.setdefault(int(m.group(1)), ("size", others[m.group(2)], int(m.group(3))))
    read = [int(i) for i in re.findall(rf"\b{n}\s*\.\s*(?:size|stride)\s*\(\s*(\d+)\s*\)", body)]
    on = rf"\b{n}\s*\.\s*(?:device\s*\(\s*\)\s*\.\s*)?"
    cpu = re.search(rf"{_CHECK}\s*\(\s*(?:!\s*{on}is_cuda|{on}is_cpu)\s*\(\s*\)", body)
    return Expected(dtype, rank, tuple(sorted(dims.items())), max(read) + 1 if read else None,
                    "cpu" if cpu else None)


# the macros whose first argument is a condition the op requires (a branch on it is not a requirement)
_CHECK = r"\b(?:TORCH_CHECK|AT_ASSERTM|AT_ASSERT|AT_CHECK|TORCH_INTERNAL_ASSERT)"
