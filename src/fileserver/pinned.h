#pragma once

#include <asio/awaitable.hpp>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "fileserver/client.h"

namespace brine::fileserver {

// The file client of one state run: each saltenv is listed once, at the
// first ask, and the whole run sees that listing. So a run works from one
// revision of the master's files, and a state that needs a file costs no
// round trip when the cache already holds it (60 file.managed states asked
// the master 60 times whether anything had changed). A file that changed on
// the master since the listing (the master moved to a new revision, as
// `brine fileserver update` moves a cluster) is an error, never fetched from
// a newer listing, so a run never reads two revisions; only while nothing
// of the saltenv has been handed to the run yet (its first tree() or
// cache()) is the saltenv listed again, once. Wraps the minion's client,
// which must outlive it. Threading: as the wrapped client.
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
  // The run has been given files of `saltenv` (its listing is now fixed).
  void hand_out(const std::string& saltenv);
  // Drops `m` as the run's listing of `saltenv` so that the next ask lists
  // again; false when files of it were handed out already.
  bool forget_listing(const std::string& saltenv, const std::shared_ptr<const manifest>& m);

  client& inner_;
  std::mutex mu_;
  std::set<std::string> handed_;
  std::optional<std::vector<std::string>> envs_;
  std::map<std::string, std::shared_ptr<const manifest>> listed_;
  std::map<std::string, std::shared_ptr<const manifest>> seeded_;
};

}  // namespace brine::fileserver
