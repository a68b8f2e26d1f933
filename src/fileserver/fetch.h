#pragma once

#include <asio/awaitable.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fileserver/client.h"
#include "fileserver/roots.h"

// The client side of the file_request protocol, for remote.cc (not for use
// outside fileserver/).
namespace brine::fileserver::detail {

// A manifest from a `list` reply; throws base::error on a malformed one or
// a path that could leave the roots.
std::shared_ptr<const manifest> parse_manifest(const nlohmann::json& body,
                                               const std::string& saltenv);

// Where fetch_files puts files and whom it tells.
struct fetch_target {
  // The cache path of a file of the saltenv.
  std::function<std::string(const std::string& path)> local;
  // A temporary name beside `local` for a file being fetched.
  std::function<std::string(const std::string& local)> part;
  // A file is complete at `local` with the manifest's hash.
  std::function<void(const std::string& local, const std::string& hash)> landed;
  // Requests sent, files and bytes fetched (as they happen).
  std::function<void(uint64_t requests, uint64_t files, uint64_t bytes)> count;
};

// Fetches `wanted` through `transport` in `get` requests of up to
// `batch_bytes`, each file checked against its hash and renamed into place;
// a file that fails has its reason in `errors` (by path). Throws
// base::error when the transport does, or the master answers an error.
asio::awaitable<void> fetch_files(file_transport transport, std::string saltenv,
                                  std::vector<entry> wanted, uint64_t batch_bytes, fetch_target to,
                                  std::map<std::string, std::string>* errors);

}  // namespace brine::fileserver::detail
