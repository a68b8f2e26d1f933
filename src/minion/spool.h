#pragma once

#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <cstdint>

namespace brine::minion {

// A return body (the map a job_return carries), encoded as MessagePack once:
// kept in the spool and sent as it is.
using encoded_return = std::vector<uint8_t>;

// Where a minion keeps each return until a master acknowledges it; every
// return in it is sent again after a reconnect, so a master's death or a
// dropped connection loses nothing. Methods are safe from any thread.
class return_spool {
 public:
  virtual ~return_spool() = default;
  virtual void save(const std::string& jid, const encoded_return& ret) = 0;
  virtual void forget(const std::string& jid) = 0;
  virtual bool contains(const std::string& jid) const = 0;
  // Every held return, oldest jid first.
  virtual std::vector<encoded_return> load_all() const = 0;
  // True when save() does blocking I/O and belongs off the I/O threads.
  virtual bool blocking() const = 0;
};

// The daemon's spool: one file per job in `<cachedir>/returns/<jid>.ret`
// (MessagePack), written through rename after fsync, so it survives the
// minion's own restart.
class spool final : public return_spool {
 public:
  explicit spool(std::string dir);

  void save(const std::string& jid, const encoded_return& ret) override;
  void forget(const std::string& jid) override;
  bool contains(const std::string& jid) const override;
  std::vector<encoded_return> load_all() const override;
  bool blocking() const override { return true; }

 private:
  std::string path(const std::string& jid) const;

  std::string dir_;
  mutable std::mutex mu_;
  std::set<std::string> jids_;
};

// In memory, for simulated minions (brine swarm): same protocol, no disk.
class memory_spool final : public return_spool {
 public:
  void save(const std::string& jid, const encoded_return& ret) override;
  void forget(const std::string& jid) override;
  bool contains(const std::string& jid) const override;
  std::vector<encoded_return> load_all() const override;
  bool blocking() const override { return false; }

 private:
  mutable std::mutex mu_;
  std::map<std::string, encoded_return> returns_;
};

}  // namespace brine::minion
