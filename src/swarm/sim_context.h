#pragma once

#include <asio/awaitable.hpp>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "fileserver/remote.h"
#include "minion/job_table.h"
#include "minion/master_set.h"
#include "modules/context.h"
#include "modules/registry.h"

namespace brine::swarm {

// What is the same for every simulated minion of a swarm that runs states:
// the function table, the minions' options less their id, the salt:// cache
// (one copy of each file on disk for all of them), and the one empty pillar
// shared by every minion whose master compiles it none.
struct sim_shared {
  const modules::registry& functions;
  nlohmann::json opts;  // opts_of() of the swarm's minion settings; `id` set per minion
  std::shared_ptr<fileserver::file_cache> files;
  std::string grains_dir;  // grains.setval's file per minion: <grains_dir>/<id>
  std::shared_ptr<const nlohmann::json> empty =
      std::make_shared<const nlohmann::json>(nlohmann::json::object());
  std::shared_ptr<const nlohmann::ordered_json> empty_ordered =
      std::make_shared<const nlohmann::ordered_json>(nlohmann::ordered_json::object());
};

// What execution and state functions see of one simulated minion
// (modules::minion_context), kept small: a swarm holds thousands. Its id,
// the grains it sends its masters, the pillar they send it (the shared empty
// one until then, or when it is empty), its options, its running jobs, and a
// salt:// client whose requests go over its own links to its masters and
// whose files are the swarm's shared cache.
//
// Threading: as minion_context, every method is safe from any thread.
class sim_context : public modules::minion_context {
 public:
  sim_context(const sim_shared& shared, std::string id,
              std::shared_ptr<const nlohmann::json> grains);

  // Where salt:// requests and pillar refreshes go: set once, before the
  // minion starts.
  void set_masters(minion::master_set* masters);
  // The pillar a master sent (agent::deps::on_pillar).
  void set_pillar(nlohmann::ordered_json pillar);
  minion::job_table& jobs() { return jobs_; }

  const std::string& id() const override { return id_; }
  std::shared_ptr<const nlohmann::json> grains() const override { return grains_; }
  std::shared_ptr<const nlohmann::json> pillar() const override;
  std::shared_ptr<const nlohmann::ordered_json> ordered_pillar() const override;
  const nlohmann::json& opts() const override { return opts_; }
  std::string grains_file() const override;
  const modules::registry& functions() const override { return shared_.functions; }
  // A simulated minion's grains are what --grains gave it: nothing to
  // collect again; the masters get them again.
  void refresh_grains() override;
  bool refresh_pillar(std::string& why) override;
  std::vector<modules::running_job> running() const override { return jobs_.list(); }
  bool kill_job(const std::string& jid) override { return jobs_.kill(jid); }
  fileserver::client& files() override;

 private:
  const sim_shared& shared_;
  std::string id_;
  std::shared_ptr<const nlohmann::json> grains_;
  nlohmann::json opts_;
  minion::master_set* masters_ = nullptr;
  minion::job_table jobs_;
  mutable std::mutex mu_;
  std::shared_ptr<const nlohmann::json> pillar_;
  std::shared_ptr<const nlohmann::ordered_json> ordered_pillar_;
  std::once_flag files_once_;
  std::unique_ptr<fileserver::shared_client> files_;
};

}  // namespace brine::swarm
