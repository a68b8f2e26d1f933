#include "master/compile_service.h"

#include <spdlog/spdlog.h>

#include "base/error.h"
#include "net/connection.h"

namespace brine::master {

target::expression compile_target(const base::master_config& cfg,
                                  const target::nodegroups& groups) {
  try {
    return target::expression::parse(cfg.state_compile_target, target::type::compound, groups);
  } catch (const std::exception& e) {
    throw base::error("config " + cfg.source + ": state_compile_target '" +
                      cfg.state_compile_target + "': " + e.what() +
                      " (a compound target such as 'G@os:Debian and web*'; '*' for every minion)");
  }
}

compile_service::compile_service(const base::master_config& cfg, const target::nodegroups& groups,
                                 fileserver::backend& files, figures& figures)
    : cfg_(cfg),
      figures_(figures),
      compile_time_(figures.compile_seconds.with({"state"})),
      hits_(figures.catalog_lookups.with({"hit"})),
      misses_(figures.catalog_lookups.with({"miss"})) {
  if (cfg.state_compile != "master") return;
  target_ = compile_target(cfg, groups);
  catalog::settings s;
  s.tree_dir = cfg.cachedir + "/catalog-tree";
  s.cache_max_bytes = cfg.catalog_cache_max_bytes;
  s.threads = cfg.compile_threads;
  catalogs_ = std::make_unique<catalog::service>(std::move(s), files);
}

void compile_service::serve(const std::shared_ptr<session>& s, proto::message&& m) {
  auto reply = [s, id = m.id](catalog::reply r) {
    s->conn->send({proto::msg_type::compile_reply, id, catalog::to_body(r)});
  };
  catalog::reply r;
  r.what = catalog::reply::kind::minion;
  if (!catalogs_) {
    r.reason = "state_compile is not master on this master";
    reply(std::move(r));
    return;
  }
  std::string why;
  auto req = catalog::request_from_body(m.body, why);
  if (!req) {
    spdlog::warn("minion {} at {}: compile_request refused: {}", s->id, s->conn->peer(), why);
    r.what = catalog::reply::kind::errors;
    r.errors = nlohmann::json::array({"the master could not read the compile request: " + why});
    reply(std::move(r));
    return;
  }
  nlohmann::json plain_pillar = nlohmann::json(req->pillar);
  target::expression::tree_data data{&req->grains, &plain_pillar};
  if (!target_->matches(s->id, data, false)) {
    figures_.catalogs_to_minion.inc();
    r.reason = "not named by state_compile_target";
    reply(std::move(r));
    return;
  }
  const bool counted = !(scheduled_ && scheduled_(req->jid));
  if (counted) counted_.fetch_add(1, std::memory_order_relaxed);
  catalogs_->compile(s->id, std::move(*req),
                     [this, s, id = m.id, counted](catalog::service::answer a) {
                       if (counted) counted_.fetch_sub(1, std::memory_order_relaxed);
                       if (a.hit) {
                         hits_.inc();
                       } else {
                         misses_.inc();
                         compile_time_.observe(a.seconds);
                       }
                       if (a.body.value("kind", "") == "minion") figures_.catalogs_to_minion.inc();
                       s->conn->send({proto::msg_type::compile_reply, id, std::move(a.body)});
                     });
}

}  // namespace brine::master
