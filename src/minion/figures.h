#pragma once

#include <string_view>

#include "metrics/metrics.h"

namespace brine::minion {

// The minion daemon's figures (status.metrics): each named once here,
// counted where it happens (agent.cc, minion.cc). The figures read when
// asked (the spool, running jobs) are collectors that minion.cc adds.
//
// Lifecycle: made before the links that count into it, kept as long as they.
struct figures {
  explicit figures(metrics::registry& r);

  metrics::registry& registry;
  // Publishes received (repeats included), jobs run to their end and their
  // wall time, publishes refused by reason (spool_full, not_targeted).
  metrics::counter& jobs_received;
  metrics::counter& jobs_run;
  metrics::histogram& job_seconds;
  metrics::family<metrics::counter>& job_refusals;
  // Returns sent to a master (each re-send from the spool too), and those a
  // master acknowledged (the spool forgot them).
  metrics::counter& returns_sent;
  metrics::counter& returns_acknowledged;
  // Connections that reached acceptance by a master (more than the number
  // of masters: reconnects), connections lost or gone silent, and attempts
  // that failed (no connection, handshake or authentication).
  metrics::counter& master_connections;
  metrics::family<metrics::counter>& master_disconnects;
  metrics::counter& connect_failures;
  // State runs (state.apply, highstate, sls, ...) by status (changed,
  // unchanged, failed), wall time.
  metrics::family<metrics::histogram>& state_run_seconds;
};

}  // namespace brine::minion
