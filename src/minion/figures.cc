#include "minion/figures.h"

namespace brine::minion {

figures::figures(metrics::registry& r)
    : registry(r),
      jobs_received(r.add_counter("brine_minion_publishes_received_total",
                                  "Publishes received from masters (repeats included).")),
      jobs_run(r.add_counter("brine_minion_jobs_run_total", "Jobs this minion ran to their end.")),
      job_seconds(r.add_histogram("brine_minion_job_duration_seconds",
                                  "Wall time of the jobs this minion ran.",
                                  metrics::seconds_buckets())),
      job_refusals(r.add_counter_family(
          "brine_minion_job_refusals_total",
          "Publishes this minion refused, by reason (spool_full: its return spool holds "
          "spool_max_bytes; not_targeted: its grains or pillar do not match).",
          {"reason"})),
      returns_sent(r.add_counter("brine_minion_returns_sent_total",
                                 "Returns sent to masters (re-sends from the spool included).")),
      returns_acknowledged(
          r.add_counter("brine_minion_returns_acknowledged_total",
                        "Returns a master acknowledged as stored (and the spool forgot).")),
      master_connections(r.add_counter(
          "brine_minion_master_connections_total",
          "Connections to a master that it accepted; beyond one per master, reconnects.")),
      master_disconnects(r.add_counter_family(
          "brine_minion_master_disconnects_total",
          "Accepted connections to a master that ended, by how (lost: closed or failed; "
          "silent: nothing came for master_alive_interval).",
          {"reason"})),
      connect_failures(r.add_counter(
          "brine_minion_connect_failures_total",
          "Attempts to reach a master that failed (connection, TLS handshake, authentication).")),
      state_run_seconds(
          r.add_histogram_family("brine_minion_state_run_duration_seconds",
                                 "Wall time of the state runs of this minion, by status.",
                                 {"status"}, metrics::seconds_buckets())) {
  for (const char* reason : {"spool_full", "not_targeted"}) job_refusals.with({reason});
  for (const char* reason : {"lost", "silent"}) master_disconnects.with({reason});
  for (const char* s : {"unchanged", "changed", "failed"}) state_run_seconds.with({s});
}

}  // namespace brine::minion
