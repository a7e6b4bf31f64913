"""An op schema as an author wrote it (`mymuladd(Tensor a, Tensor b, float c)
-> Tensor`), read into the argument and return types adopt's other stages
use (the plan, the tests it writes). Torch's schema language, the part
extension schemas use: Tensor with alias annotations, optionals, lists,
scalars, defaults and keyword-only arguments."""

from __future__ import annotations

import re

from publisher.adopt.model import OpArg
from publisher.adopt.types import CType, Unsupported

# schema base type -> (kind, the C++ type a kernel takes for it)
_BASES = {
    "Tensor": ("tensor", "at::Tensor"),
    "int": ("scalar", "int64_t"),
    "SymInt": ("scalar", "int64_t"),
    "float": ("scalar", "double"),
    "bool": ("scalar", "bool"),
    "str": ("scalar", "std::string"),
    "Scalar": ("scalar", "at::Scalar"),
    "ScalarType": ("scalar", "at::ScalarType"),
    "Device": ("scalar", "at::Device"),
    "Layout": ("scalar", "at::Layout"),
    "MemoryFormat": ("scalar", "at::MemoryFormat"),
    "Generator": ("scalar", "at::Generator"),
}
_SCHEMA_NAME = {"SymInt": "int"}  # how the tests and the plan spell it
_TYPE = re.compile(r"(?P<base>[A-Za-z_]\w*)(?:\((?P<alias>[a-z]+)(?P<write>!?)\))?(?P<suffix>(?:\[\d*\]|\?)*)$")


def split_name(schema: str) -> tuple[str | None, str, str]:
    """(namespace or None, name with its overload, the rest from the opening parenthesis) of a schema
    or of a bare op name (`ns::name`, rest "")."""
    head, paren, rest = schema.strip().partition("(")
    namespace, _, name = head.strip().rpartition("::")
    return (namespace or None), name.strip(), (paren + rest) if paren else ""


def _matching(text: str, start: int) -> int:
    depth = 0
    for k in range(start, len(text)):
        if text[k] in "([":
            depth += 1
        elif text[k] in ")]":
            depth -= 1
            if depth == 0:
                return k
    raise Unsupported(f"unbalanced brackets in `{text}`")


def _split(text: str) -> list[str]:
    parts, depth, begin, quote = [], 0, 0, None
    for k, ch in enumerate(text):
        if quote:
            quote = None if ch == quote and text[k - 1] != "\\" else quote
        elif ch in "\"'":
            quote = ch
        elif ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[begin:k].strip())
            begin = k + 1
    last = text[begin:].strip()
    return parts + [last] if last or parts else parts


def parse_type(text: str) -> CType:
    m = _TYPE.match(text.strip())
    if not m or m.group("base") not in _BASES:
        raise Unsupported(f"`{text.strip()}` is a schema type adopt does not read")
    kind, written = _BASES[m.group("base")]
    name = _SCHEMA_NAME.get(m.group("base"), m.group("base"))
    mutable = bool(m.group("write"))
    ctype = CType(kind, written, name, mutable=mutable and kind == "tensor")
    for suffix in re.findall(r"\[\d*\]|\?", m.group("suffix")):
        if suffix == "?":
            ctype = CType("optional", f"std::optional<{ctype.written}>", f"{ctype.schema}?", inner=(ctype,),
                          mutable=mutable and ctype.kind == "tensor")
        else:
            ctype = CType("list", f"std::vector<{ctype.written}>", f"{ctype.schema}[]", inner=(ctype,))
    return ctype


def parse(schema: str) -> tuple[str, tuple[OpArg, ...], CType]:
    """(name with its overload, arguments, return type) of a schema without its namespace; Unsupported
    for what adopt cannot read (adopt then lets torch judge the schema, as it registers it)."""
    _, name, rest = split_name(schema)
    if not rest:
        raise Unsupported(f"`{schema}` has no argument list")
    close = _matching(rest, 0)
    args: list[OpArg] = []
    kw_only = False
    for index, part in enumerate(_split(rest[1:close])):
        if part == "*":
            kw_only = True
            continue
        declared, _, default = part.partition("=")
        words = declared.strip().rsplit(None, 1)
        if len(words) != 2:
            raise Unsupported(f"argument {index + 1} of `{schema}` (`{part}`)")
        args.append(OpArg(words[1], parse_type(words[0]), default.strip() or None if default else None, kw_only))
    returns_text = rest[close + 1:].strip()
    if not returns_text.startswith("->"):
        raise Unsupported(f"`{schema}` has no return type")
    returns_text = returns_text[2:].strip()
    if returns_text.startswith("("):
        inner = [p.strip().split()[0] for p in _split(returns_text[1:_matching(returns_text, 0)])]
        if not inner:
            return name, tuple(args), CType("void", "void", "()")
        types = tuple(parse_type(t) for t in inner)
        return name, tuple(args), CType("tuple", "std::tuple", "(" + ", ".join(t.schema for t in types) + ")",
                                        inner=types)
    return name, tuple(args), parse_type(returns_text.split()[0])
