"""The wrapper that compiles a CPU source inside a namespace of its own: every
header from outside the project is included at global scope first, under the
same conditions as in the source; the project's headers are not (their code
belongs inside), and their include guards are not replayed (that would skip
their code)."""

from __future__ import annotations

from publisher.adopt import enclose

FILES = {
    "pkg/ops.cpp": ('#ifdef Py_LIMITED_API\n#include <torch/all.h>\n#else\n#include <torch/extension.h>\n#endif\n'
                    '#include "util.h"\n#define SQUARE(x) \\\n  ((x) * (x))\n'
                    'int twice(int v) { return 2 * v; }\n#include "registration.h"\n'),
    "pkg/util.h": "#ifndef PKG_UTIL_H\n#define PKG_UTIL_H\n#include <vector>\ninline int one() { return 1; }\n#endif\n",
}


def resolve(including: str, quote: str, name: str) -> str | None:
    candidate = f"{including.rsplit('/', 1)[0]}/{name}"
    return candidate if quote == '"' and candidate in FILES else None


def test_headers_outside_the_project_are_replayed_in_order_under_their_conditions():
    replayed = enclose.skeleton("pkg/ops.cpp", FILES.get, resolve)
    assert replayed == ["#ifdef Py_LIMITED_API", "#include <torch/all.h>", "#else", "#include <torch/extension.h>",
                        "#endif", "#include <vector>", "#define SQUARE(x)    ((x) * (x))", '#include "registration.h"']
    assert enclose.balanced(replayed)
    text = enclose.wrapper("pkg/ops.cpp", "torch-ext/k_cuda/pkg__ops.cpp", "publisher_k_cuda", replayed, "note", True)
    assert text.index("#include <vector>") < text.index("namespace publisher_k_cuda {")
    assert '#include "../../pkg/ops.cpp"\n}  // namespace publisher_k_cuda' in text
    assert "#error" in text and "TORCH_EXTENSION_NAME" in text


def test_a_file_cut_off_inside_a_conditional_is_not_wrapped():
    assert not enclose.balanced(["#ifdef A", "#include <x>"])
    assert not enclose.balanced(["#endif"])
