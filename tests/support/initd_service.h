#pragma once

// A throwaway init.d service for the service module's and states' tests:
// tests/support/brine-test-svc (an LSB script whose daemon sleeps, keeps
// its pid in /run/NAME.pid and logs each action to /run/NAME.log) installed
// as /etc/init.d/NAME. The destructor stops the daemon and removes the
// script, its rc?.d links, the pid file and the log, also when the test
// failed midway; the constructor first removes what an aborted run left.

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace brine::test {

class initd_service {
 public:
  // Why the init.d tests cannot run here, or "" when they can.
  static std::string skip_reason() {
    if (::geteuid() != 0) return "needs root to install a script in /etc/init.d";
    struct stat st {};
    if (::stat("/run/systemd/system", &st) == 0) {
      return "this host runs systemd, which manages services instead of the init.d scripts";
    }
    for (const char* tool : {"service", "update-rc.d", "start-stop-daemon", "runlevel", "ps"}) {
      const std::string probe = std::string("command -v ") + tool + " >/dev/null 2>&1";
      if (std::system(probe.c_str()) != 0) return std::string("needs ") + tool;
    }
    if (!std::filesystem::exists("/etc/debian_version")) return "needs Debian (update-rc.d)";
    return "";
  }

  // `script`: the path of tests/support/brine-test-svc.
  initd_service(std::string name, const std::string& script) : name_(std::move(name)) {
    remove();
    std::filesystem::copy_file(script, path(), std::filesystem::copy_options::overwrite_existing);
    std::filesystem::permissions(path(), std::filesystem::perms(0755));
  }
  ~initd_service() { remove(); }
  initd_service(const initd_service&) = delete;
  initd_service& operator=(const initd_service&) = delete;

  const std::string& name() const { return name_; }
  std::string path() const { return "/etc/init.d/" + name_; }
  std::string pid_file() const { return "/run/" + name_ + ".pid"; }
  std::string log_file() const { return "/run/" + name_ + ".log"; }

  // The daemon's pid, 0 when the pid file is missing.
  pid_t pid() const {
    std::ifstream in(pid_file());
    long pid = 0;
    in >> pid;
    return static_cast<pid_t>(pid);
  }
  // Whether the daemon of the pid file runs (not a zombie).
  bool running() const {
    const pid_t p = pid();
    if (p <= 0) return false;
    std::ifstream stat("/proc/" + std::to_string(p) + "/stat");
    std::string line;
    if (!std::getline(stat, line)) return false;
    auto paren = line.rfind(") ");
    return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] != 'Z';
  }
  // The actions the script ran, one a line.
  std::string log() const {
    std::ifstream in(log_file());
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  // update-rc.d NAME defaults: S links in rc2-5.d.
  bool add_links() const { return quiet("update-rc.d " + name_ + " defaults") == 0; }
  bool has_start_link() const {
    for (const auto& e : std::filesystem::directory_iterator("/etc/rc2.d")) {
      const std::string f = e.path().filename().string();
      if (f.starts_with("S") && f.ends_with(name_)) return true;
    }
    return false;
  }

 private:
  static int quiet(const std::string& command) {
    return std::system((command + " >/dev/null 2>&1").c_str());
  }

  void remove() const {
    quiet("start-stop-daemon --stop --quiet --oknodo --retry TERM/5/KILL/5 --pidfile " +
          pid_file() + " --remove-pidfile");
    quiet("update-rc.d " + name_ + " remove");
    std::error_code ec;
    std::filesystem::remove(path(), ec);
    std::filesystem::remove(pid_file(), ec);
    std::filesystem::remove(log_file(), ec);
  }

  std::string name_;
};

}  // namespace brine::test
