// The command line for Swift's `CommandLine.arguments`, taken from the C library at start-up.
//
// The Swift runtime on Linux finds `argv` itself: a static constructor of its CommandLine.cpp reads
// /proc/self/maps to find the stack and walks it back from `environ`. With the runtime linked in
// statically, that runs at every start of segget, before main; for a 1 MiB download it cost 0.3 ms
// of 13 (the kernel writes out the process's ~200 mappings and the C library parses them with
// sscanf). glibc hands every constructor of the executable `argc`, `argv` and `envp`, so this file
// keeps them, and defines the two functions that the runtime's `CommandLine` calls. Defined here,
// in an object linked before the static runtime, they keep the linker from taking the runtime's
// CommandLine.cpp out of its archive, and its constructor with it. Where the runtime is a shared
// library (debug builds) these definitions are simply not the ones used: both give the same argv.

#include "CStartup.h"

static char **startup_argv;
static int startup_argc;
static char **override_argv;
static int override_argc;

__attribute__((constructor)) static void segget_keep_argv(int argc, char **argv, char **envp) {
    (void)envp;
    startup_argc = argc;
    startup_argv = argv;
}

char **_swift_stdlib_getUnsafeArgvArgc(int *outArgLen) {
    if (override_argv) {
        *outArgLen = override_argc;
        return override_argv;
    }
    *outArgLen = startup_argc;
    return startup_argv;
}

void _swift_stdlib_overrideUnsafeArgvArgc(char **argv, int argc) {
    override_argv = argv;
    override_argc = argc;
}

int segget_startup_argc(void) { return startup_argc; }
