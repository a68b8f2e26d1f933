#pragma once

#include <asio/awaitable.hpp>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "fileserver/client.h"

namespace brine::fileserver {

// The file client of one state run: each saltenv is listed once, at the
// first ask, and the whole run sees that listing. So a run works from one
// revision of the master's files, and a state that needs a file costs no
// round trip when the cache already holds it (60 file.managed states asked
// the master 60 times whether anything had changed). Wraps the minion's
// client, which must outlive it. Threading: as the wrapped client.
class pinned_client : public client {
 public:
  explicit pinned_client(client& inner) : inner_(inner) {}

  asio::awaitable<std::vector<std::string>> envs() override;
  asio::awaitable<std::shared_ptr<const manifest>> list(std::string saltenv) override;
  asio::awaitable<std::vector<cached_file>> cache(std::string saltenv,
                                                  std::vector<std::string> paths) override;
  asio::awaitable<std::vector<std::string>> tree(std::string saltenv) override;
  client_stats stats() const override { return inner_.stats(); }
  bool remote() const override { return inner_.remote(); }
  std::vector<std::string> dirs_of(const std::string& saltenv) const override {
    return inner_.dirs_of(saltenv);
  }
  // Files of `saltenv` whose hashes the run already knows (a compile
  // master sent them with the catalog): cache() of only such files asks
  // for no listing; any other path lists the saltenv as before.
  void seed(const std::string& saltenv, std::vector<entry> files);

 private:
  client& inner_;
  std::mutex mu_;
  std::optional<std::vector<std::string>> envs_;
  std::map<std::string, std::shared_ptr<const manifest>> listed_;
  std::map<std::string, std::shared_ptr<const manifest>> seeded_;
};

}  // namespace brine::fileserver
