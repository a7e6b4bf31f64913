// glibc_compat.h -- forced into every translation unit by publisher so the
// built .so asks glibc for nothing newer than manylinux_2_28 (glibc 2.28),
// even when compiled on a newer system (e.g. Debian 12, glibc 2.36).
#pragma once

#if defined(__linux__) && !defined(__CUDA_ARCH__)
// libm gained new default versions of these in glibc 2.29; bind to the old
// ones, which every glibc still provides (same results, older error handling).
#if defined(__x86_64__)
#define PUBLISHER_GLIBC_BASE "GLIBC_2.2.5"
#elif defined(__aarch64__)
#define PUBLISHER_GLIBC_BASE "GLIBC_2.17"
#endif
#ifdef PUBLISHER_GLIBC_BASE
__asm__(".symver exp,exp@" PUBLISHER_GLIBC_BASE);
__asm__(".symver log,log@" PUBLISHER_GLIBC_BASE);
__asm__(".symver pow,pow@" PUBLISHER_GLIBC_BASE);
__asm__(".symver exp2,exp2@" PUBLISHER_GLIBC_BASE);
__asm__(".symver log2,log2@" PUBLISHER_GLIBC_BASE);
#endif
#endif
