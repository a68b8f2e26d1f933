#include "swarm/sim_context.h"

#include "base/error.h"
#include "minion/agent.h"
#include "net/connection.h"
#include "proto/message.h"

namespace brine::swarm {
namespace {

// salt:// requests go to a master that accepts this simulated minion, over
// its own link. A member function object, not a capturing lambda: the
// coroutine uses `masters` after its first suspension.
struct link_files {
  minion::master_set* masters;

  asio::awaitable<nlohmann::json> operator()(nlohmann::json request) const {
    auto link = masters ? masters->accepted_member() : nullptr;
    if (!link) {
      throw base::error(
          "no master accepts this simulated minion now, so salt:// files cannot be fetched");
    }
    auto body = co_await minion::agent::file_request(std::move(link), std::move(request),
                                                     minion::k_file_request_limit);
    co_return body;
  }
};

}  // namespace

sim_context::sim_context(const sim_shared& shared, std::string id,
                         std::shared_ptr<const nlohmann::json> grains)
    : shared_(shared),
      id_(std::move(id)),
      grains_(std::move(grains)),
      opts_(shared.opts),
      pillar_(shared.empty),
      ordered_pillar_(shared.empty_ordered) {
  opts_["id"] = id_;
}

void sim_context::set_masters(minion::master_set* masters) { masters_ = masters; }

void sim_context::set_pillar(nlohmann::ordered_json pillar) {
  std::shared_ptr<const nlohmann::json> sorted = shared_.empty;
  std::shared_ptr<const nlohmann::ordered_json> ordered = shared_.empty_ordered;
  if (!pillar.is_object() || !pillar.empty()) {
    sorted = std::make_shared<const nlohmann::json>(pillar);
    ordered = std::make_shared<const nlohmann::ordered_json>(std::move(pillar));
  }
  std::lock_guard lock(mu_);
  pillar_ = std::move(sorted);
  ordered_pillar_ = std::move(ordered);
}

std::shared_ptr<const nlohmann::json> sim_context::pillar() const {
  std::lock_guard lock(mu_);
  return pillar_;
}

std::shared_ptr<const nlohmann::ordered_json> sim_context::ordered_pillar() const {
  std::lock_guard lock(mu_);
  return ordered_pillar_;
}

std::string sim_context::grains_file() const { return shared_.grains_dir + "/" + id_; }

void sim_context::refresh_grains() {
  if (!masters_) return;
  masters_->send_to_masters(net::make_frame({proto::msg_type::grains, 0, {{"grains", *grains_}}}));
}

bool sim_context::refresh_pillar(std::string& why) {
  static const auto request = net::make_frame({proto::msg_type::pillar_request, 0, {}});
  if (masters_ && masters_->send_to_masters(request) > 0) return true;
  why = "no master is connected to compile the pillar";
  return false;
}

fileserver::client& sim_context::files() {
  std::call_once(files_once_, [this] {
    files_ = std::make_unique<fileserver::shared_client>(shared_.files, link_files{masters_});
  });
  return *files_;
}

}  // namespace brine::swarm
