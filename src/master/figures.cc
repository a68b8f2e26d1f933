#include "master/figures.h"

#include <string>

#include "proto/message.h"

namespace brine::master {

namespace {

using metrics::seconds_buckets;

// Store calls: from a tenth of a millisecond (an SQLite write) to 10 s (a
// PostgreSQL failover).
std::vector<double> store_buckets() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
          0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,    10};
}

}  // namespace

figures::figures(metrics::registry& r)
    : registry(r),
      handshakes(r.add_counter_family("brine_handshakes_total",
                                      "TLS handshakes of minion connections, by result.",
                                      {"result"})),
      handshakes_ok(handshakes.with({"ok"})),
      handshakes_failed(handshakes.with({"failed"})),
      handshakes_in_flight(r.add_gauge("brine_handshakes_in_flight",
                                       "TLS handshakes of minion connections running now.")),
      handshakes_waiting(r.add_gauge(
          "brine_handshakes_waiting",
          "Minion connections waiting for a handshake slot (max_concurrent_handshakes).")),
      connections_refused(r.add_counter(
          "brine_connections_refused_total",
          "Minion connections closed at once because the descriptor limit was reached.")),
      key_signups(r.add_counter_family(
          "brine_key_signups_total",
          "New minion keys, by the state they were given (pending: waiting for 'brine key "
          "accept'; accepted: auto_accept or autosign_file; rejected: autoreject_file; denied: "
          "another key for a known id).",
          {"state"})),
      returns_received(r.add_counter("brine_returns_received_total",
                                     "Job returns received from minions connected here.")),
      feed_returns(r.add_counter(
          "brine_feed_returns_total",
          "Job returns minions delivered to another master of the shared store (a cluster "
          "member or a multi-master peer), learnt here from the store's change feed.")),
      return_latency(r.add_histogram(
          "brine_publish_return_latency_seconds",
          "From a job's publish (its jid) to the arrival of each of its returns here.",
          seconds_buckets())),
      job_refusals(r.add_counter_family(
          "brine_job_refusals_total",
          "Publishes minions refused, by reason (spool_full: the minion's return spool is full, "
          "spool_max_bytes; not_targeted: its own grains or pillar do not match).",
          {"reason"})),
      compile_seconds(r.add_histogram_family(
          "brine_compile_duration_seconds",
          "Compiles on the master, by kind (pillar: a minion's pillar; state: a catalog "
          "compiled for a minion).",
          {"kind"}, seconds_buckets())),
      catalog_lookups(r.add_counter_family(
          "brine_catalog_cache_lookups_total",
          "Compile requests of state runs (state_compile: master) by catalog cache result: hit "
          "(answered without compiling) or miss (compiled).",
          {"result"})),
      catalogs_to_minion(r.add_counter(
          "brine_catalogs_compiled_on_minion_total",
          "Compile requests answered 'compile on the minion': not named by "
          "state_compile_target, or a template calls a function that runs on the minion.")),
      state_run_seconds(
          r.add_histogram_family("brine_state_run_duration_seconds",
                                 "Wall duration of the state runs stored as reports, by status.",
                                 {"status"}, seconds_buckets())),
      file_requests(r.add_counter("brine_fileserver_requests_total",
                                  "salt:// file server requests answered.")),
      file_bytes(r.add_counter("brine_fileserver_bytes_total",
                               "File bytes the salt:// file server sent.")),
      store_seconds(r.add_histogram_family("brine_store_operation_duration_seconds",
                                           "Store calls on the store thread, by operation.", {"op"},
                                           store_buckets())),
      store_add_returns(store_seconds.with({"add_returns"})),
      store_add_reports(store_seconds.with({"add_reports"})),
      store_task(store_seconds.with({"task"})) {
  // Every series a dashboard expects, at 0 from the start, so that rate()
  // and absent() see them before the first event.
  for (const char* s : {"pending", "accepted", "rejected", "denied"}) key_signups.with({s});
  for (const char* r : {"spool_full", "not_targeted", "other"}) job_refusals.with({r});
  for (const char* s : {"unchanged", "changed", "failed"}) state_run_seconds.with({s});
  compile_seconds.with({"pillar"});
  compile_seconds.with({"state"});
  for (const char* r : {"hit", "miss"}) catalog_lookups.with({r});
}

metrics::counter& figures::refusal(std::string_view reason) {
  if (reason == proto::k_not_targeted) return job_refusals.with({"not_targeted"});
  if (reason.find("spool full") != std::string_view::npos) return job_refusals.with({"spool_full"});
  return job_refusals.with({"other"});
}

}  // namespace brine::master
