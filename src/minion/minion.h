#pragma once

#include <memory>
#include <string>

#include <asio/io_context.hpp>
#include <asio/thread_pool.hpp>

#include "base/config.h"
#include "minion/agent.h"
#include "minion/spool.h"
#include "modules/registry.h"
#include "net/tls.h"
#include "pki/keys.h"

namespace brine::minion {

// The minion daemon: one agent (see agent.h) with the minion's own key, a
// disk spool and the master key pinned in pki_dir.
//
// Lifecycle: the constructor prepares directories and keys (throws
// base::error); run() serves until SIGTERM/SIGINT.
// Threading: an io_context run by two threads; spool writes on a one-thread
// pool.
class minion {
 public:
  explicit minion(base::minion_config cfg);
  int run();

 private:
  bool trust_master(EVP_PKEY* key, const std::string& where);
  asio::awaitable<void> trim_when_idle();

  base::minion_config cfg_;
  asio::io_context io_;
  asio::thread_pool blocking_{1};
  pki::keypair identity_;
  net::tls_context tls_;
  modules::registry functions_;
  spool spool_;
  std::unique_ptr<agent> agent_;
};

agent_settings settings_from(const base::minion_config& cfg);

}  // namespace brine::minion
