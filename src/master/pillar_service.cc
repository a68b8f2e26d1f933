#include "master/pillar_service.h"

#include <spdlog/spdlog.h>

#include <asio/post.hpp>

#include "base/error.h"
#include "ext_pillar/ext_pillar.h"
#include "tops/tops.h"
#include "master/figures.h"
#include "net/connection.h"
#include "proto/frame.h"
#include "state/gpg.h"
#include "state/pillar_salt.h"

namespace brine::master {

pillar_service::pillar_service(const base::master_config& cfg, const target::nodegroups& groups,
                               minion_cache& cache, metrics::histogram& compile_time)
    : cfg_(cfg),
      cache_(cache),
      compile_time_(compile_time),
      worker_(cfg.ext_pillar.empty() && cfg.master_tops.empty() ? 1 : k_ext_pillar_threads) {
  options_.roots = cfg.pillar_roots;
  options_.merging_strategy = cfg.pillar_source_merging_strategy;
  options_.merge_lists = cfg.pillar_merge_lists;
  if (!cfg.pillarenv.empty()) options_.pillarenv = cfg.pillarenv;
  options_.groups = groups;
  modules::register_builtin_modules(functions_);
  options_.salt = state::pillar_salt(cfg.pillar_roots, functions_, nullptr, nlohmann::json::object());
  options_.gpg = state::gpg_decryptor_of({{"gpg_keydir", cfg.gpg_keydir},
                                          {"conf_file", cfg.source},
                                          {"gpg_decrypt_must_succeed", cfg.gpg_decrypt_must_succeed}});
  try {
    options_.ext_pillars = ext_pillar::builtin({cfg.module_options, groups});
    options_.ext_pillar = pillar::parse_ext_pillar(cfg.ext_pillar, options_.ext_pillars);
    options_.ext_pillar_first = cfg.ext_pillar_first;
    tops_ = tops::from_option(cfg.master_tops);
    compiler_ = std::make_shared<const pillar::compiler>(pillar::compiler::load(options_));
  } catch (const std::exception& e) {
    throw base::error("config " + cfg.source + ": pillar: " + e.what());
  }
  loaded_ = std::chrono::steady_clock::now();
}

pillar_service::~pillar_service() { worker_.join(); }

std::shared_ptr<const pillar::compiler> pillar_service::current(bool reload) {
  auto asked = std::chrono::steady_clock::now();
  std::lock_guard lock(mu_);
  // A read that started after this request sees the files as they were
  // asked for: thousands of minions refreshing at once share one read.
  if (reload && loaded_ < asked) {
    auto started = std::chrono::steady_clock::now();
    try {
      compiler_ = std::make_shared<const pillar::compiler>(pillar::compiler::load(options_));
    } catch (const std::exception& e) {
      spdlog::error("pillar: cannot read the pillar tree again ({}); serving the last one",
                    e.what());
    }
    loaded_ = started;
  }
  return compiler_;
}

namespace {

// The compiled pillar as the master keeps it (sorted, for targeting) and
// as the minion gets it (Salt's key order). Salt hands compile errors to
// the minion under _errors; their text names files and lines, never pillar
// values, and only they are logged.
struct pillar_delivery {
  minion_cache::value kept;
  nlohmann::json body;
};

pillar_delivery deliverable(const std::shared_ptr<const pillar::compiler::result>& result,
                            const std::string& id, const char* why, const nlohmann::json& tops) {
  if (result->errors.empty()) {
    // Shares the compiled result: minions that match alike hold one copy.
    return {minion_cache::value(result, &result->pillar),
            proto::pillar_body(result->ordered, tops)};
  }
  auto with_errors = std::make_shared<nlohmann::json>(result->pillar);
  (*with_errors)["_errors"] = result->errors;
  nlohmann::ordered_json ordered = result->ordered;
  ordered["_errors"] = result->errors;
  spdlog::warn("pillar of minion {}{}: {} error(s), the first: {}", id, why, result->errors.size(),
               result->errors.front());
  return {std::move(with_errors), proto::pillar_body(ordered, tops)};
}

}  // namespace

void pillar_service::serve(const std::shared_ptr<session>& s, bool reload) {
  asio::post(worker_, [this, s, reload] { compile_and_send(s, reload); });
}

void pillar_service::compile_and_send(const std::shared_ptr<session>& s, bool reload) {
  auto compiler = current(reload);
  // The cached grains as they are packed: matched in place, not copied.
  packed::document grains = cache_.packed_grains(s->id);
  auto start = std::chrono::steady_clock::now();
  auto compiled = compiler->compile_shared(s->id, grains.root());
  nlohmann::json tops;
  if (tops_) tops = tops_(s->id, grains.root() ? grains.root().to_json() : nlohmann::json::object());
  compile_time_.observe(seconds_since(start));
  auto pillar = deliverable(std::move(compiled), s->id, "", tops);
  cache_.set_pillar(s->id, std::move(pillar.kept));
  s->conn->send(net::make_frame({proto::msg_type::pillar, 0, std::move(pillar.body)}));
}

void pillar_service::serve_call(const std::shared_ptr<session>& s, const nlohmann::json& grains,
                                uint64_t request_id) {
  asio::post(worker_, [this, s, grains, request_id] {
    auto compiler = current(true);
    auto start = std::chrono::steady_clock::now();
    auto compiled = compiler->compile_shared(s->id, &grains);
    nlohmann::json tops;
    if (tops_) tops = tops_(s->id, grains);
    compile_time_.observe(seconds_since(start));
    auto pillar = deliverable(std::move(compiled), s->id, " (for brine call)", tops);
    s->conn->send(net::make_frame({proto::msg_type::pillar, request_id, std::move(pillar.body)}));
  });
}

}  // namespace brine::master
