#include "master/file_service.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <asio/post.hpp>

#include "fileserver/serve.h"
#include "master/minion_sessions.h"

namespace brine::master {

namespace {
// A reply's file data, at most: well under the minion's frame limit.
constexpr uint64_t k_max_reply_bytes = 4 * 1024 * 1024;
}  // namespace

file_service::file_service(const base::master_config& cfg)
    : roots_(cfg.file_roots, std::chrono::seconds(cfg.fileserver_list_cache_time)),
      max_reply_bytes_(std::min<uint64_t>(k_max_reply_bytes, cfg.max_frame_bytes / 2)) {}

file_service::~file_service() { pool_.join(); }

void file_service::serve(const std::shared_ptr<session>& s, proto::message request) {
  asio::post(pool_, [this, s, request = std::move(request)] {
    nlohmann::json reply;
    try {
      reply = fileserver::serve(roots_, request.body, max_reply_bytes_);
    } catch (const std::exception& e) {
      reply = {{"error", std::string("the master could not read its file_roots: ") + e.what()}};
    }
    // One line per request at debug: the benchmark counts a run's round trips.
    if (spdlog::should_log(spdlog::level::debug)) {
      size_t files = reply.contains("files") && reply["files"].is_array() ? reply["files"].size() : 0;
      const auto* op = request.body.is_object() && request.body.contains("op") &&
                               request.body["op"].is_string()
                           ? request.body["op"].get_ptr<const std::string*>()
                           : nullptr;
      spdlog::debug("minion {}: file_request {} answered ({} files)", s->id,
                    op != nullptr ? *op : "?", files);
    }
    if (reply.contains("error")) {
      spdlog::warn("minion {} at {}: file_request refused: {}", s->id, s->conn->peer(),
                   reply.value("error", "?"));
    } else if (reply.contains("files") && reply["files"].is_array()) {
      for (const auto& f : reply["files"]) {
        std::string err = f.is_object() ? f.value("error", "") : "";
        if (err.starts_with("refused")) {
          spdlog::warn("minion {} at {}: salt://{} {}", s->id, s->conn->peer(),
                       f.value("path", "?"), err);
        }
      }
    }
    s->conn->send({proto::msg_type::file_reply, request.id, std::move(reply)});
  });
}

}  // namespace brine::master
