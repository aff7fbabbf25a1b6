// Seizing one thread with ptrace, the way both holders of a container's threads need it (the CUDA
// helper's hold, the sandbox agent's drop in place): a thread that has ended, or exited and is
// not reaped yet, is no failure, it needs no hold.
#pragma once

#include <sys/types.h>

#include <string>

namespace nvproxy {

// PTRACE_SEIZE of tid (a thread of pid). true: seized; false: the thread has ended (gone, or a
// zombie: the kernel refuses to seize an exited thread). Throws Error naming `who` otherwise: a
// thread another tracer holds (a debugger, strace) names that tracer.
bool seize_thread(pid_t pid, pid_t tid, const std::string& who);

}  // namespace nvproxy
