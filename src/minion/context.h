#pragma once

#include <asio/awaitable.hpp>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "base/config.h"
#include "fileserver/client.h"
#include "metrics/metrics.h"
#include "minion/job_table.h"
#include "modules/context.h"
#include "modules/registry.h"

namespace brine::minion {

// What execution functions see of a minion (modules::minion_context): its
// grains (core, then the grains file beside its config, then `grains:` of the
// config, less grains_blacklist), the pillar it was given, its options and
// its running jobs. The daemon and `brine call` each hold one; they say how
// grains and pillar refreshes travel (to the masters, or nowhere).
class context : public modules::minion_context {
 public:
  struct hooks {
    // The grains were collected again (send them to the masters).
    std::function<void(const std::shared_ptr<const nlohmann::json>& grains)> grains_changed;
    // saltutil.refresh_pillar: ask for the pillar; false with why if no one
    // can be asked.
    std::function<bool(std::string& why)> request_pillar;
    // pillar.items: a pillar compiled for it now (none: the kept one).
    std::function<asio::awaitable<std::shared_ptr<const nlohmann::json>>()> fetch_pillar;
    // A state run's catalog from a compile master (none: compile here).
    std::function<asio::awaitable<std::optional<nlohmann::json>>(nlohmann::json)> compile;
  };

  // Collects the grains now (blocking: the resolver, /proc, /sys).
  context(const base::minion_config& cfg, const modules::registry& functions, hooks h);

  const std::string& id() const override { return cfg_.id; }
  std::shared_ptr<const nlohmann::json> grains() const override;
  std::shared_ptr<const nlohmann::json> pillar() const override;
  std::shared_ptr<const nlohmann::ordered_json> ordered_pillar() const override;
  bool pillar_compiled_here() const override;
  std::shared_ptr<const nlohmann::json> master_tops() const override;
  const nlohmann::json& opts() const override { return opts_; }
  std::string grains_file() const override;
  const modules::registry& functions() const override { return functions_; }
  void refresh_grains() override;
  bool refresh_pillar(std::string& why) override;
  asio::awaitable<std::shared_ptr<const nlohmann::json>> fresh_pillar() override;
  asio::awaitable<std::optional<nlohmann::json>> compile_on_master(nlohmann::json request) override;
  std::vector<modules::running_job> running() const override { return jobs_.list(); }
  bool kill_job(const std::string& jid) override { return jobs_.kill(jid); }
  fileserver::client& files() override;
  nlohmann::json metrics() const override;
  std::string metrics_text() const override;

  // The pillar as compiled, in Salt's key order; `compiled_here`: by this
  // process (masterless), not sent by a master.
  void set_pillar(nlohmann::ordered_json pillar, bool compiled_here = false);
  // The master_tops a master sent with the pillar.
  void set_master_tops(nlohmann::json tops);
  job_table& jobs() { return jobs_; }
  // Where salt:// goes (set once, before any job runs); unset: the
  // file_roots of the configuration, read in place (masterless).
  void set_files(std::unique_ptr<fileserver::client> files) { files_ = std::move(files); }
  // The daemon's figures (set once, before any job runs); unset in brine
  // call.
  void set_metrics(const metrics::registry* r) { metrics_ = r; }

 private:
  nlohmann::json collect() const;

  const base::minion_config& cfg_;
  const modules::registry& functions_;
  hooks hooks_;
  nlohmann::json opts_;
  job_table jobs_;
  mutable std::mutex mu_;
  std::shared_ptr<const nlohmann::json> grains_;
  std::shared_ptr<const nlohmann::json> pillar_;
  std::shared_ptr<const nlohmann::ordered_json> ordered_pillar_;
  bool pillar_compiled_here_ = false;
  std::shared_ptr<const nlohmann::json> master_tops_;
  std::unique_ptr<fileserver::client> files_;
  const metrics::registry* metrics_ = nullptr;
};

// Where versions before brine call asked the master kept the pillar
// (<cachedir>/pillar.json); the daemon removes it at start.
std::string pillar_cache_path(const base::minion_config& cfg);

// The minion's options as Salt's `opts` names them (config.get reads them).
nlohmann::json opts_of(const base::minion_config& cfg);

}  // namespace brine::minion
