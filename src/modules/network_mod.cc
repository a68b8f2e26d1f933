// The network module (being written).

#include "modules/registry.h"

namespace brine::modules {

void register_network_module(registry&) {}

}  // namespace brine::modules
