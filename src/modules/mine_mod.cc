// Salt's mine.get as a masterless minion answers it. salt-call --local reads
// the minion's own mine_cache (what mine.send and mine.update store there);
// brine keeps none, so a masterless mine.get answers {}, as Salt's does on a
// minion that has sent nothing. The mine of a master (the functions every
// minion sends, asked for by target) is not here yet: with a master,
// mine.get says so instead of answering {} for minions that may hold data.

#include <string>

#include "modules/arguments.h"
#include "modules/context.h"
#include "modules/registry.h"

namespace brine::modules {
namespace mine_mod {
namespace {

asio::awaitable<outcome> get(call c) {
  arguments s("mine.get", c, {"tgt", "fun", "tgt_type", "exclude_minion"});
  s.need("tgt");
  s.need("fun");
  // Salt's own test: a masterless minion has file_client local in its opts.
  const auto& opts = need_context(c).opts();
  if (opts.value("file_client", std::string()) != "local")
    s.fail("brine's masters keep no mine yet, so mine.get works only masterless "
           "(brine call --local, file_client: local), where it answers {} as Salt's "
           "salt-call --local does without mine.send; pass the data through pillar instead");
  co_return outcome{nlohmann::json::object()};
}

}  // namespace
}  // namespace mine_mod

void register_mine_module(registry& reg) {
  reg.add("mine.get", mine_mod::get,
          "mine.get TGT FUN [tgt_type=glob] [exclude_minion=False]: the mine data of the "
          "targeted minions. Masterless it answers {} (no mine_cache is kept, as Salt's "
          "salt-call --local has none before mine.send); with a master it is refused: brine's "
          "masters keep no mine yet.\n\nCLI example: brine call --local mine.get '*' "
          "network.ip_addrs");
}

}  // namespace brine::modules
