"""Reading C++ sources without a compiler: enough of the language to find a
pybind11 module block, the statements in it, and the declaration of each
function it binds. Every search runs on a *masked* copy of the text (comments
and the insides of string and character literals blanked, newlines kept), so
offsets in the mask are offsets in the source and a brace in a string never
counts."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from publisher.cxx import line_of, mask  # noqa: F401  (re-exported: adopt reads C++ through this module)


def matching(masked: str, open_at: int) -> int:
    """Offset just past the bracket that closes the one at `open_at` (-1: unbalanced)."""
    pairs = {"(": ")", "[": "]", "{": "}"}
    opening = masked[open_at]
    closing = pairs[opening]
    depth = 0
    for k in range(open_at, len(masked)):
        ch = masked[k]
        if ch == opening:
            depth += 1
        elif ch == closing:
            depth -= 1
            if depth == 0:
                return k + 1
    return -1


def split_top(masked: str, start: int, end: int, sep: str = ",") -> list[tuple[int, int]]:
    """(start, end) spans of `masked[start:end]` split at `sep` outside brackets and template angles."""
    spans: list[tuple[int, int]] = []
    depth = 0
    angle = 0
    begin = start
    for k in range(start, end):
        ch = masked[k]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "<" and _opens_template(masked, k):
            angle += 1
        elif ch == ">" and angle and masked[k - 1] != "-":
            angle -= 1
        elif ch == sep and depth == 0 and angle == 0:
            spans.append((begin, k))
            begin = k + 1
    spans.append((begin, end))
    return spans


def _opens_template(masked: str, k: int) -> bool:
    """`<` after a name (vector<, optional<, overload_cast<) opens template arguments; `a < b` does not."""
    if k + 1 < len(masked) and masked[k + 1] in "<=":
        return False
    j = k - 1
    while j >= 0 and masked[j] == " ":
        j -= 1
    return j >= 0 and (masked[j].isalnum() or masked[j] == "_") and masked[k - 1] != " "


@dataclass(frozen=True)
class Block:
    """A balanced `{...}` block: where its header starts and where it ends."""

    start: int  # the first character of the header (e.g. the P of PYBIND11_MODULE)
    body_open: int  # the `{`
    end: int  # just past the `}`


def find_macro_block(masked: str, macro: str) -> list[tuple[Block, list[str]]]:
    """Each `MACRO(args) { ... }` at any depth: the block and its argument texts."""
    out = []
    for m in re.finditer(r"\b" + re.escape(macro) + r"\s*\(", masked):
        args_end = matching(masked, m.end() - 1)
        if args_end < 0:
            continue
        brace = re.compile(r"\s*\{").match(masked, args_end)
        if not brace:
            continue
        body_open = brace.end() - 1
        end = matching(masked, body_open)
        if end < 0:
            continue
        args = [masked[a:b].strip() for a, b in split_top(masked, m.end(), args_end - 1)]
        out.append((Block(m.start(), body_open, end), args))
    return out


def statements(masked: str, start: int, end: int) -> Iterator[tuple[str, int, int]]:
    """("directive" | "statement", start, end) for each preprocessor line and each `;`-ended
    statement directly inside `masked[start:end]`, in order."""
    k = start
    while k < end:
        while k < end and masked[k] in " \t\r\n":
            k += 1
        if k >= end:
            return
        if masked[k] == "#":
            stop = k
            while True:  # a directive may continue over lines ending in a backslash
                nl = masked.find("\n", stop)
                nl = end if nl < 0 or nl > end else nl
                if nl > k and masked[nl - 1] == "\\" and nl < end:
                    stop = nl + 1
                    continue
                break
            yield "directive", k, nl
            k = nl
            continue
        depth = 0
        j = k
        while j < end:
            ch = masked[j]
            if ch in "([{":
                depth += 1
            elif ch in ")]}":
                depth -= 1
            elif ch == ";" and depth == 0:
                break
            elif ch == "\n" and depth == 0 and j + 1 < end and masked[j + 1:].lstrip(" \t").startswith("#"):
                break  # a directive between statements ends an unterminated one
            j += 1
        yield "statement", k, min(j + 1, end)
        k = j + 1


# --- function declarations -------------------------------------------------------------------

_SPECIFIERS = {"static", "inline", "extern", "constexpr", "virtual", "explicit", "friend", "TORCH_API", "C10_EXPORT",
               "__host__", "__device__", "__forceinline__", "__inline__", "C10_API", "TORCH_CUDA_CPP_API",
               "__attribute__", "[[nodiscard]]", "[[maybe_unused]]", "noinline", "__global__", "CUDA_CALLABLE"}
_EXPORT_MACRO = re.compile(r"[A-Z][A-Z0-9]*_(?:API|EXPORT|EXPORTS|CALLABLE|INLINE|HOST|DEVICE|HOST_DEVICE)")  # SCATTER_API
_NAMESPACE_OPEN = re.compile(r"(?:\binline\s+)?\bnamespace\s*([\w:]*)\s*\{$")
_EXTERN_OPEN = re.compile(r'\bextern\s*"\s*"\s*\{$')  # extern "C" {, its literal blanked by mask()


@dataclass(frozen=True)
class Declaration:
    name: str
    namespace: tuple[str, ...]  # () for the global namespace; ("",) parts for an anonymous one
    return_type: str
    params: tuple[str, ...]  # each parameter's text as written (type, name, default)
    specifiers: tuple[str, ...]  # static, inline, template, ...
    offset: int  # of the name
    is_definition: bool


def scopes(masked: str) -> list[tuple[int, int, str | None]]:
    """(open, close, namespace name or None) for every brace block; None for a block that is not
    a namespace or extern "C" block (a function body, a class, an initializer)."""
    out: list[tuple[int, int, str | None]] = []
    stack: list[tuple[int, str | None]] = []
    k = 0
    n = len(masked)
    while k < n:
        ch = masked[k]
        if ch == "{":
            head_start = max(0, k - 200)
            head = masked[head_start:k + 1]
            ns = _NAMESPACE_OPEN.search(head)
            ext = _EXTERN_OPEN.search(head)
            if ns:
                stack.append((k, ns.group(1) or ""))
            elif ext:
                stack.append((k, "extern"))
            else:
                stack.append((k, None))
        elif ch == "}" and stack:
            open_at, kind = stack.pop()
            out.append((open_at, k + 1, kind))
        k += 1
    return out


def enclosing(blocks: list[tuple[int, int, str | None]], offset: int) -> list[str | None]:
    """The kinds of the blocks enclosing `offset`, outermost first."""
    inside = [(o, c, kind) for o, c, kind in blocks if o < offset < c]
    return [kind for _, _, kind in sorted(inside)]


def find_declarations(text: str, masked: str, name: str) -> list[Declaration]:
    """Every namespace-scope declaration or definition of the function `name` (unqualified) in `text`."""
    blocks = scopes(masked)
    uncommented = mask(text, strings=False)
    found: list[Declaration] = []
    for m in re.finditer(r"(?<![\w.:>])(?:~)?" + re.escape(name) + r"\s*\(", masked):
        if masked[m.start() - 1: m.start()] == ">" or _preceded_by_member_access(masked, m.start()):
            continue
        kinds = enclosing(blocks, m.start())
        if any(kind is None for kind in kinds):
            continue  # inside a function body or class: a call or a member, not a free function
        params_open = m.end() - 1
        params_end = matching(masked, params_open)
        if params_end < 0:
            continue
        after = re.compile(r"\s*(?:const\s*)?(?:noexcept(?:\s*\([^)]*\))?\s*)?(?:->\s*([^{;]+?)\s*)?([{;])").match(
            masked, params_end)
        if not after:
            continue
        head_start = _statement_start(masked, m.start())
        head = masked[head_start:m.start()].strip()
        if not head or head.endswith(("=", "return", ",", "(", "<<", "::")) or re.search(r"\breturn\s*$", head):
            continue
        specifiers, return_type = _split_head(head)
        if after.group(1):
            return_type = after.group(1).strip()
        if not return_type or return_type in ("else", "new", "delete", "throw", "case", "goto", "sizeof"):
            continue
        namespace = tuple(k for k in kinds if k not in ("extern",))
        # as written, less comments (`torch::Tensor boxes,  // [y1,x1,y2,x2]` ends a line before the next one)
        params = tuple(" ".join(uncommented[a:b].split()) for a, b in split_top(masked, params_open + 1, params_end - 1))
        if params == ("",) or params == ("void",):
            params = ()
        found.append(Declaration(name, namespace, _squash(return_type), params, specifiers, m.start(),
                                 after.group(2) == "{"))
    return found


def _preceded_by_member_access(masked: str, k: int) -> bool:
    j = k - 1
    while j >= 0 and masked[j] in " \t\n":
        j -= 1
    return j >= 0 and (masked[j] == "." or masked[j - 1: j + 1] == "->")


def _statement_start(masked: str, k: int) -> int:
    """Where the declaration holding offset k starts: after the previous `;`, `{`, `}` or directive line."""
    j = k - 1
    while j >= 0:
        ch = masked[j]
        if ch in ";{}":
            return j + 1
        if ch == "\n":
            if _in_directive(masked, masked.rfind("\n", 0, j) + 1):
                return j + 1
        if ch == ":" and masked[j - 1: j] != ":" and masked[j + 1: j + 2] != ":":
            return j + 1  # public: / a label
        j -= 1
    return 0


def _in_directive(masked: str, line_start: int) -> bool:
    """Whether the line starting at `line_start` belongs to a preprocessor directive: it starts with `#`, or
    continues (the line before ends with a backslash) a line that does, as the preprocessor joins them."""
    while True:
        line_end = masked.find("\n", line_start)
        if masked[line_start:line_end if line_end >= 0 else len(masked)].lstrip().startswith("#"):
            return True
        if line_start == 0:
            return False
        previous = masked.rfind("\n", 0, line_start - 1) + 1
        if not masked[previous:line_start - 1].rstrip(" \t\r").endswith("\\"):
            return False
        line_start = previous


def _split_head(head: str) -> tuple[tuple[str, ...], str]:
    """(specifiers, return type) of what precedes a function name."""
    specifiers: list[str] = []
    rest = _squash(head)
    template = re.match(r"template\s*<", rest)
    if template:
        specifiers.append("template")
        depth, k = 0, template.end() - 1
        for k in range(template.end() - 1, len(rest)):
            if rest[k] == "<":
                depth += 1
            elif rest[k] == ">":
                depth -= 1
                if depth == 0:
                    break
        rest = rest[k + 1:].strip()
    rest = re.sub(r'\bextern\s*"[^"]*"', "extern", rest)  # extern "C" (its literal blanked by mask())
    rest = re.sub(r"__attribute__\s*\(\(.*?\)\)", " ", rest)
    rest = re.sub(r"\[\[[^\]]*\]\]", " ", rest)
    words = rest.split()
    while len(words) > 1 and (words[0] in _SPECIFIERS or words[0] == "extern" or _EXPORT_MACRO.fullmatch(words[0])):
        specifiers.append(words.pop(0))
    return tuple(specifiers), " ".join(words)


def _squash(text: str) -> str:
    return " ".join(text.split())


# --- parameters ------------------------------------------------------------------------------

_TYPE_WORDS = {"const", "volatile", "unsigned", "signed", "short", "long", "int", "char", "double", "float", "bool",
               "void", "struct", "class", "typename", "auto", "size_t"}


@dataclass(frozen=True)
class Parameter:
    type: str  # as written, without the name and default ("const torch::Tensor&")
    name: str | None
    default: str | None


def parse_parameter(param: str) -> Parameter:
    m = mask(param)
    spans = split_top(m, 0, len(m), "=")
    default = None
    if len(spans) > 1:
        cut = spans[0][1]
        default = param[cut + 1:].strip()
        param = param[:cut]
    param = param.strip()
    words = re.match(r"^(.*?)([A-Za-z_]\w*)\s*$", param, re.S)
    if words:
        before, last = words.group(1).rstrip(), words.group(2)
        if before and last not in _TYPE_WORDS and not before.endswith("::") and (
                before[-1] in "&*>" or before[-1].isalnum() or before[-1] == "_"):
            return Parameter(_squash(before), last, default)
    return Parameter(_squash(param), None, default)


def string_literal(text: str) -> str | None:
    """The value of a C++ string literal (adjacent literals joined), else None."""
    text = text.strip()
    if not text.startswith(('"', 'R"', 'u8"')):
        return None
    parts = re.findall(r'(?:u8)?"((?:[^"\\]|\\.)*)"', text)
    if not parts:
        return None
    rebuilt = "".join(parts)
    try:
        return bytes(rebuilt, "utf-8").decode("unicode_escape") if "\\" in rebuilt else rebuilt
    except UnicodeDecodeError:
        return rebuilt
