#include "state/pillar_salt.h"

#include <memory>
#include <utility>

#include "state/bridge.h"
#include "state/highstate.h"

namespace brine::state {

std::function<pillar::options::minion_salt(std::string_view id, const nlohmann::json& grains)>
pillar_salt(std::map<std::string, std::vector<std::string>> pillar_roots,
            const modules::registry& reg, modules::minion_context* ctx, nlohmann::json opts) {
  options so;
  for (auto& [env, dirs] : pillar_roots) so.file_roots.emplace_back(env, std::move(dirs));
  return [so = std::move(so), &reg, ctx, opts = std::move(opts)](std::string_view id,
                                                                  const nlohmann::json& grains) {
    minion m;
    m.id = std::string(id);
    m.grains = json(grains);
    m.opts = json(opts);
    m.opts["id"] = m.id;
    auto c = std::make_shared<compiler>(so, std::move(m));
    return pillar::options::minion_salt{make_salt(*c, reg, ctx), c};
  };
}

}  // namespace brine::state
