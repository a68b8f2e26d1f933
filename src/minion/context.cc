#include "minion/context.h"

#include <spdlog/spdlog.h>

#include <filesystem>

#include <yaml-cpp/yaml.h>

#include "base/error.h"
#include "base/fs.h"
#include "base/yaml_json.h"
#include "grains/core.h"

namespace brine::minion {

std::string pillar_cache_path(const base::minion_config& cfg) {
  return cfg.cachedir + "/pillar.json";
}

nlohmann::json opts_of(const base::minion_config& cfg) {
  nlohmann::json masters = nlohmann::json::array();
  for (const auto& m : cfg.masters) masters.push_back(m.text());
  nlohmann::json opts = {{"id", cfg.id},
          {"conf_file", cfg.source},
          {"master", masters.size() == 1 ? masters[0] : masters},
          {"master_port", cfg.master_port},
          {"master_type", cfg.master_type == base::master_mode::failover   ? "failover"
                          : cfg.master_type == base::master_mode::disabled ? "disable"
                                                                           : "str"},
          {"pki_dir", cfg.pki_dir},
          {"cachedir", cfg.cachedir},
          {"file_roots", cfg.file_roots},
          {"pillar_roots", cfg.pillar_roots},
          {"file_client", cfg.file_client},
          {"state_top", cfg.state_top},
          {"top_file_merging_strategy", cfg.top_file_merging_strategy},
          {"env_order", cfg.env_order},
          {"state_auto_order", cfg.state_auto_order},
          {"master_tops_first", cfg.master_tops_first},
          {"test", cfg.test},
          {"failhard", cfg.failhard},
          {"state_output", cfg.state_output},
          {"state_verbose", cfg.state_verbose},
          {"master_alive_interval", cfg.master_alive_interval},
          {"grains_blacklist", cfg.grains_blacklist},
          {"http_request_timeout", cfg.http_request_timeout},
          {"hash_type", cfg.hash_type}};
  // Only where set, as in Salt's opts: config.option falls back to grains
  // and pillar.
  if (!cfg.hosts_file.empty()) opts["hosts.file"] = cfg.hosts_file;
  if (!cfg.gpg_keydir.empty()) opts["gpg_keydir"] = cfg.gpg_keydir;
  opts["gpg_decrypt_must_succeed"] = cfg.gpg_decrypt_must_succeed;
  // Salt's config_dir: the directory of the minion's config file (formulas
  // read it, e.g. openssh-formula's gather_host_keys).
  opts["config_dir"] = std::filesystem::absolute(cfg.source.empty() ? "minion" : cfg.source)
                           .parent_path()
                           .string();
  for (const auto& [name, value] : cfg.module_options.items()) opts[name] = value;
  return opts;
}

context::context(const base::minion_config& cfg, const modules::registry& functions, hooks h)
    : cfg_(cfg), functions_(functions), hooks_(std::move(h)), opts_(opts_of(cfg)) {
  grains_ = std::make_shared<const nlohmann::json>(collect());
  pillar_ = std::make_shared<const nlohmann::json>(nlohmann::json::object());
  ordered_pillar_ = std::make_shared<const nlohmann::ordered_json>(nlohmann::ordered_json::object());
}

std::string context::grains_file() const {
  // Salt: the file `grains` in the directory of the minion config.
  std::filesystem::path conf = std::filesystem::absolute(cfg_.source.empty() ? "minion" : cfg_.source);
  return (conf.parent_path() / "grains").string();
}

nlohmann::json context::collect() const {
  nlohmann::json custom = nlohmann::json::object();
  std::string file = grains_file();
  if (base::file_exists(file)) {
    try {
      auto v = base::yaml_to_json(YAML::LoadFile(file));
      if (v.is_object()) {
        custom = std::move(v);
      } else if (!v.is_null()) {
        spdlog::error("minion {}: grains file {} is not a mapping; ignored", cfg_.id, file);
      }
    } catch (const YAML::Exception& e) {
      spdlog::error("minion {}: grains file {}: {}; ignored", cfg_.id, file, e.what());
    }
  }
  // The config's grains win over the file's, key by key (Salt).
  if (cfg_.grains.is_object()) {
    for (const auto& [k, v] : cfg_.grains.items()) custom[k] = v;
  }
  return grains::apply_custom(grains::core_grains({cfg_.id, BRINE_VERSION, "/"}), custom,
                              cfg_.grains_blacklist);
}

std::shared_ptr<const nlohmann::json> context::grains() const {
  std::lock_guard lock(mu_);
  return grains_;
}

std::shared_ptr<const nlohmann::json> context::pillar() const {
  std::lock_guard lock(mu_);
  return pillar_;
}

void context::refresh_grains() {
  auto fresh = std::make_shared<const nlohmann::json>(collect());
  {
    std::lock_guard lock(mu_);
    grains_ = fresh;
  }
  if (hooks_.grains_changed) hooks_.grains_changed(fresh);
}

bool context::refresh_pillar(std::string& why) {
  if (!hooks_.request_pillar) {
    why = "no master to ask for a pillar";
    return false;
  }
  return hooks_.request_pillar(why);
}

asio::awaitable<std::shared_ptr<const nlohmann::json>> context::fresh_pillar() {
  if (!hooks_.fetch_pillar) co_return pillar();
  co_return co_await hooks_.fetch_pillar();
}

asio::awaitable<std::optional<nlohmann::json>> context::compile_on_master(nlohmann::json request) {
  if (!hooks_.compile) co_return std::nullopt;
  co_return co_await hooks_.compile(std::move(request));
}

std::shared_ptr<const nlohmann::ordered_json> context::ordered_pillar() const {
  std::lock_guard lock(mu_);
  return ordered_pillar_;
}

std::shared_ptr<const nlohmann::json> context::master_tops() const {
  std::lock_guard lock(mu_);
  if (!master_tops_) return modules::minion_context::master_tops();
  return master_tops_;
}

void context::set_master_tops(nlohmann::json tops) {
  auto kept = std::make_shared<const nlohmann::json>(std::move(tops));
  std::lock_guard lock(mu_);
  master_tops_ = std::move(kept);
}

bool context::pillar_compiled_here() const {
  std::lock_guard lock(mu_);
  return pillar_compiled_here_;
}

void context::set_pillar(nlohmann::ordered_json pillar, bool compiled_here) {
  auto sorted = std::make_shared<const nlohmann::json>(pillar);
  auto ordered = std::make_shared<const nlohmann::ordered_json>(std::move(pillar));
  std::lock_guard lock(mu_);
  pillar_ = std::move(sorted);
  ordered_pillar_ = std::move(ordered);
  pillar_compiled_here_ = compiled_here;
}

fileserver::client& context::files() {
  if (files_) return *files_;
  return modules::minion_context::files();
}

nlohmann::json context::metrics() const {
  return metrics_ ? metrics_->snapshot() : nlohmann::json();
}

std::string context::metrics_text() const { return metrics_ ? metrics_->expose() : std::string(); }

}  // namespace brine::minion
