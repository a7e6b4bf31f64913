"""C++ types of a bound function, read as torch op schema types. The facts
(which spellings mean what, which types the dispatcher refuses) are in
resources/adopt_types.yaml; this module applies them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from publisher.adopt import cpp
from publisher.data import read_yaml


@cache
def _facts() -> dict:
    return read_yaml("adopt_types.yaml")


class Unsupported(ValueError):
    """A type no op schema can carry (a pointer, a pybind11 object, a class of the project)."""


@dataclass(frozen=True)
class CType:
    kind: str  # tensor, scalar, optional, list, tuple, void
    written: str  # the type as written, without const and reference
    schema: str  # the schema spelling (no alias annotation)
    mutable: bool = False  # a non-const lvalue reference (tensors only)
    const_ref: bool = False  # taken as `const T&`
    via: str | None = None  # scalars the dispatcher refuses: the C++ type a shim takes (a pair: std::tuple)
    inner: tuple[CType, ...] = ()

    @property
    def needs_shim(self) -> bool:
        return self.via is not None or self.mutable_optional or any(i.needs_shim for i in self.inner)

    @property
    def mutable_optional(self) -> bool:
        """A `std::optional<Tensor>&` parameter: the shim passes the function a local copy."""
        return self.kind == "optional" and self.mutable

    def shim_type(self) -> str:
        """The C++ type a generated shim takes for this parameter."""
        facts = _facts()["shim_types"]
        if self.kind == "tensor":
            return "at::Tensor&" if self.mutable else "const at::Tensor&"
        if self.kind == "scalar":
            return self.via or facts[self.schema]
        if self.kind == "optional":
            inner = self.inner[0]
            base = "at::Tensor" if inner.kind == "tensor" else inner.shim_type().replace("const ", "").rstrip("&")
            return f"const std::optional<{base}>&" if inner.kind == "tensor" else f"std::optional<{base}>"
        if self.kind == "list":
            inner = self.inner[0]
            base = "at::Tensor" if inner.kind == "tensor" else inner.shim_type().replace("const ", "").rstrip("&")
            return f"const std::vector<{base}>&"
        raise Unsupported(f"{self.written} as a parameter")

    def convert(self, var: str) -> str:
        """An expression of the type the function wants, from the shim's parameter `var`."""
        if self.kind == "scalar" and self.via:
            return f"static_cast<{self.written}>({var})"
        if self.kind == "optional" and self.inner[0].needs_shim:
            inner = self.inner[0]
            return f"({var} ? std::optional<{inner.written}>(static_cast<{inner.written}>(*{var})) : std::nullopt)"
        if self.kind == "list" and self.inner[0].needs_shim:
            return f"std::vector<{self.inner[0].written}>({var}.begin(), {var}.end())"
        return var


def parse(type_text: str, *, is_return: bool = False) -> CType:
    """The schema type of a C++ parameter (or return) type; Unsupported if it has none."""
    text = " ".join(type_text.replace("\t", " ").split())
    if re.search(r"\b(py|pybind11)::", text):
        raise Unsupported(f"`{text}` is a pybind11 type")
    if "*" in text:
        raise Unsupported(f"`{text}` is a pointer")
    if "&&" in text:
        raise Unsupported(f"`{text}` is an rvalue reference")
    ref = text.endswith("&")
    const = bool(re.search(r"\bconst\b", text))
    core = re.sub(r"\b(const|volatile|struct|class|typename)\b", " ", text).replace("&", " ")
    core = " ".join(core.split()).removeprefix("::")
    core = re.sub(r"\s*(<|>|,|::)\s*", r"\1", core)
    if core == "void":
        if not is_return:
            raise Unsupported("`void` parameter")
        return CType("void", "void", "()")
    ctype = _core(core)
    if ctype.kind == "tensor":
        return CType("tensor", core, "Tensor", mutable=ref and not const, const_ref=ref and const)
    if ref and not const and ctype.kind == "optional" and ctype.inner[0].kind == "tensor" and not is_return:
        # `std::optional<Tensor>&` (causal-conv1d's out-parameters): the op's `Tensor(a!)?`; the dispatcher passes a
        # const optional, so a shim hands the function a copy -- as pybind11 does -- whose tensor is the caller's
        return CType("optional", ctype.written, ctype.schema, mutable=True, inner=ctype.inner)
    if ref and not const:
        raise Unsupported(f"`{text}` is a non-const reference to a {ctype.schema} (only tensors can be mutated)")
    return CType(ctype.kind, ctype.written, ctype.schema, const_ref=ref and const, via=ctype.via, inner=ctype.inner)


def _core(core: str) -> CType:
    facts = _facts()
    if core in facts["tensor"]:
        return CType("tensor", core, "Tensor")
    if core in facts["scalars"]:
        entry = facts["scalars"][core]
        return CType("scalar", core, entry["schema"], via=entry.get("via"))
    if core in facts["named_lists"]:
        element = _core("at::Tensor" if facts["named_lists"][core] == "Tensor" else "int64_t")
        return CType("list", core, f"{element.schema}[]", inner=(element,))
    template = re.fullmatch(r"([\w:]+)<(.*)>", core)
    if template:
        name, args_text = template.groups()
        masked = cpp.mask(args_text)
        args = [args_text[a:b].strip() for a, b in cpp.split_top(masked, 0, len(masked))]
        if name in facts["optional"] and len(args) == 1:
            inner = _core(args[0])
            if inner.kind in ("optional", "tuple"):
                raise Unsupported(f"`{core}`: an optional {inner.kind}")
            return CType("optional", core, f"{inner.schema}?", inner=(inner,))
        if name in facts["list"] and len(args) == 1:
            inner = _core(args[0])
            if inner.kind not in ("tensor", "scalar") or inner.schema not in ("Tensor", "int", "float", "bool"):
                raise Unsupported(f"`{core}`: a list of {inner.schema}")
            if inner.kind == "tensor" and name in ("c10::List", "at::List"):
                raise Unsupported(f"`{core}`")
            return CType("list", core, f"{inner.schema}[]", inner=(inner,))
        pair = name in facts.get("pair", ()) and len(args) == 2
        if name in facts["tuple"] or pair:
            inner = tuple(_core(a) for a in args)
            if any(i.kind in ("tuple", "void") for i in inner):
                raise Unsupported(f"`{core}`: a nested tuple")
            return CType("tuple", core, "(" + ", ".join(i.schema for i in inner) + ")", inner=inner,
                         via="std::tuple" if pair else None)
    raise Unsupported(f"`{core}` has no op schema type")


_NUMBER = re.compile(r"^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?[fFlLuU]*$")
_HEX = re.compile(r"^[-+]?0[xX][0-9a-fA-F]+[uUlL]*$")


def schema_default(ctype: CType, value: str) -> str | None:
    """The schema spelling of a C++ (or py::arg) default value; None when it cannot be carried."""
    value = " ".join(value.split())
    facts = _facts()
    target = ctype.inner[0] if ctype.kind == "optional" else ctype
    if ctype.kind == "optional" and value in facts["none_defaults"]:
        return "None"
    if target.kind == "scalar":
        if target.schema == "bool" and value in ("true", "false", "True", "False"):
            return "True" if value.lower() == "true" else "False"
        if target.schema in ("int", "float") and (_NUMBER.match(value) or _HEX.match(value)):
            bare = value.rstrip("fFlLuU") if not _HEX.match(value) else value.rstrip("uUlL")
            try:
                number = float(bare) if target.schema == "float" else int(bare, 0)
            except ValueError:
                return None
            if target.schema == "float":
                return repr(float(number))
            return str(number)
        if target.schema == "str":
            text = cpp.string_literal(value)
            if text is not None:
                return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if target.kind == "list" and target.inner[0].schema in ("int", "float"):
        body = re.fullmatch(r"(?:[\w:<>]+)?\{(.*)\}", value)
        if body:
            items = [i.strip() for i in body.group(1).split(",") if i.strip()]
            converted = [schema_default(target.inner[0], i) for i in items]
            if all(c is not None for c in converted):
                return "[" + ", ".join(converted) + "]"
    return None
