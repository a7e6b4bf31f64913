/* Linked into every compiled variant, so that a build on a machine with a
   newer glibc asks the C library for nothing newer than manylinux_2_28
   (glibc 2.28), as a build on an older machine would. Compiled as C11
   (compile.py): no C23 header redirects apply to this file itself.

   1. glibc 2.32: libstdc++ (gcc >= 11) reads __libc_single_threaded to skip
      atomic reference counting. Defined here, hidden, always saying "maybe
      multi-threaded": the answer older glibc gives.

   2. glibc 2.38: with _GNU_SOURCE (g++ always defines it) or C23, <stdlib.h>,
      <stdio.h>, <wchar.h> and <inttypes.h> redirect the strtol and scanf
      families to __isoc23_* versions (GLIBC_2.38), which also read C23's
      0b/0B binary prefix. Each is defined here, hidden, as the classic
      function: what the same source compiled against glibc < 2.38 calls
      (binary prefixes are read as on those systems: not at all).
      The list is every __isoc23_* symbol glibc 2.38-2.41 exports.

   3. Code compiled before the build (a toolchain that links libstdc++
      statically, as the GPU machine's gcc 13 does) references what its glibc
      had: arc4random (2.36, libstdc++'s random_device), stat64, fstat64, ...
      (2.33, before which they were inline calls of __xstat64 & co.), the
      pthread functions libstdc++ calls (2.34: libpthread merged into libc).
      Defined here, hidden: arc4random from the getrandom system call, the stat
      family through the __xstat entry points every glibc still exports, each
      pthread function as a call of its version of glibc 2.28. The list is what
      a static libstdc++ (gcc 13, 14) and libgcc ask of glibc 2.41 beyond 2.28,
      but _dl_find_object (a static libgcc_eh's unwinder), which has no older
      version: the ABI check names it where it occurs. */

#if defined(__linux__) && defined(__has_include)
#if __has_include(<gnu/libc-version.h>) /* glibc: elsewhere (macOS, musl) this file defines nothing */
#define PUBLISHER_GLIBC 1
#endif
#endif
#ifdef PUBLISHER_GLIBC

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <wchar.h>

#define PUBLISHER_HIDDEN __attribute__((visibility("hidden")))

PUBLISHER_HIDDEN char __libc_single_threaded = 0;

#define PUBLISHER_STRTO(type, name, classic, chr) \
  PUBLISHER_HIDDEN type name(const chr *s, chr **end, int base) { return classic(s, end, base); }

PUBLISHER_STRTO(long, __isoc23_strtol, strtol, char)
PUBLISHER_STRTO(unsigned long, __isoc23_strtoul, strtoul, char)
PUBLISHER_STRTO(long long, __isoc23_strtoll, strtoll, char)
PUBLISHER_STRTO(unsigned long long, __isoc23_strtoull, strtoull, char)
PUBLISHER_STRTO(intmax_t, __isoc23_strtoimax, strtoimax, char)
PUBLISHER_STRTO(uintmax_t, __isoc23_strtoumax, strtoumax, char)
PUBLISHER_STRTO(long, __isoc23_wcstol, wcstol, wchar_t)
PUBLISHER_STRTO(unsigned long, __isoc23_wcstoul, wcstoul, wchar_t)
PUBLISHER_STRTO(long long, __isoc23_wcstoll, wcstoll, wchar_t)
PUBLISHER_STRTO(unsigned long long, __isoc23_wcstoull, wcstoull, wchar_t)
PUBLISHER_STRTO(intmax_t, __isoc23_wcstoimax, wcstoimax, wchar_t)
PUBLISHER_STRTO(uintmax_t, __isoc23_wcstoumax, wcstoumax, wchar_t)

/* glibc's _GNU_SOURCE names (strtoq, strtouq) redirect to the same symbols as strtoll, strtoull. */

/* the scanf family: the v- forms call the classic ones, the variadic forms the v- forms */
#define PUBLISHER_VSCANF(name, classic, params, args) \
  PUBLISHER_HIDDEN int name params { return classic args; }
PUBLISHER_VSCANF(__isoc23_vsscanf, vsscanf, (const char *s, const char *f, va_list ap), (s, f, ap))
PUBLISHER_VSCANF(__isoc23_vfscanf, vfscanf, (FILE *s, const char *f, va_list ap), (s, f, ap))
PUBLISHER_VSCANF(__isoc23_vscanf, vscanf, (const char *f, va_list ap), (f, ap))
PUBLISHER_VSCANF(__isoc23_vswscanf, vswscanf, (const wchar_t *s, const wchar_t *f, va_list ap), (s, f, ap))
PUBLISHER_VSCANF(__isoc23_vfwscanf, vfwscanf, (FILE *s, const wchar_t *f, va_list ap), (s, f, ap))
PUBLISHER_VSCANF(__isoc23_vwscanf, vwscanf, (const wchar_t *f, va_list ap), (f, ap))

#define PUBLISHER_SCANF(name, vname, params, last, args) \
  PUBLISHER_HIDDEN int name params {                     \
    va_list ap;                                          \
    va_start(ap, last);                                  \
    int n = vname args;                                  \
    va_end(ap);                                          \
    return n;                                            \
  }
PUBLISHER_SCANF(__isoc23_sscanf, vsscanf, (const char *s, const char *f, ...), f, (s, f, ap))
PUBLISHER_SCANF(__isoc23_fscanf, vfscanf, (FILE *s, const char *f, ...), f, (s, f, ap))
PUBLISHER_SCANF(__isoc23_scanf, vscanf, (const char *f, ...), f, (f, ap))
PUBLISHER_SCANF(__isoc23_swscanf, vswscanf, (const wchar_t *s, const wchar_t *f, ...), f, (s, f, ap))
PUBLISHER_SCANF(__isoc23_fwscanf, vfwscanf, (FILE *s, const wchar_t *f, ...), f, (s, f, ap))
PUBLISHER_SCANF(__isoc23_wscanf, vwscanf, (const wchar_t *f, ...), f, (f, ap))

/* 3. arc4random: random bytes from the kernel, as glibc 2.36 takes them. */
static void publisher_random_bytes(void *buffer, size_t size) {
  unsigned char *p = buffer;
  while (size > 0) {
    long got = syscall(SYS_getrandom, p, size, 0);
    if (got > 0) {
      p += got;
      size -= (size_t)got;
    } else if (got < 0 && errno == EINTR) {
      continue;
    } else {
      FILE *urandom = fopen("/dev/urandom", "rbe");
      size_t n = urandom ? fread(p, 1, size, urandom) : 0;
      if (urandom) fclose(urandom);
      if (n < size) abort(); /* glibc's arc4random aborts likewise when it gets no randomness */
      return;
    }
  }
}

PUBLISHER_HIDDEN uint32_t arc4random(void) {
  uint32_t value;
  publisher_random_bytes(&value, sizeof value);
  return value;
}

PUBLISHER_HIDDEN void arc4random_buf(void *buffer, size_t size) { publisher_random_bytes(buffer, size); }

PUBLISHER_HIDDEN uint32_t arc4random_uniform(uint32_t upper) {
  if (upper < 2) return 0;
  uint32_t least = -upper % upper; /* 2**32 % upper: below it, the modulo would favour small values */
  for (;;) {
    uint32_t r = arc4random();
    if (r >= least) return r % upper;
  }
}

/* 3. The pthread functions libstdc++ and libgcc call, bound to their glibc 2.28 version. No <pthread.h>:
   its prototypes stay out; the types below are those of the x86_64 and aarch64 ABIs. */
#if defined(__x86_64__) || defined(__aarch64__)
#if defined(__x86_64__)
#define PUBLISHER_PTHREAD_VERSION "GLIBC_2.2.5"
#else
#define PUBLISHER_PTHREAD_VERSION "GLIBC_2.17"
#endif
#define PUBLISHER_PTHREAD(ret, name, params, args)                                   \
  __asm__(".symver publisher_old_" #name "," #name "@" PUBLISHER_PTHREAD_VERSION); \
  extern ret publisher_old_##name params;                                         \
  PUBLISHER_HIDDEN ret name params { return publisher_old_##name args; }

PUBLISHER_PTHREAD(int, pthread_create, (void *thread, const void *attr, void *(*start)(void *), void *arg),
                  (thread, attr, start, arg))
PUBLISHER_PTHREAD(int, pthread_detach, (unsigned long thread), (thread))
PUBLISHER_PTHREAD(int, pthread_join, (unsigned long thread, void **result), (thread, result))
PUBLISHER_PTHREAD(void *, pthread_getspecific, (unsigned int key), (key))
PUBLISHER_PTHREAD(int, pthread_setspecific, (unsigned int key, const void *value), (key, value))
PUBLISHER_PTHREAD(int, pthread_key_create, (unsigned int *key, void (*destructor)(void *)), (key, destructor))
PUBLISHER_PTHREAD(int, pthread_key_delete, (unsigned int key), (key))
PUBLISHER_PTHREAD(int, pthread_once, (int *once, void (*init)(void)), (once, init))
PUBLISHER_PTHREAD(int, pthread_rwlock_rdlock, (void *lock), (lock))
PUBLISHER_PTHREAD(int, pthread_rwlock_wrlock, (void *lock), (lock))
PUBLISHER_PTHREAD(int, pthread_rwlock_unlock, (void *lock), (lock))
PUBLISHER_PTHREAD(int, pthread_sigmask, (int how, const void *set, void *old), (how, set, old))
#endif

/* 3. The stat family of glibc 2.33, through the entry points older glibc inlined calls to (their
   version argument is the kernel's struct layout: 1 on x86_64, 0 on aarch64). */
#if defined(__x86_64__) || defined(__aarch64__)
#if defined(__x86_64__)
#define PUBLISHER_STAT_VER 1
#define PUBLISHER_XSTAT_VERSION "GLIBC_2.2.5"
#define PUBLISHER_FXSTATAT_VERSION "GLIBC_2.4"
#else
#define PUBLISHER_STAT_VER 0
#define PUBLISHER_XSTAT_VERSION "GLIBC_2.17"
#define PUBLISHER_FXSTATAT_VERSION "GLIBC_2.17"
#endif
__asm__(".symver publisher_xstat,__xstat@" PUBLISHER_XSTAT_VERSION);
__asm__(".symver publisher_lxstat,__lxstat@" PUBLISHER_XSTAT_VERSION);
__asm__(".symver publisher_fxstat,__fxstat@" PUBLISHER_XSTAT_VERSION);
__asm__(".symver publisher_fxstatat,__fxstatat@" PUBLISHER_FXSTATAT_VERSION);
__asm__(".symver publisher_xstat64,__xstat64@" PUBLISHER_XSTAT_VERSION);
__asm__(".symver publisher_lxstat64,__lxstat64@" PUBLISHER_XSTAT_VERSION);
__asm__(".symver publisher_fxstat64,__fxstat64@" PUBLISHER_XSTAT_VERSION);
__asm__(".symver publisher_fxstatat64,__fxstatat64@" PUBLISHER_FXSTATAT_VERSION);
extern int publisher_xstat(int, const char *, void *);
extern int publisher_lxstat(int, const char *, void *);
extern int publisher_fxstat(int, int, void *);
extern int publisher_fxstatat(int, int, const char *, void *, int);
extern int publisher_xstat64(int, const char *, void *);
extern int publisher_lxstat64(int, const char *, void *);
extern int publisher_fxstat64(int, int, void *);
extern int publisher_fxstatat64(int, int, const char *, void *, int);
/* no <sys/stat.h>: its declarations (struct stat, or inline definitions on glibc < 2.33) stay out of this file */
PUBLISHER_HIDDEN int stat(const char *path, void *buf) { return publisher_xstat(PUBLISHER_STAT_VER, path, buf); }
PUBLISHER_HIDDEN int lstat(const char *path, void *buf) { return publisher_lxstat(PUBLISHER_STAT_VER, path, buf); }
PUBLISHER_HIDDEN int fstat(int fd, void *buf) { return publisher_fxstat(PUBLISHER_STAT_VER, fd, buf); }
PUBLISHER_HIDDEN int fstatat(int dirfd, const char *path, void *buf, int flags) {
  return publisher_fxstatat(PUBLISHER_STAT_VER, dirfd, path, buf, flags);
}
PUBLISHER_HIDDEN int stat64(const char *path, void *buf) { return publisher_xstat64(PUBLISHER_STAT_VER, path, buf); }
PUBLISHER_HIDDEN int lstat64(const char *path, void *buf) { return publisher_lxstat64(PUBLISHER_STAT_VER, path, buf); }
PUBLISHER_HIDDEN int fstat64(int fd, void *buf) { return publisher_fxstat64(PUBLISHER_STAT_VER, fd, buf); }
PUBLISHER_HIDDEN int fstatat64(int dirfd, const char *path, void *buf, int flags) {
  return publisher_fxstatat64(PUBLISHER_STAT_VER, dirfd, path, buf, flags);
}
#endif
#endif /* PUBLISHER_GLIBC */
