#ifndef SEGGET_CSTARTUP_H
#define SEGGET_CSTARTUP_H

// See argv.c: the command line as the C library handed it to the executable's constructors, for the
// Swift runtime's `CommandLine`. `segget_startup_argc` is that count (0 where the constructor did
// not run), for a test that the constructor ran.
int segget_startup_argc(void);

#endif
