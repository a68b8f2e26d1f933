// The file module (being written).

#include "modules/registry.h"

namespace brine::modules {

void register_file_module(registry&) {}

}  // namespace brine::modules
