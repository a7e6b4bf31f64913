/* Linked into every compiled variant. libstdc++ (gcc >= 11) reads glibc
   2.32's __libc_single_threaded to skip atomic reference counting; the build
   renames that variable to this hidden one (-D__libc_single_threaded=...),
   which always says "maybe multi-threaded": the answer older glibc gives,
   so the .so needs no GLIBC_2.32 symbol and behaves the same. */
__attribute__((visibility("hidden"))) char publisher_libc_single_threaded = 0;
