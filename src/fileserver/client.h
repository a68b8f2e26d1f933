#pragma once

#include <asio/awaitable.hpp>
#include <asio/thread_pool.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "fileserver/roots.h"

// The minion's side of salt:// (Salt's fileclient): what cp.* and the file
// states ask for.
namespace brine::fileserver {

// The error of a file whose hash on the master is no longer the listing's:
// the master moved to another revision of its files between the listing
// and the fetch.
inline constexpr std::string_view k_changed_on_master =
    "changed on the master while it was fetched";

// What tree_listed() throws when a file changed on the master since the
// listing it was given (a pinned run cannot go on from that listing).
class listing_moved : public base::error {
 public:
  using base::error::error;
};

// One requested file: where it is on this machine now, or why it is not.
struct cached_file {
  std::string path;   // as asked (relative to the roots)
  std::string local;  // empty on error
  std::string hash;   // SHA-256 hex
  uint32_t mode = 0;
  std::string error;
};

// Counters a benchmark or test reads: requests sent to a master, files and
// bytes fetched, files answered from the cache.
struct client_stats {
  uint64_t requests = 0;
  uint64_t files_fetched = 0;
  uint64_t bytes_fetched = 0;
  uint64_t cache_hits = 0;
};

class client {
 public:
  virtual ~client() = default;
  // The saltenvs that have files.
  virtual asio::awaitable<std::vector<std::string>> envs() = 0;
  // The manifest of `saltenv`, as the server has it now.
  virtual asio::awaitable<std::shared_ptr<const manifest>> list(std::string saltenv) = 0;
  // Local paths of `paths` (checked relative paths) in `saltenv`, in the
  // same order; a remote client fetches what its cache lacks, many files
  // per request.
  virtual asio::awaitable<std::vector<cached_file>> cache(std::string saltenv,
                                                          std::vector<std::string> paths) = 0;
  // Directories holding `saltenv`'s files as the server has them, for the
  // state compiler's file_roots: the roots themselves (local), or the
  // cache's mirror, brought up to date now (remote: every file up to
  // prefetch_limit bytes; larger ones come when cache() asks for them).
  virtual asio::awaitable<std::vector<std::string>> tree(std::string saltenv) = 0;
  // cache() and tree() with `listed`, a manifest of `saltenv` that list()
  // gave the caller: no request to list it again (a state run lists each
  // saltenv once, see pinned.h), and every file is the listing's: one that
  // changed on the master since is an error (k_changed_on_master; tree
  // throws listing_moved), never fetched from a newer listing. cache() and
  // tree() with no listing list again once when that happens. A client
  // without listings ignores it.
  virtual asio::awaitable<std::vector<cached_file>> cache_listed(
      std::string saltenv, std::vector<std::string> paths, std::shared_ptr<const manifest> listed);
  virtual asio::awaitable<std::vector<std::string>> tree_listed(
      std::string saltenv, std::shared_ptr<const manifest> listed);
  virtual client_stats stats() const { return {}; }
  // Whether files come from a master (and the state tree with them).
  virtual bool remote() const { return false; }
  // Where `saltenv`'s files are on this machine (what tree() last made
  // current), without asking anyone: for template includes.
  virtual std::vector<std::string> dirs_of(const std::string& saltenv) const = 0;
};

// Masterless: the minion's own file_roots.
class local_client : public client {
 public:
  explicit local_client(std::map<std::string, std::vector<std::string>> file_roots);
  asio::awaitable<std::vector<std::string>> envs() override;
  asio::awaitable<std::shared_ptr<const manifest>> list(std::string saltenv) override;
  asio::awaitable<std::vector<cached_file>> cache(std::string saltenv,
                                                  std::vector<std::string> paths) override;
  asio::awaitable<std::vector<std::string>> tree(std::string saltenv) override;
  std::vector<std::string> dirs_of(const std::string& saltenv) const override;

 private:
  std::map<std::string, std::vector<std::string>> dirs_;
  roots roots_;
};

// How a remote client reaches a master: sends a file_request body and
// answers the file_reply body; throws base::error naming why not (no
// master connected, no answer in time).
using file_transport = std::function<asio::awaitable<nlohmann::json>(nlohmann::json request)>;

}  // namespace brine::fileserver
