#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

// What the master's file service serves salt:// from: one backend (Salt's
// `fileserver_backend`: roots, gitfs) or several layered in order.
namespace brine::fileserver {

// One file of a saltenv: its path relative to the roots, SHA-256 (hex),
// size and permission bits.
struct entry {
  std::string path;
  std::string hash;
  uint64_t size = 0;
  uint32_t mode = 0644;
};

// Every file of one saltenv, sorted by path, and the directories that hold
// them; `revision` changes whenever a path, hash, mode or directory does.
struct manifest {
  std::string saltenv;
  std::string revision;
  std::vector<entry> files;
  std::vector<std::string> dirs;  // every directory (empty ones too), sorted

  const entry* find(const std::string& path) const;
};

// A manifest of `files` (by path) and `dirs` (the parents of every file are
// added); its revision is a SHA-256 over every path, hash, mode and
// directory, so two backends holding the same tree give the same revision.
std::shared_ptr<const manifest> make_manifest(std::string saltenv,
                                              std::map<std::string, entry> files,
                                              std::set<std::string> dirs);

// Up to `max_bytes` of a file from `offset`; `error` says why not.
struct file_chunk {
  std::string data;
  std::string hash;  // of the whole file, as the manifest says
  uint64_t size = 0;
  uint32_t mode = 0;
  std::string error;
};

// The contract serve() relies on: paths given to read() were checked by
// check_path(); a path that is not in list(saltenv) is answered with an
// error, never with bytes from elsewhere.
//
// Threading: every method is safe from any thread; they may block (walks,
// hashes, reads): call them off I/O threads.
class backend {
 public:
  virtual ~backend() = default;
  virtual std::vector<std::string> envs() = 0;
  // The manifest of `saltenv` (an empty one for an unknown saltenv).
  virtual std::shared_ptr<const manifest> list(const std::string& saltenv) = 0;
  virtual file_chunk read(const std::string& saltenv, const std::string& path, uint64_t offset,
                          uint64_t max_bytes) = 0;
};

// Salt's fileserver_backend list: saltenvs are the union of the backends';
// a path is served by the first backend (in order) whose listing has it.
class layered final : public backend {
 public:
  explicit layered(std::vector<backend*> order) : order_(std::move(order)) {}
  std::vector<std::string> envs() override;
  std::shared_ptr<const manifest> list(const std::string& saltenv) override;
  file_chunk read(const std::string& saltenv, const std::string& path, uint64_t offset,
                  uint64_t max_bytes) override;

 private:
  std::vector<backend*> order_;
};

}  // namespace brine::fileserver
