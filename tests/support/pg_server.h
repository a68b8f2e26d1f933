#pragma once

#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "support/temp_dir.h"

namespace brine::test {

// A port on 127.0.0.1 free a moment ago, chosen at random below the
// kernel's ephemeral range (as tests/integration/ports.py does): a port
// bound to 0 comes from that range, which every outgoing connection draws
// from too, so one could take it between the check and the server's bind.
inline int free_loopback_port() {
  int low = 32768;
  if (std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range"); range) range >> low;
  const int lowest = 10000;
  const int highest = std::max(lowest + 1000, low);  // exclusive
  thread_local std::mt19937 rng{std::random_device{}()};
  for (int attempt = 0; attempt < 200; ++attempt) {
    int port = std::uniform_int_distribution<int>(lowest, highest - 1)(rng);
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) break;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    bool free = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    ::close(fd);
    if (free) return port;
  }
  throw std::runtime_error("no free port on 127.0.0.1 in " + std::to_string(lowest) + ".." +
                           std::to_string(highest - 1));
}

// A port on 127.0.0.1 where nothing listens.
inline int unused_port() { return free_loopback_port(); }

// The directory of PostgreSQL's server programs (initdb, postgres, psql):
// initdb's on PATH (symlinks resolved), else the newest
// /usr/lib/postgresql/N/bin; empty when PostgreSQL is not installed.
inline std::string find_postgres_bin() {
  namespace fs = std::filesystem;
  auto complete = [](const fs::path& dir) {
    for (const char* tool : {"initdb", "postgres", "psql"}) {
      if (::access((dir / tool).c_str(), X_OK) != 0) return false;
    }
    return true;
  };
  if (const char* path = std::getenv("PATH")) {
    std::stringstream dirs(path);
    std::string dir;
    while (std::getline(dirs, dir, ':')) {
      if (dir.empty()) continue;
      fs::path initdb = fs::path(dir) / "initdb";
      if (::access(initdb.c_str(), X_OK) != 0) continue;
      std::error_code ec;
      fs::path real = fs::canonical(initdb, ec);
      if (!ec && complete(real.parent_path())) return real.parent_path().string();
    }
  }
  std::error_code ec;
  fs::path best;
  int best_version = -1;
  for (const auto& entry : fs::directory_iterator("/usr/lib/postgresql", ec)) {
    int version = std::atoi(entry.path().filename().c_str());
    if (version > best_version && complete(entry.path() / "bin")) {
      best = entry.path() / "bin";
      best_version = version;
    }
  }
  return best.string();
}

// A throwaway PostgreSQL cluster in a temporary directory: initdb on the
// first start(), a postmaster on 127.0.0.1 (a free port, kept across
// restarts) with its socket in that directory, a role `brine` that logs in
// over TCP with a random password (scram-sha-256), and the superuser
// `postgres` over the socket (trust) for test set-up.
//
// Lifecycle: start() ... stop() (or kill()), any number of times; the
// destructor stops the server and removes the directory. The postmaster is a
// child of the test process, not a daemon (as pg_ctl makes it), so that it
// gets SIGQUIT (immediate shutdown) when the test process dies, even by
// SIGKILL or an abort. As root (PostgreSQL refuses to run as root), the
// server and initdb run as the user `postgres`.
//
// Threading: one thread; start() must run on a thread that outlives the
// server (the main thread): the parent-death signal fires when the thread
// that forked it ends.
class pg_server {
 public:
  explicit pg_server(std::string bin_dir) : bin_(std::move(bin_dir)), dir_("brine-pg") {
    if (::geteuid() == 0) {
      struct passwd* pw = ::getpwnam("postgres");
      if (pw == nullptr) {
        throw std::runtime_error(
            "PostgreSQL refuses to run as root and there is no user postgres to run it as");
      }
      uid_ = pw->pw_uid;
      gid_ = pw->pw_gid;
      as_postgres_ = true;
      if (::chown(dir_.path().c_str(), uid_, gid_) != 0) {
        throw std::runtime_error("chown " + dir_.path() + ": " + std::strerror(errno));
      }
    }
    std::random_device rd;
    const char* hex = "0123456789abcdef";
    for (int i = 0; i < 32; ++i) password_ += hex[rd() % 16];
    password_file_ = dir_.file("password");
    {
      std::ofstream out(password_file_);
      out << password_ << "\n";
    }
    ::chmod(password_file_.c_str(), 0600);
  }
  ~pg_server() {
    try {
      stop();
    } catch (...) {
      kill();
    }
  }
  pg_server(const pg_server&) = delete;
  pg_server& operator=(const pg_server&) = delete;

  void start() {
    if (pid_ > 0) return;
    if (!initialized_) init();
    // Only the first start chooses a port; a port taken meanwhile by
    // another process makes it choose again.
    for (int attempt = 0;; ++attempt) {
      if (port_ == 0) port_ = free_port();
      if (launch()) break;
      if (attempt >= 4 || has_role_) {
        throw std::runtime_error("postgres did not start; its log:\n" + log());
      }
      port_ = 0;
    }
    if (!has_role_) {
      psql("CREATE ROLE brine LOGIN PASSWORD '" + password_ + "'");
      has_role_ = true;
    }
  }

  // Fast shutdown: sessions are disconnected, the server exits cleanly.
  void stop() { signal_and_wait(SIGINT); }
  // Immediate shutdown, as a crash.
  void kill() { signal_and_wait(SIGQUIT); }
  void restart() {
    stop();
    start();
  }
  bool running() const { return pid_ > 0; }

  int port() const { return port_; }
  const std::string& password() const { return password_; }
  // A file of mode 0600 holding the password of `brine`, newline-terminated.
  const std::string& password_file() const { return password_file_; }
  const std::string& socket_dir() const { return dir_.path(); }
  std::string url(const std::string& db) const {
    return "postgresql://brine@127.0.0.1:" + std::to_string(port_) + "/" + db + "?sslmode=disable";
  }

  // A new, empty database that `brine` owns.
  void create_database(const std::string& name) {
    psql("CREATE DATABASE " + name + " OWNER brine");
  }

  // Runs SQL as the superuser in `db`; returns the rows (unaligned, tuples
  // only) or throws with psql's output.
  std::string psql(const std::string& sql, const std::string& db = "postgres") {
    auto [status, output] =
        run({bin_ + "/psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", dir_.path(),
             "-p", std::to_string(port_), "-U", "postgres", "-d", db, "-c", sql},
            false);
    if (status != 0) throw std::runtime_error("psql: " + sql + ":\n" + output);
    while (!output.empty() && (output.back() == '\n' || output.back() == ' ')) output.pop_back();
    return output;
  }

  std::string log() const {
    std::ifstream in(dir_.file("postgres.log"));
    std::stringstream out;
    out << in.rdbuf();
    return out.str();
  }

 private:
  void init() {
    auto [status, output] = run(
        {bin_ + "/initdb", "-D", dir_.file("data"), "-U", "postgres", "-E", "UTF8", "--locale=C",
         "--auth-local=trust", "--auth-host=scram-sha-256", "--no-sync", "--no-instructions"},
        as_postgres_);
    if (status != 0) throw std::runtime_error("initdb failed:\n" + output);
    initialized_ = true;
  }

  static int free_port() { return free_loopback_port(); }

  // Starts the postmaster and waits (30 s at most) until it accepts
  // connections; false when it exited instead.
  bool launch() {
    std::vector<std::string> args = {
        bin_ + "/postgres", "-D", dir_.file("data"), "-c", "listen_addresses=127.0.0.1", "-c",
        "port=" + std::to_string(port_), "-c", "unix_socket_directories=" + dir_.path(),
        // A test server need not survive a power cut.
        "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off", "-c",
        "shared_buffers=16MB", "-c", "max_connections=60", "-c",
        "max_parallel_workers_per_gather=0"};
    int log_fd =
        ::open(dir_.file("postgres.log").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log_fd < 0) throw std::runtime_error("cannot open the postgres log");
    pid_t parent = ::getpid();
    pid_ = spawn(args, as_postgres_, log_fd, [parent] {
      // After the change of user, which clears the setting.
      ::prctl(PR_SET_PDEATHSIG, SIGQUIT);
      if (::getppid() != parent) ::_exit(1);
    });
    ::close(log_fd);
    std::string pid_file = dir_.file("data/postmaster.pid");
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    for (;;) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = 0;
        return false;
      }
      // Line 8 of postmaster.pid is the state; "ready" once it accepts
      // connections.
      std::ifstream in(pid_file);
      std::string line;
      for (int i = 0; i < 8 && std::getline(in, line); ++i) {
      }
      if (line.rfind("ready", 0) == 0) return true;
      if (std::chrono::steady_clock::now() > deadline) {
        kill();
        throw std::runtime_error("postgres did not get ready within 30 s; its log:\n" + log());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  void signal_and_wait(int sig) {
    if (pid_ <= 0) return;
    ::kill(pid_, sig);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    for (;;) {
      int status = 0;
      pid_t r = ::waitpid(pid_, &status, WNOHANG);
      if (r == pid_ || (r < 0 && errno == ECHILD)) break;
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    pid_ = 0;
  }

  template <class F>
  pid_t spawn(const std::vector<std::string>& args, bool as_postgres, int out_fd, F&& in_child) {
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    uid_t uid = uid_;
    gid_t gid = gid_;
    pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
    if (pid == 0) {
      // Only async-signal-safe calls from here: the parent may have threads.
      int null_fd = ::open("/dev/null", O_RDONLY);
      ::dup2(null_fd, 0);
      ::dup2(out_fd, 1);
      ::dup2(out_fd, 2);
      if (as_postgres &&
          (::setgroups(0, nullptr) != 0 || ::setgid(gid) != 0 || ::setuid(uid) != 0)) {
        ::_exit(126);
      }
      in_child();
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    return pid;
  }

  // Runs a program to its end (60 s at most); its exit status and output.
  std::pair<int, std::string> run(const std::vector<std::string>& args, bool as_postgres) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
    pid_t pid = spawn(args, as_postgres, fds[1], [] {});
    ::close(fds[1]);
    std::string output;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    char buf[4096];
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                      deadline - std::chrono::steady_clock::now())
                      .count();
      if (left <= 0) {
        ::kill(pid, SIGKILL);
        output += "\n(killed after 60 s)";
        break;
      }
      pollfd p{fds[0], POLLIN, 0};
      int n = ::poll(&p, 1, static_cast<int>(left));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) continue;
      ssize_t got = ::read(fds[0], buf, sizeof buf);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) break;
      output.append(buf, static_cast<size_t>(got));
    }
    ::close(fds[0]);
    int status = 0;
    ::waitpid(pid, &status, 0);
    return {WIFEXITED(status) ? WEXITSTATUS(status) : 128, output};
  }

  std::string bin_;
  temp_dir dir_;
  bool as_postgres_ = false;
  uid_t uid_ = 0;
  gid_t gid_ = 0;
  std::string password_;
  std::string password_file_;
  bool initialized_ = false;
  bool has_role_ = false;
  int port_ = 0;
  pid_t pid_ = 0;
};

// True when BRINE_REQUIRE_POSTGRES=1: a missing PostgreSQL then fails the
// PostgreSQL tests instead of skipping them (CI sets it).
inline bool postgres_required() {
  const char* v = std::getenv("BRINE_REQUIRE_POSTGRES");
  return v != nullptr && std::string(v) == "1";
}

// The one server of a test binary: started by the first test that asks for
// it (a binary run for SQLite tests alone never starts one), stopped by
// TearDown at the end of the run. Register it once per binary:
//   ::testing::AddGlobalTestEnvironment(new brine::test::pg_environment);
class pg_environment : public ::testing::Environment {
 public:
  // The running server; nullptr when PostgreSQL is not installed, with the
  // reason in `why`. Throws when it is installed but will not start.
  static pg_server* server(std::string* why) {
    state& s = get();
    if (!s.error.empty()) throw std::runtime_error(s.error);
    if (!s.server) {
      std::string bin = find_postgres_bin();
      if (bin.empty()) {
        *why =
            "PostgreSQL is not installed (no initdb on PATH or in /usr/lib/postgresql/*/bin); "
            "install postgresql (scripts/deps.sh) to run these tests";
        return nullptr;
      }
      try {
        s.server = std::make_unique<pg_server>(bin);
        s.server->start();
      } catch (const std::exception& e) {
        s.server.reset();
        s.error = std::string("cannot start the test PostgreSQL server: ") + e.what();
        throw std::runtime_error(s.error);
      }
    }
    // A test may have stopped it (a restart test that failed half-way).
    s.server->start();
    return s.server.get();
  }

  void TearDown() override { get().server.reset(); }

 private:
  struct state {
    std::unique_ptr<pg_server> server;
    std::string error;
  };
  static state& get() {
    static state s;
    return s;
  }
};

}  // namespace brine::test
