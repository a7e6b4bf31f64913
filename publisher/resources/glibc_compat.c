/* Linked into every compiled variant, so that a build on a machine with a
   newer glibc asks the C library for nothing newer than manylinux_2_28
   (glibc 2.28), as a build on an older machine would. Compiled as C11
   (compile.py): no C23 header redirects apply to this file itself.

   1. glibc 2.32: libstdc++ (gcc >= 11) reads __libc_single_threaded to skip
      atomic reference counting; the build renames that variable to this
      hidden one (-D__libc_single_threaded=...), which always says "maybe
      multi-threaded": the answer older glibc gives.

   2. glibc 2.38: with _GNU_SOURCE (g++ always defines it) or C23, <stdlib.h>,
      <stdio.h>, <wchar.h> and <inttypes.h> redirect the strtol and scanf
      families to __isoc23_* versions (GLIBC_2.38), which also read C23's
      0b/0B binary prefix. Each is defined here, hidden, as the classic
      function: what the same source compiled against glibc < 2.38 calls
      (binary prefixes are read as on those systems: not at all).
      The list is every __isoc23_* symbol glibc 2.38-2.41 exports. */

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <wchar.h>

#define PUBLISHER_HIDDEN __attribute__((visibility("hidden")))

PUBLISHER_HIDDEN char publisher_libc_single_threaded = 0;

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

PUBLISHER_HIDDEN int __isoc23_vsscanf(const char *s, const char *format, va_list ap) { return vsscanf(s, format, ap); }
PUBLISHER_HIDDEN int __isoc23_vfscanf(FILE *f, const char *format, va_list ap) { return vfscanf(f, format, ap); }
PUBLISHER_HIDDEN int __isoc23_vscanf(const char *format, va_list ap) { return vscanf(format, ap); }
PUBLISHER_HIDDEN int __isoc23_vswscanf(const wchar_t *s, const wchar_t *format, va_list ap) {
  return vswscanf(s, format, ap);
}
PUBLISHER_HIDDEN int __isoc23_vfwscanf(FILE *f, const wchar_t *format, va_list ap) { return vfwscanf(f, format, ap); }
PUBLISHER_HIDDEN int __isoc23_vwscanf(const wchar_t *format, va_list ap) { return vwscanf(format, ap); }

#define PUBLISHER_SCANF(name, vname, first_type, chr)                        \
  PUBLISHER_HIDDEN int name(first_type first, const chr *format, ...) {     \
    va_list ap;                                                              \
    va_start(ap, format);                                                    \
    int n = vname(first, format, ap);                                        \
    va_end(ap);                                                              \
    return n;                                                                \
  }

PUBLISHER_SCANF(__isoc23_sscanf, vsscanf, const char *, char)
PUBLISHER_SCANF(__isoc23_fscanf, vfscanf, FILE *, char)
PUBLISHER_SCANF(__isoc23_swscanf, vswscanf, const wchar_t *, wchar_t)
PUBLISHER_SCANF(__isoc23_fwscanf, vfwscanf, FILE *, wchar_t)

PUBLISHER_HIDDEN int __isoc23_scanf(const char *format, ...) {
  va_list ap;
  va_start(ap, format);
  int n = vscanf(format, ap);
  va_end(ap);
  return n;
}

PUBLISHER_HIDDEN int __isoc23_wscanf(const wchar_t *format, ...) {
  va_list ap;
  va_start(ap, format);
  int n = vwscanf(format, ap);
  va_end(ap);
  return n;
}
