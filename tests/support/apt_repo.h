#pragma once

#include <stdio.h>
#include <stdlib.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "support/temp_dir.h"

namespace brine::test {

// The version dpkg has installed, or "" (also for a package removed with
// its configuration files left).
inline std::string dpkg_version(const std::string& pkg) {
  std::string cmd = "dpkg-query -W -f '${Status}\\t${Version}' '" + pkg + "' 2>/dev/null";
  std::string out;
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    char buf[512];
    while (std::fgets(buf, sizeof buf, p) != nullptr) out += buf;
    ::pclose(p);
  }
  const std::string installed = "ok installed\t";
  auto at = out.find(installed);
  return at == std::string::npos ? "" : out.substr(at + installed.size());
}

// A local apt repository that tests/support/apt_repo.sh builds (dpkg-deb,
// apt-ftparchive, a file: source) and that apt sees alone through
// APT_CONFIG while the object lives: apt-get update, install and remove run
// for real, with no network. add() puts more packages (say version 2.0 of
// one) into the same repository. Whatever was installed of its packages is
// purged and unheld on the way out, and before it starts (a run that died
// before its cleanup). Needs root, apt-utils and BRINE_SOURCE_DIR.
class local_apt_repo {
 public:
  explicit local_apt_repo(const std::vector<std::string>& packages) {
    add(packages);
    ::setenv("APT_CONFIG", dir_.file("apt.conf").c_str(), 1);
    purge();
  }
  ~local_apt_repo() {
    purge();
    ::unsetenv("APT_CONFIG");
  }
  local_apt_repo(const local_apt_repo&) = delete;
  local_apt_repo& operator=(const local_apt_repo&) = delete;

  // NAME=VERSION packages built into the repository (apt sees them after
  // the next apt-get update).
  void add(const std::vector<std::string>& packages) {
    std::string cmd = "bash " BRINE_SOURCE_DIR "/tests/support/apt_repo.sh " + dir_.path();
    for (const auto& p : packages) {
      cmd += " " + p;
      std::string name = p.substr(0, p.find('='));
      bool known = false;
      for (const auto& n : names_) known = known || n == name;
      if (!known) names_.push_back(name);
    }
    if (std::system((cmd + " >/dev/null 2>&1").c_str()) != 0) {
      throw std::runtime_error("apt_repo.sh failed: " + cmd);
    }
  }
  const std::string& dir() const { return dir_.path(); }
  std::string file(const std::string& name) const { return dir_.file(name); }

 private:
  void purge() {
    for (const auto& n : names_) {
      std::system(("dpkg --get-selections " + n + " 2>/dev/null | grep -q hold && echo '" + n +
                   " install' | dpkg --set-selections >/dev/null 2>&1")
                      .c_str());
      std::system(("dpkg --purge " + n + " >/dev/null 2>&1").c_str());
    }
  }
  temp_dir dir_{"brine-apt"};
  std::vector<std::string> names_;
};

}  // namespace brine::test
