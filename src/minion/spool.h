#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace brine::minion {

// A return body (the map a job_return carries, with the `origin` master in
// it), encoded as MessagePack once: kept in the spool and sent as it is.
using encoded_return = std::vector<uint8_t>;

// One held return: its jid, the master it is owed to ("host:port" as the
// minion names that master; empty when unknown) and its bytes.
struct spooled_return {
  std::string jid;
  std::string origin;
  encoded_return bytes;
};

// Where a minion keeps each return until a master acknowledges it; every
// return in it is sent again after a reconnect, so a master's death or a
// dropped connection loses nothing. Methods are safe from any thread.
class return_spool {
 public:
  virtual ~return_spool() = default;
  virtual void save(const std::string& jid, const std::string& origin,
                    const encoded_return& ret) = 0;
  virtual void forget(const std::string& jid) = 0;
  virtual bool contains(const std::string& jid) const = 0;
  // The held returns whose origin `wanted` accepts, oldest jid first (only
  // those are read).
  virtual std::vector<spooled_return> load(
      const std::function<bool(const std::string& origin)>& wanted) const = 0;
  std::vector<spooled_return> load_all() const {
    return load([](const std::string&) { return true; });
  }
  // Whether some held return is owed to `origin`.
  virtual bool owes(const std::string& origin) const = 0;
  // The masters the held returns are owed to.
  virtual std::set<std::string> origins() const = 0;
  // Bytes of the held returns (what spool_max_bytes bounds).
  virtual uint64_t bytes() const = 0;
  virtual size_t size() const = 0;
  // True when save() does blocking I/O and belongs off the I/O threads.
  virtual bool blocking() const = 0;
};

// The daemon's spool: one file per job in `<cachedir>/returns/<jid>.ret`
// (the MessagePack body), written through rename after fsync, so it survives
// the minion's own restart. The origin is read back from the body.
class spool final : public return_spool {
 public:
  // Reads the index of what an earlier run left (dropping damaged files).
  explicit spool(std::string dir);

  void save(const std::string& jid, const std::string& origin, const encoded_return& ret) override;
  void forget(const std::string& jid) override;
  bool contains(const std::string& jid) const override;
  std::vector<spooled_return> load(
      const std::function<bool(const std::string& origin)>& wanted) const override;
  bool owes(const std::string& origin) const override;
  std::set<std::string> origins() const override;
  uint64_t bytes() const override;
  size_t size() const override;
  bool blocking() const override { return true; }

 private:
  struct entry {
    std::string origin;
    uint64_t size = 0;
  };
  std::string path(const std::string& jid) const;
  // Reads and checks one file; false (and the file removed) when damaged.
  bool read(const std::string& jid, encoded_return& bytes, std::string& origin) const;

  std::string dir_;
  mutable std::mutex mu_;
  // Mutable: load_all() drops entries whose files turn out damaged.
  mutable std::map<std::string, entry> index_;
  mutable uint64_t bytes_ = 0;
};

// In memory, for simulated minions (brine swarm): same protocol, no disk.
class memory_spool final : public return_spool {
 public:
  void save(const std::string& jid, const std::string& origin, const encoded_return& ret) override;
  void forget(const std::string& jid) override;
  bool contains(const std::string& jid) const override;
  std::vector<spooled_return> load(
      const std::function<bool(const std::string& origin)>& wanted) const override;
  bool owes(const std::string& origin) const override;
  std::set<std::string> origins() const override;
  uint64_t bytes() const override;
  size_t size() const override;
  bool blocking() const override { return false; }

 private:
  mutable std::mutex mu_;
  std::map<std::string, spooled_return> returns_;
  uint64_t bytes_ = 0;
};

}  // namespace brine::minion
