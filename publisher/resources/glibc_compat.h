// glibc_compat.h -- forced into every translation unit by publisher so the
// built .so asks glibc and libstdc++ for nothing newer than manylinux_2_28
// (glibc 2.28, GLIBCXX_3.4.24), even when compiled on a newer system (Debian
// 12: glibc 2.36; Ubuntu 24.04: glibc 2.39, gcc 13). glibc_compat.c holds the
// rest: the glibc 2.32 and 2.38 symbols defined in the library itself.
#pragma once

#if defined(__linux__) && !defined(__CUDA_ARCH__)
// Functions whose default version is newer than glibc 2.28 while the older
// version is still exported (libm's 2.29-2.39 error handling, the 2.34 merge
// of libpthread and libdl into libc): bound to that older version, as a build
// on glibc 2.28 binds them. The list is glibc_compat.yaml; publisher writes it
// here when it copies this header into a build.
// @SYMVERS@

// libstdc++ 13 (gcc 13) initializes the standard streams inside the library
// and has every unit including <iostream> reference its new
// std::ios_base_library_init() (GLIBCXX_3.4.32). Without the init_priority
// switch, <iostream> does what earlier releases did: a static ios_base::Init
// in the unit (GLIBCXX_3.4), which works with every libstdc++.
#if defined(__cplusplus) && defined(__has_include)
#if __has_include(<bits/c++config.h>)
#include <bits/c++config.h>
#undef _GLIBCXX_USE_INIT_PRIORITY_ATTRIBUTE
#endif
#endif
#endif
