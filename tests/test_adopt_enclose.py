"""The wrapper that compiles a CPU source inside a namespace of its own: every
header from outside the project is included at global scope first, under the
same conditions as in the source; the project's headers are not (their code
belongs inside), and their include guards are not replayed (that would skip
their code). A namespace the enclosed code reopens still sees what the headers
declared in the global one of its name."""

from __future__ import annotations

import shutil
import subprocess

import pytest

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


# longcw/RoIAlign.pytorch's crop_and_resize.cpp defines its functions inside `namespace torch { ... }` and names
# `torch::Tensor` there; enclosed, that namespace is a new one inside the wrapper's (on the GPU machine:
# "'Tensor' is not a member of 'publisher_..::torch'"). A stand-in library shows the same without torch.
LIBRARY = {
    "lib/lib.h": "#pragma once\nnamespace lib { struct Tensor { int n; }; inline int size(const Tensor& t) { "
                 "return t.n; } }\nnamespace lib { namespace nn { inline int depth() { return 2; } } }\n",
}
REOPENS = {
    "pkg/ops.cpp": ('#include <lib.h>\n#include "detail.h"\n\nnamespace lib {\n'
                    "int twice(lib::Tensor t) { return 2 * size(t); }  // lib:: and size() from the header's lib\n"
                    "}\nnamespace lib::nn { int deeper() { return lib::nn::depth() + 1; } }\n"
                    "namespace { int hidden() { return lib::twice(lib::Tensor{3}); } }\n"
                    "int call() { return hidden() + lib::nn::deeper() + detail::three(); }\n"),
    "pkg/detail.h": "#pragma once\nnamespace detail { inline int three() { return 3; } }\n",
}


def _reopens_wrapper(bridged: bool = True) -> str:
    replayed = enclose.skeleton("pkg/ops.cpp", REOPENS.get, resolve_in(REOPENS))
    files = enclose.enclosed_files("pkg/ops.cpp", REOPENS.get, resolve_in(REOPENS))
    opened = enclose.opened_namespaces([REOPENS[f] for f in files]) if bridged else ()
    return enclose.wrapper("pkg/ops.cpp", "torch-ext/k_cuda/pkg__ops.cpp", "publisher_k_cuda", replayed, "note",
                           False, opened)


def resolve_in(files: dict[str, str]):
    def find(including: str, quote: str, name: str) -> str | None:
        candidate = f"{including.rsplit('/', 1)[0]}/{name}"
        return candidate if quote == '"' and candidate in files else None
    return find


def test_the_namespaces_the_enclosed_code_opens_see_the_global_ones_of_their_names():
    assert enclose.enclosed_files("pkg/ops.cpp", REOPENS.get, resolve_in(REOPENS)) == ["pkg/ops.cpp", "pkg/detail.h"]
    opened = enclose.opened_namespaces(REOPENS.values())
    assert opened == [("lib",), ("lib", "nn"), ("detail",)]  # not the anonymous one, nor what only it holds
    text = _reopens_wrapper()
    bridge = text.index("namespace lib { using namespace ::lib; namespace nn { using namespace ::lib::nn; } }")
    assert text.index("namespace detail { using namespace ::detail; }") > text.index("namespace publisher_k_cuda {")
    assert text.index("#include <lib.h>") < bridge < text.index('#include "../../pkg/ops.cpp"')
    # a source that opens no namespace gets no bridge
    assert "using namespace" not in enclose.wrapper("pkg/ops.cpp", "w.cpp", "publisher_k_cuda",
                                                    ["#include <vector>"], "note")


@pytest.mark.slow
def test_an_enclosed_source_that_reopens_a_library_namespace_compiles(tmp_path):
    compiler = shutil.which("g++") or shutil.which("c++")
    assert compiler, "no C++ compiler on PATH"

    def compile_wrapper(text: str) -> subprocess.CompletedProcess:
        for rel, body in {**LIBRARY, **REOPENS, "torch-ext/k_cuda/pkg__ops.cpp": text}.items():
            (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / rel).write_text(body)
        return subprocess.run([compiler, "-std=c++17", "-fsyntax-only", f"-I{tmp_path / 'lib'}",
                               str(tmp_path / "torch-ext/k_cuda/pkg__ops.cpp")], capture_output=True, text=True,
                              timeout=120)

    done = compile_wrapper(_reopens_wrapper())
    assert done.returncode == 0, done.stderr
    # what the bridges answer: without them the enclosed `lib` lacks the header's Tensor
    unbridged = compile_wrapper(_reopens_wrapper(bridged=False))
    assert unbridged.returncode != 0 and "is not a member of" in unbridged.stderr, unbridged.stderr
