// The sanitizer runtimes' options for the test binaries of a -DVT_SANITIZE build
// (tests/CMakeLists.txt links this file into each of them). The runtimes ask these
// functions when the program starts, so a test binary run by hand behaves as under
// ctest. VT_SANITIZER_SUPPRESSIONS is this folder.
#define VT_SANITIZER_OPTIONS extern "C" __attribute__((used, visibility("default"))) const char*

VT_SANITIZER_OPTIONS __asan_default_options() { return "detect_leaks=1"; }

VT_SANITIZER_OPTIONS __lsan_default_options() {
  return "suppressions=" VT_SANITIZER_SUPPRESSIONS "/lsan.supp:print_suppressions=0";
}

// Undefined behaviour fails the test at once, with the stack that led to it.
VT_SANITIZER_OPTIONS __ubsan_default_options() {
  return "print_stacktrace=1:halt_on_error=1:suppressions=" VT_SANITIZER_SUPPRESSIONS "/ubsan.supp";
}

// Every race is reported (the exit status says there were some), not only the first.
VT_SANITIZER_OPTIONS __tsan_default_options() {
  return "second_deadlock_stack=1:suppressions=" VT_SANITIZER_SUPPRESSIONS "/tsan.supp";
}
