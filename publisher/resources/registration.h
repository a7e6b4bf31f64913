// registration.h -- provided by publisher at build time (projects do not commit it).
//
// Macros that let a kernel register its ops under the per-build namespace
// TORCH_EXTENSION_NAME (a macro, so the registration macros must expand it
// before torch's own macros paste it into identifiers), and make the shared
// object importable as a Python module.
//
// This header only defines macros: the including file brings in
// <torch/library.h> or <torch/csrc/stable/library.h> itself, so one binding
// file may use both families under #if guards.
#pragma once

#include <Python.h>

#define PUBLISHER_CONCAT_(A, B) A##B
#define PUBLISHER_CONCAT(A, B) PUBLISHER_CONCAT_(A, B)
#define PUBLISHER_STRINGIFY_(A) #A
#define PUBLISHER_STRINGIFY(A) PUBLISHER_STRINGIFY_(A)

// The extra level of indirection expands NAME (e.g. TORCH_EXTENSION_NAME)
// before TORCH_LIBRARY token-pastes it.
#define TORCH_LIBRARY_EXPAND(NAME, MODULE) TORCH_LIBRARY(NAME, MODULE)
#define TORCH_LIBRARY_IMPL_EXPAND(NAME, DEVICE, MODULE) \
  TORCH_LIBRARY_IMPL(NAME, DEVICE, MODULE)

// Stable-ABI twins (torch/csrc/stable/library.h).
#define STABLE_TORCH_LIBRARY_EXPAND(NAME, MODULE) STABLE_TORCH_LIBRARY(NAME, MODULE)
#define STABLE_TORCH_LIBRARY_IMPL_EXPAND(NAME, DEVICE, MODULE) \
  STABLE_TORCH_LIBRARY_IMPL(NAME, DEVICE, MODULE)

// Defines PyInit_<NAME> returning an empty module, built only with the
// limited API (Py_LIMITED_API is set by the build), so the .abi3.so can be
// imported by any CPython >= 3.9; importing it runs the static op registrations.
#define REGISTER_EXTENSION(NAME)                                          \
  PyMODINIT_FUNC PUBLISHER_CONCAT(PyInit_, NAME)(void) {                  \
    static struct PyModuleDef module_def = {                              \
        PyModuleDef_HEAD_INIT, PUBLISHER_STRINGIFY(NAME), NULL, 0, NULL}; \
    return PyModule_Create(&module_def);                                  \
  }
