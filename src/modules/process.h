#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <asio/awaitable.hpp>

namespace brine::modules {

// Output beyond this many bytes per stream is read and dropped, so that a
// chatty command cannot exhaust the minion's memory.
inline constexpr std::size_t k_max_output = std::size_t{64} << 20;  // 64 MiB

// How to start a child. Exactly one of `argv` and `shell_command` is set.
struct process_options {
  // Executed directly; argv[0] without a '/' is looked up in PATH (the child's
  // PATH, after `env` is applied).
  std::vector<std::string> argv;
  // Run as `SHELL -c shell_command` when `argv` is empty.
  std::string shell_command;
  // The shell of shell_command (Salt's shell=): an absolute path.
  std::string shell = "/bin/sh";
  // Working directory of the child; empty keeps the caller's.
  std::string cwd;
  // Set over a copy of the caller's environment.
  std::map<std::string, std::string> env;
  // Run as this user (Salt's runas): its uid, primary gid and supplementary
  // groups, and HOME, USER, LOGNAME and SHELL from its passwd entry (unless
  // `env` sets them); with no cwd, the child starts in its home. Empty: the
  // caller's identity. An unknown user is a base::error; another user than
  // the caller's needs root (the child then fails to start, EPERM).
  std::string runas;
  // The child's umask (Salt's umask=); nullopt keeps the caller's.
  std::optional<mode_t> umask;
  // Written to the child's stdin, which is then closed; nullopt gives /dev/null.
  std::optional<std::string> stdin_text;
  // The child's stderr goes into the stdout pipe, interleaved as written
  // (Salt's cmd.run); stderr_text stays empty.
  bool merge_stderr = false;
  // Past this the whole process group is killed; must be positive.
  std::chrono::milliseconds timeout{std::chrono::hours(1)};
  std::size_t max_output = k_max_output;
};

struct process_result {
  pid_t pid = -1;
  // The exit code, or 128 + the signal number that killed it (as a shell
  // reports it); -1 if someone else reaped the child (SIGCHLD ignored).
  int retcode = -1;
  std::string stdout_text;
  std::string stderr_text;
  bool stdout_truncated = false;  // more than max_output bytes were written
  bool stderr_truncated = false;
  bool timed_out = false;  // the group was killed at the timeout
};

// Runs one child process to completion without blocking the executor: the
// child leads its own session and process group, its stdout and stderr are
// read concurrently, its exit is awaited through a pidfd and it is reaped with
// waitpid. Completion means the child exited and both pipes reached EOF (as
// Python's communicate(), which Salt uses): a background grandchild that keeps
// the pipes open holds the call until the timeout.
//
// At the timeout the process group is killed (SIGKILL) and reaped, and the
// result has timed_out set, with the output read until then. When the awaiting
// coroutine is cancelled (asio per-operation cancellation, e.g. it lost an
// `||`), the group is killed and reaped too, and the cancellation error is
// rethrown. Only a grandchild that left the group (setsid) survives either.
//
// Throws base::error for what stops the child from starting, naming the
// thing: "cwd /nope: No such file or directory", "exec 'nope': not found in
// PATH", "fork: Resource temporarily unavailable". A shell command that cannot
// find its program is not such a failure: the shell exits 127.
//
// Not thread-confined: the readers may run on different threads of one
// io_context; each owns its own descriptor.
asio::awaitable<process_result> run_process(process_options opts);

// PATH lookup as Salt's salt.utils.path.which: the first executable file
// (a name with a '/' as it is, when executable).
std::optional<std::string> which_path(const std::string& name);

}  // namespace brine::modules
