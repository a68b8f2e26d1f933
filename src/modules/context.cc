#include "modules/context.h"

#include <nlohmann/json.hpp>

#include "fileserver/client.h"

namespace brine::modules {

minion_context::~minion_context() = default;

std::shared_ptr<const nlohmann::json> minion_context::master_tops() const {
  static const auto k_none = std::make_shared<const nlohmann::json>(nlohmann::json::object());
  return k_none;
}

fileserver::client& minion_context::files() {
  std::call_once(files_once_, [this] {
    std::map<std::string, std::vector<std::string>> roots;
    const auto& o = opts();
    if (auto it = o.find("file_roots"); it != o.end() && it->is_object()) {
      for (const auto& [env, dirs] : it->items()) {
        auto& out = roots[env];
        if (dirs.is_string()) out.push_back(dirs.get<std::string>());
        if (dirs.is_array()) {
          for (const auto& d : dirs) {
            if (d.is_string()) out.push_back(d.get<std::string>());
          }
        }
      }
    }
    local_files_ = std::make_unique<fileserver::local_client>(std::move(roots));
  });
  return *local_files_;
}

std::string option_text(const minion_context* context, const std::string& key,
                        const std::string& fallback) {
  if (context == nullptr) return fallback;
  const nlohmann::json& opts = context->opts();
  if (auto it = opts.find(key); it != opts.end() && it->is_string()) return it->get<std::string>();
  for (const auto& data : {context->grains(), context->pillar()}) {
    if (data == nullptr) continue;
    if (auto it = data->find(key); it != data->end() && it->is_string()) return it->get<std::string>();
  }
  return fallback;
}

}  // namespace brine::modules
