#pragma once

// A scratch directory and file writer for the file server's tests.

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace brine::fileserver::test_tree {

namespace fs = std::filesystem;

// A fresh directory under $TMPDIR, removed with its contents at the end of
// the scope.
class temp_dir {
 public:
  temp_dir() {
    std::string t = (fs::temp_directory_path() / "brine-fs-XXXXXX").string();
    path_ = ::mkdtemp(t.data());
  }
  ~temp_dir() { fs::remove_all(path_); }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// Writes `text` to `p`, making its directories.
inline void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

}  // namespace brine::fileserver::test_tree
