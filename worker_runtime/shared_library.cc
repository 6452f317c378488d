// libcxxrun_worker.so: the worker runtime as one shared object, so that
// Python's ctypes (or any language with a C FFI) can load its C ABI
// (cxxrun_worker.h, heartbeat.h) without a C++ toolchain. Every symbol comes
// from the static library, linked in whole; this file only gives the shared
// target a translation unit of its own.
