#include "base/error.h"
#include "store/store.h"

namespace brine::store {

// Placeholder until the libpq backend lands.
std::unique_ptr<store> open_postgres(const options&) {
  throw base::error("store: PostgreSQL support is not built in yet");
}

}  // namespace brine::store
