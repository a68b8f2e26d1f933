#pragma once

#include <asio/awaitable.hpp>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fileserver/client.h"

namespace brine::modules {

class registry;

// The copy of its figures a minion daemon keeps in its cachedir (JSON:
// `time`, `figures`, `prometheus`), which status.metrics reads where no
// daemon runs in the process (brine call).
inline constexpr std::string_view k_metrics_copy = "metrics.json";

// One job the minion is running, as saltutil.running shows it.
struct running_job {
  std::string jid;
  std::string fun;
  nlohmann::json args = nlohmann::json::array();
  nlohmann::json kwargs = nlohmann::json::object();
  double started = 0;  // unix time
};

// What an execution function may know of, and ask of, the minion that runs
// it: its identity, grains, pillar and options, its jobs, its function
// table. The minion daemon implements it, and so does `brine call`. Every
// method is safe from any thread.
class minion_context {
 public:
  virtual ~minion_context();

  virtual const std::string& id() const = 0;
  // Immutable snapshots: a refresh swaps them, a reader keeps its copy.
  virtual std::shared_ptr<const nlohmann::json> grains() const = 0;
  virtual std::shared_ptr<const nlohmann::json> pillar() const = 0;
  // The same pillar in Salt's key order (document order, as compiled), for
  // what iterates it as Salt would (the state compiler's templates). By
  // default pillar()'s, sorted.
  virtual std::shared_ptr<const nlohmann::ordered_json> ordered_pillar() const {
    return std::make_shared<const nlohmann::ordered_json>(*pillar());
  }
  // True when the pillar was compiled here (brine call --local, as
  // salt-call --local's own Pillar, whose mappings below the top stay the
  // OrderedDicts Salt's YAML renderer made); false when a master sent it
  // (msgpack made every mapping a plain dict). Templates see the difference
  // in the `yaml` filter's key order and in Jinja's messages.
  virtual bool pillar_compiled_here() const { return false; }
  // Salt's master_tops for this minion, {saltenv: [sls, ...]}, as its master
  // sent them with the pillar; by default none.
  virtual std::shared_ptr<const nlohmann::json> master_tops() const;
  // The minion's options as Salt's `opts` shows them (config.get reads them).
  virtual const nlohmann::json& opts() const = 0;
  // Where grains.setval / grains.delval keep grains (Salt: /etc/salt/grains).
  virtual std::string grains_file() const = 0;
  virtual const registry& functions() const = 0;
  // salt://: the master's file server through this minion's connection, or
  // the minion's own file_roots when masterless (fileserver/client.h). By
  // default the file_roots of opts(), read in place.
  virtual fileserver::client& files();

  // Collects the grains again (core, the grains file, the configuration) and
  // sends them to the masters.
  virtual void refresh_grains() = 0;
  // Asks the masters for a freshly compiled pillar; false with `why` when
  // none can be asked (masterless: compiled locally instead).
  virtual bool refresh_pillar(std::string& why) = 0;
  // A pillar compiled now for this minion, as Salt's pillar.items asks the
  // master for one each time; the kept pillar() where no one can be asked.
  virtual asio::awaitable<std::shared_ptr<const nlohmann::json>> fresh_pillar() {
    co_return pillar();
  }

  // Compile masters: a state run's catalog compiled by a master that
  // compiles for this minion (its auth_reply lists the `compile` feature).
  // `request` and the answer are the bodies of catalog/request.h. nullopt:
  // no master compiles for it, or none answered; the run compiles here.
  virtual asio::awaitable<std::optional<nlohmann::json>> compile_on_master(nlohmann::json request) {
    (void)request;
    co_return std::nullopt;
  }

  virtual std::vector<running_job> running() const = 0;
  // Cancels the job `jid` (its children are killed); false if it is not
  // running.
  virtual bool kill_job(const std::string& jid) = 0;

  // The minion daemon's own figures (status.metrics): its metrics as a map
  // (metrics::registry::snapshot) and as Prometheus text; null and empty
  // where no daemon runs in this process (brine call, which reads the
  // snapshot the daemon leaves in its cachedir instead).
  virtual nlohmann::json metrics() const { return nullptr; }
  virtual std::string metrics_text() const { return {}; }

 private:
  std::once_flag files_once_;
  std::unique_ptr<fileserver::client> local_files_;
};

// Salt's config.option of a text option such as hosts.file or
// aliases.file: the minion's options, then its grains, then its pillar;
// `fallback` when none holds it as text (or there is no minion).
std::string option_text(const minion_context* context, const std::string& key,
                        const std::string& fallback);

}  // namespace brine::modules
