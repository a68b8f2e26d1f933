#include "modules/process.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <exception>
#include <memory>
#include <system_error>
#include <thread>
#include <utility>

#include <spdlog/spdlog.h>
#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/experimental/deferred.hpp>
#include <asio/experimental/parallel_group.hpp>
#include <asio/posix/stream_descriptor.hpp>
#include <asio/redirect_error.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>

#include "base/error.h"

extern char** environ;

namespace brine::modules {
namespace {

using asio::experimental::deferred;
using asio::experimental::make_parallel_group;
using asio::experimental::wait_for_one;
using asio::experimental::wait_for_one_error;

// A SIGKILLed process is gone within milliseconds unless it is stuck in the
// kernel (uninterruptible sleep, e.g. on a dead NFS server); this bounds how
// long a timed-out or cancelled call waits for that before reaping in the
// background.
constexpr auto k_kill_grace = std::chrono::seconds(5);

// Output still buffered in the pipes after a kill is read up to this much.
constexpr std::size_t k_final_drain_limit = std::size_t{1} << 20;

std::string errno_message(int err) {
  return std::error_code(err, std::system_category()).message();
}

class unique_fd {
 public:
  unique_fd() = default;
  explicit unique_fd(int fd) : fd_(fd) {}
  unique_fd(unique_fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  unique_fd& operator=(unique_fd&& other) noexcept {
    reset(std::exchange(other.fd_, -1));
    return *this;
  }
  unique_fd(const unique_fd&) = delete;
  unique_fd& operator=(const unique_fd&) = delete;
  ~unique_fd() { reset(); }

  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

// Moves `fd` to 3 or above. The child dup2()s our descriptors onto 0, 1 and 2;
// if the minion runs with one of those closed, pipe2 may hand out a low number
// and the dup2 sequence would clobber it.
unique_fd above_stdio(unique_fd fd) {
  if (fd.get() >= 3) return fd;
  int moved = ::fcntl(fd.get(), F_DUPFD_CLOEXEC, 3);
  if (moved < 0) throw base::error("fcntl(F_DUPFD_CLOEXEC): " + errno_message(errno));
  return unique_fd(moved);
}

struct pipe_ends {
  unique_fd read;
  unique_fd write;
};

// Close-on-exec from birth: another thread may fork at any moment, and its
// child must not inherit our ends (a stray write end would keep EOF away).
pipe_ends make_pipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) < 0) throw base::error("pipe: " + errno_message(errno));
  return {above_stdio(unique_fd(fds[0])), above_stdio(unique_fd(fds[1]))};
}

bool has_nul(const std::string& s) { return s.find('\0') != std::string::npos; }

// Everything the child needs, built before vfork: between vfork and exec only
// async-signal-safe calls are allowed, so no allocation happens there.
struct launch_plan {
  std::string path;
  std::vector<std::string> argv;
  std::vector<std::string> envp;
  std::string cwd;
  // runas: who the child becomes (ids looked up before vfork).
  bool switch_user = false;
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
  bool set_umask = false;
  mode_t umask = 022;
  std::vector<char*> argv_ptrs;
  std::vector<char*> envp_ptrs;
  int max_fd = 0;
};

std::vector<std::string> merged_environment(const std::map<std::string, std::string>& extra) {
  std::map<std::string, std::string> env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    std::string_view kv(*entry);
    auto eq = kv.find('=');
    if (eq == std::string_view::npos || eq == 0) continue;
    env.emplace(std::string(kv.substr(0, eq)), std::string(kv.substr(eq + 1)));
  }
  for (const auto& [name, value] : extra) {
    if (name.empty() || name.find('=') != std::string::npos || has_nul(name)) {
      throw base::error("env: '" + name + "' is not a valid variable name (non-empty, no '=')");
    }
    if (has_nul(value)) throw base::error("env: the value of " + name + " contains a NUL byte");
    env[name] = value;
  }
  std::vector<std::string> out;
  out.reserve(env.size());
  for (const auto& [name, value] : env) out.push_back(name + "=" + value);
  return out;
}

std::string env_value(const std::vector<std::string>& envp, const std::string& name) {
  std::string prefix = name + "=";
  for (const auto& kv : envp) {
    if (kv.starts_with(prefix)) return kv.substr(prefix.size());
  }
  return {};
}

// execvp is not async-signal-safe, so PATH is searched here, with the child's
// PATH, as execvpe would.
std::string resolve_program(const std::string& name, const std::vector<std::string>& envp) {
  if (name.find('/') != std::string::npos) return name;
  std::string path = env_value(envp, "PATH");
  if (path.empty()) path = "/usr/local/bin:/usr/bin:/bin";
  std::size_t start = 0;
  while (start <= path.size()) {
    std::size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    std::string dir = path.substr(start, end - start);
    std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + name;
    struct stat st {};
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        ::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
    start = end + 1;
  }
  throw base::error("exec '" + name + "': not found in PATH");
}

launch_plan make_plan(const process_options& opts) {
  launch_plan plan;
  if (opts.argv.empty() == opts.shell_command.empty()) {
    throw base::error("run_process: give exactly one of argv and shell_command");
  }
  if (opts.timeout <= std::chrono::milliseconds::zero()) {
    throw base::error("run_process: timeout must be positive");
  }
  if (has_nul(opts.cwd)) throw base::error("cwd: contains a NUL byte");
  std::map<std::string, std::string> env = opts.env;
  plan.cwd = opts.cwd;
  if (!opts.runas.empty()) {
    struct passwd pw {};
    struct passwd* found = nullptr;
    std::vector<char> buf(16384);
    int rc = ::getpwnam_r(opts.runas.c_str(), &pw, buf.data(), buf.size(), &found);
    if (rc != 0 || found == nullptr) {
      throw base::error("runas: user '" + opts.runas + "' does not exist");
    }
    // Already that user: nothing to switch (setgroups would need root).
    plan.switch_user = pw.pw_uid != ::geteuid();
    plan.uid = pw.pw_uid;
    plan.gid = pw.pw_gid;
    int count = 64;
    plan.groups.resize(static_cast<std::size_t>(count));
    if (::getgrouplist(pw.pw_name, pw.pw_gid, plan.groups.data(), &count) < 0) {
      plan.groups.resize(static_cast<std::size_t>(count));
      ::getgrouplist(pw.pw_name, pw.pw_gid, plan.groups.data(), &count);
    }
    plan.groups.resize(static_cast<std::size_t>(std::max(count, 0)));
    env.try_emplace("HOME", pw.pw_dir);
    env.try_emplace("USER", pw.pw_name);
    env.try_emplace("LOGNAME", pw.pw_name);
    env.try_emplace("SHELL", pw.pw_shell != nullptr && *pw.pw_shell ? pw.pw_shell : "/bin/sh");
    struct stat st {};
    if (plan.cwd.empty() && ::stat(pw.pw_dir, &st) == 0 && S_ISDIR(st.st_mode)) {
      plan.cwd = pw.pw_dir;
    }
  }
  if (opts.umask) {
    plan.set_umask = true;
    plan.umask = *opts.umask & 0777;
  }
  plan.envp = merged_environment(env);
  if (opts.argv.empty()) {
    if (has_nul(opts.shell_command)) throw base::error("command contains a NUL byte");
    plan.path = opts.shell;
    plan.argv = {opts.shell.substr(opts.shell.rfind('/') + 1), "-c", opts.shell_command};
  } else {
    for (const auto& arg : opts.argv) {
      if (has_nul(arg)) throw base::error("argument contains a NUL byte: " + arg);
    }
    plan.argv = opts.argv;
    plan.path = resolve_program(opts.argv.front(), plan.envp);
  }
  for (auto& arg : plan.argv) plan.argv_ptrs.push_back(arg.data());
  plan.argv_ptrs.push_back(nullptr);
  for (auto& kv : plan.envp) plan.envp_ptrs.push_back(kv.data());
  plan.envp_ptrs.push_back(nullptr);
  long open_max = ::sysconf(_SC_OPEN_MAX);
  plan.max_fd = static_cast<int>(std::clamp(open_max, 256L, 65536L));
  return plan;
}

// What the child reports through the status pipe when it cannot exec.
enum class launch_stage : int { setup = 1, chdir = 2, exec = 3, runas = 4 };
struct launch_report {
  launch_stage stage;
  int err;
};

// Runs in the child between vfork and exec: it shares the parent's memory
// (the parent is suspended until the exec), so it only makes system calls
// and writes nothing but its own stack and errno. Credentials change through
// raw system calls: glibc's setuid() would signal the parent's other threads
// to change theirs too.
[[noreturn]] void exec_child(const launch_plan& plan, int stdin_fd, int stdout_fd, int stderr_fd,
                             int status_fd) noexcept {
  auto fail = [status_fd](launch_stage stage) {
    launch_report report{stage, errno};
    // A short write only loses the reason; the parent then reports exit 127.
    [[maybe_unused]] ssize_t n = ::write(status_fd, &report, sizeof report);
    ::_exit(127);
  };
  // Own session and process group: the whole group can be killed at a timeout,
  // and the child has no controlling terminal to read a password from.
  if (::setsid() < 0) fail(launch_stage::setup);
  // Ignored dispositions and blocked signals survive exec; the command must
  // start with the defaults (a minion ignoring SIGPIPE must not pass that on).
  // The parent blocked every signal around the vfork, so none can run one of
  // its handlers here before the defaults are in place; only then unblock.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  for (int sig = 1; sig < NSIG; ++sig) ::sigaction(sig, &dfl, nullptr);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);

  if (::dup2(stdin_fd, 0) < 0 || ::dup2(stdout_fd, 1) < 0 || ::dup2(stderr_fd, 2) < 0) {
    fail(launch_stage::setup);
  }
  if (plan.set_umask) ::umask(plan.umask);
  // Groups first: after setuid the child may no longer change them.
  if (plan.switch_user &&
      (::syscall(SYS_setgroups, plan.groups.size(), plan.groups.data()) < 0 ||
       ::syscall(SYS_setresgid, plan.gid, plan.gid, plan.gid) < 0 ||
       ::syscall(SYS_setresuid, plan.uid, plan.uid, plan.uid) < 0)) {
    fail(launch_stage::runas);
  }
  if (!plan.cwd.empty() && ::chdir(plan.cwd.c_str()) < 0) fail(launch_stage::chdir);
  // Descriptors opened by other libraries without O_CLOEXEC must not leak into
  // the command (a leaked socket or pipe end outlives the minion's intent).
  if (::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) < 0) {
    for (int fd = 3; fd < plan.max_fd; ++fd) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
  }
  ::execve(plan.path.c_str(), plan.argv_ptrs.data(), plan.envp_ptrs.data());
  fail(launch_stage::exec);
  ::_exit(127);  // not reached: fail() exits
}

// Starts the child with vfork: no copy of the minion's page tables and no
// copy-on-write faults afterwards (fork of a 25 MB process cost more than the
// shell it started). Returns in the parent only, once the child has exec'd
// or failed; never returns in the child.
__attribute__((noinline)) pid_t spawn_child(const launch_plan& plan, int stdin_fd, int stdout_fd,
                                            int stderr_fd, int status_fd) {
  sigset_t all, saved;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &saved);
  pid_t pid = ::vfork();
  if (pid == 0) exec_child(plan, stdin_fd, stdout_fd, stderr_fd, status_fd);
  int err = errno;
  ::pthread_sigmask(SIG_SETMASK, &saved, nullptr);
  errno = err;
  return pid;
}

// Owns one child pid until it is reaped. Move-only.
class child_process {
 public:
  explicit child_process(const asio::any_io_executor& ex) : pidfd_(ex) {}
  child_process(child_process&& other) noexcept
      : pid_(std::exchange(other.pid_, -1)),
        pidfd_(std::move(other.pidfd_)),
        reaped_(other.reaped_),
        retcode_(other.retcode_) {}
  child_process& operator=(child_process&&) = delete;
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;

  // Reached with a live child only when the coroutine frame is destroyed
  // without finishing (the io_context torn down mid-job): there is no executor
  // to wait on, so reap synchronously for a bounded time.
  ~child_process() {
    if (pid_ <= 0 || reaped_) return;
    kill_group();
    for (int i = 0; i < 100 && !try_reap(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  void attach(pid_t pid, int pidfd) {
    pid_ = pid;
    pidfd_.assign(pidfd);
  }
  pid_t pid() const { return pid_; }
  bool reaped() const { return reaped_; }
  int retcode() const { return retcode_; }
  asio::posix::stream_descriptor& pidfd() { return pidfd_; }

  // The group id is the child's pid (setsid). Killing the pid too covers a
  // child that has not reached setsid() yet. Until reaped, the pid cannot be
  // reused, so neither kill can hit a stranger.
  void kill_group() {
    if (pid_ <= 0 || reaped_) return;
    ::kill(-pid_, SIGKILL);
    ::kill(pid_, SIGKILL);
  }

  // Non-blocking; true once the child is reaped (or was reaped by someone
  // else, e.g. with SIGCHLD ignored, when the exit code is lost: -1).
  bool try_reap() {
    if (pid_ <= 0 || reaped_) return true;
    int status = 0;
    pid_t r;
    do {
      r = ::waitpid(pid_, &status, WNOHANG);
    } while (r < 0 && errno == EINTR);
    if (r == 0) return false;
    reaped_ = true;
    pidfd_.close();
    if (r < 0) {
      retcode_ = -1;
    } else if (WIFEXITED(status)) {
      retcode_ = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
      retcode_ = 128 + WTERMSIG(status);
    }
    return true;
  }

 private:
  pid_t pid_ = -1;
  asio::posix::stream_descriptor pidfd_;
  bool reaped_ = false;
  int retcode_ = -1;
};

struct capture {
  explicit capture(const asio::any_io_executor& ex) : pipe(ex) {}
  asio::posix::stream_descriptor pipe;
  std::string data;
  bool truncated = false;

  void append(const char* bytes, std::size_t n, std::size_t limit) {
    std::size_t room = data.size() < limit ? limit - data.size() : 0;
    if (n > room) truncated = true;
    data.append(bytes, std::min(n, room));
  }
};

// The state the concurrent readers share, kept alive by each of them: a
// reader may still be unwinding from cancellation when run_process resumes.
struct session {
  explicit session(const asio::any_io_executor& ex)
      : out(ex), err(ex), in(ex), status(ex), child(ex) {}
  capture out;
  capture err;
  asio::posix::stream_descriptor in;
  std::string in_text;
  asio::posix::stream_descriptor status;
  std::string status_bytes;
  child_process child;
  std::size_t max_output = k_max_output;
  bool exited = false;
};

// write(2) that fails with EPIPE instead of raising SIGPIPE, without touching
// the process-wide disposition: SIGPIPE from a write is sent to the writing
// thread, so block it here and consume it if this write raised it.
ssize_t write_without_sigpipe(int fd, const char* data, std::size_t size) {
  sigset_t pipe_set;
  sigset_t old_set;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  ::pthread_sigmask(SIG_BLOCK, &pipe_set, &old_set);
  sigset_t pending;
  sigpending(&pending);
  bool was_pending = sigismember(&pending, SIGPIPE) == 1;
  ssize_t n = ::write(fd, data, size);
  int saved = errno;
  if (n < 0 && saved == EPIPE && !was_pending) {
    timespec zero{};
    ::sigtimedwait(&pipe_set, nullptr, &zero);
  }
  ::pthread_sigmask(SIG_SETMASK, &old_set, nullptr);
  errno = saved;
  return n;
}

asio::awaitable<void> drain(std::shared_ptr<session> s, capture session::*which) {
  capture& c = (*s).*which;
  if (!c.pipe.is_open()) co_return;
  std::array<char, 16384> buf;
  for (;;) {
    asio::error_code ec;
    std::size_t n = co_await c.pipe.async_read_some(asio::buffer(buf),
                                                    asio::redirect_error(asio::use_awaitable, ec));
    c.append(buf.data(), n, s->max_output);
    if (ec == asio::error::eof) break;
    if (ec) throw asio::system_error(ec, "reading the command's output");
  }
  c.pipe.close();
}

asio::awaitable<void> feed_stdin(std::shared_ptr<session> s) {
  if (!s->in.is_open()) co_return;
  std::size_t offset = 0;
  while (offset < s->in_text.size()) {
    co_await s->in.async_wait(asio::posix::stream_descriptor::wait_write, asio::use_awaitable);
    ssize_t n = write_without_sigpipe(s->in.native_handle(), s->in_text.data() + offset,
                                      s->in_text.size() - offset);
    if (n >= 0) {
      offset += static_cast<std::size_t>(n);
    } else if (errno != EAGAIN && errno != EINTR) {
      // EPIPE: the command exited or closed stdin without reading it all,
      // which is its business, not an error of ours.
      break;
    }
  }
  s->in.close();  // EOF for the command
}

asio::awaitable<void> read_status(std::shared_ptr<session> s) {
  std::array<char, sizeof(launch_report)> buf;
  for (;;) {
    asio::error_code ec;
    std::size_t n = co_await s->status.async_read_some(
        asio::buffer(buf), asio::redirect_error(asio::use_awaitable, ec));
    s->status_bytes.append(buf.data(), n);
    if (ec == asio::error::eof) break;
    if (ec) throw asio::system_error(ec, "reading the child's launch status");
  }
  s->status.close();
}

// Readable once the child has exited; it stays unreaped (a zombie) until the
// end, so its pid, which is also the group id, cannot be reused meanwhile.
asio::awaitable<void> wait_exit(std::shared_ptr<session> s) {
  co_await s->child.pidfd().async_wait(asio::posix::stream_descriptor::wait_read,
                                       asio::use_awaitable);
  s->exited = true;
}

// Everything until the child exited and its pipes reached EOF. Throws when
// cancelled; the first failure cancels the rest.
asio::awaitable<void> pump(std::shared_ptr<session> s) {
  auto ex = co_await asio::this_coro::executor;
  auto [order, e_out, e_err, e_in, e_status, e_exit] =
      co_await make_parallel_group(asio::co_spawn(ex, drain(s, &session::out), deferred),
                                   asio::co_spawn(ex, drain(s, &session::err), deferred),
                                   asio::co_spawn(ex, feed_stdin(s), deferred),
                                   asio::co_spawn(ex, read_status(s), deferred),
                                   asio::co_spawn(ex, wait_exit(s), deferred))
          .async_wait(wait_for_one_error(), asio::use_awaitable);
  for (const auto& e : {e_out, e_err, e_in, e_status, e_exit}) {
    if (e) std::rethrow_exception(e);
  }
}

// Reads what the pipes already hold, without waiting: the output written just
// before a kill belongs in the result.
void drain_now(capture& c, std::size_t limit) {
  if (!c.pipe.is_open()) return;
  int fd = c.pipe.native_handle();
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  std::array<char, 16384> buf;
  std::size_t total = 0;
  while (total < k_final_drain_limit) {
    ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    c.append(buf.data(), static_cast<std::size_t>(n), limit);
    total += static_cast<std::size_t>(n);
  }
  c.pipe.close();
}

asio::awaitable<void> reap_in_background(std::shared_ptr<child_process> child) {
  co_await child->pidfd().async_wait(asio::posix::stream_descriptor::wait_read,
                                     asio::use_awaitable);
  child->try_reap();
  spdlog::info("child {} reaped after outliving its kill by more than {} s", child->pid(),
               k_kill_grace.count());
}

// After kill_group(): waits (bounded) for the child to die, collects the last
// output and reaps. Runs detached from the caller's cancellation, which has
// usually fired already and must not cut the clean-up short.
asio::awaitable<void> finish_after_kill(std::shared_ptr<session> s) {
  auto ex = co_await asio::this_coro::executor;
  if (!s->exited) {
    asio::steady_timer grace(ex, k_kill_grace);
    co_await make_parallel_group(asio::co_spawn(ex, wait_exit(s), deferred),
                                 grace.async_wait(deferred))
        .async_wait(wait_for_one(), asio::use_awaitable);
  }
  drain_now(s->out, s->max_output);
  drain_now(s->err, s->max_output);
  if (!s->exited || !s->child.try_reap()) {
    spdlog::warn("child {} did not die within {} s of SIGKILL; reaping it in the background",
                 s->child.pid(), k_kill_grace.count());
    auto child = std::make_shared<child_process>(std::move(s->child));
    asio::co_spawn(ex, reap_in_background(std::move(child)), asio::detached);
  }
}

std::string launch_failure(const std::string& status_bytes, const launch_plan& plan) {
  if (status_bytes.size() < sizeof(launch_report)) return {};
  launch_report report{};
  std::memcpy(&report, status_bytes.data(), sizeof report);
  switch (report.stage) {
    case launch_stage::chdir:
      return "cwd " + plan.cwd + ": " + errno_message(report.err);
    case launch_stage::exec:
      return "exec '" + plan.path + "': " + errno_message(report.err);
    case launch_stage::runas:
      return "runas uid " + std::to_string(plan.uid) + ": " + errno_message(report.err);
    case launch_stage::setup:
      break;
  }
  return "starting '" + plan.path + "': " + errno_message(report.err);
}

}  // namespace

asio::awaitable<process_result> run_process(process_options opts) {
  auto ex = co_await asio::this_coro::executor;
  const launch_plan plan = make_plan(opts);

  auto s = std::make_shared<session>(ex);
  s->max_output = opts.max_output;
  pipe_ends out = make_pipe();
  pipe_ends err;
  if (!opts.merge_stderr) err = make_pipe();
  pipe_ends status = make_pipe();
  pipe_ends in;
  if (opts.stdin_text) {
    in = make_pipe();
    // Only our end: the child's stdin stays blocking, as programs expect.
    ::fcntl(in.write.get(), F_SETFL, ::fcntl(in.write.get(), F_GETFL) | O_NONBLOCK);
  } else {
    int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (devnull < 0) throw base::error("/dev/null: " + errno_message(errno));
    in.read = above_stdio(unique_fd(devnull));
  }

  pid_t pid = spawn_child(plan, in.read.get(), out.write.get(),
                          opts.merge_stderr ? out.write.get() : err.write.get(),
                          status.write.get());
  if (pid < 0) throw base::error("vfork: " + errno_message(errno));
  // The child's ends close here, so that EOF arrives when the child exits.
  in.read.reset();
  out.write.reset();
  err.write.reset();
  status.write.reset();

  int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (pidfd < 0) {
    int saved = errno;
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);  // just killed: returns at once
    throw base::error("pidfd_open: " + errno_message(saved) + " (brine needs Linux 5.3 or later)");
  }
  s->child.attach(pid, pidfd);
  s->out.pipe.assign(out.read.release());
  if (err.read.get() >= 0) s->err.pipe.assign(err.read.release());
  s->status.assign(status.read.release());
  if (opts.stdin_text) {
    s->in.assign(in.write.release());
    s->in_text = std::move(*opts.stdin_text);
  }

  bool timed_out = false;
  std::exception_ptr failure;
  try {
    asio::steady_timer deadline(ex, opts.timeout);
    auto [order, pump_error, timer_error] =
        co_await make_parallel_group(asio::co_spawn(ex, pump(s), deferred),
                                     deadline.async_wait(deferred))
            .async_wait(wait_for_one(), asio::use_awaitable);
    if (pump_error) {
      if (order[0] == 1 && !timer_error) {
        timed_out = true;
      } else {
        failure = pump_error;
      }
    }
  } catch (...) {
    failure = std::current_exception();
  }

  if (timed_out || failure) {
    s->child.kill_group();
    // An empty slot: the caller's cancellation must not reach the clean-up.
    co_await asio::co_spawn(
        ex, finish_after_kill(s),
        asio::bind_cancellation_slot(asio::cancellation_slot(), asio::use_awaitable));
    if (failure) std::rethrow_exception(failure);
  } else {
    s->child.try_reap();  // it exited (pidfd readable): never blocks
  }

  if (std::string why = launch_failure(s->status_bytes, plan); !why.empty()) {
    throw base::error(why);
  }
  process_result result;
  result.pid = pid;
  result.retcode = s->child.reaped() ? s->child.retcode() : 128 + SIGKILL;
  result.stdout_text = std::move(s->out.data);
  result.stderr_text = std::move(s->err.data);
  result.stdout_truncated = s->out.truncated;
  result.stderr_truncated = s->err.truncated;
  result.timed_out = timed_out;
  co_return result;
}

// PATH lookup as Salt's salt.utils.path.which: the first executable file.
std::optional<std::string> which_path(const std::string& name) {
  auto executable = [](const std::string& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
  };
  if (name.find('/') != std::string::npos) {
    if (executable(name)) return name;
    return std::nullopt;
  }
  const char* path = ::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  for (;;) {
    size_t end = dirs.find(':', start);
    std::string dir = dirs.substr(start, end == std::string::npos ? end : end - start);
    if (!dir.empty() && executable(dir + "/" + name)) return dir + "/" + name;
    if (end == std::string::npos) return std::nullopt;
    start = end + 1;
  }
}

}  // namespace brine::modules
