#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

// The PostgreSQL backend is reached through store::open_postgres(); this
// header only exposes the facts about its database that tests and tools need.
namespace brine::store {

// The LISTEN/NOTIFY channels. A payload is lines joined by "\n":
// keys: ORIGIN, ID; returns: ORIGIN, JID, then one line per minion that
// returned (only the returns that were new): `MINION`, or `MINION\tJSON`
// with the return itself ({"fun", "success", "retcode", "return"}) when it
// is small (k_postgres_inline_return bytes).
inline constexpr const char* k_postgres_keys_channel = "brine_keys";
inline constexpr const char* k_postgres_returns_channel = "brine_returns";
inline constexpr size_t k_postgres_inline_return = 1024;
// jobs: ORIGIN, JID, then the job in JSON when the whole fits (else the
// reader reads the row); acks: ORIGIN, JID, then one line per minion that
// acknowledged the job on ORIGIN (no row: announce_acks); minions: ORIGIN,
// then one line per minion whose cached data changed.
inline constexpr const char* k_postgres_jobs_channel = "brine_jobs";
inline constexpr const char* k_postgres_acks_channel = "brine_acks";
inline constexpr const char* k_postgres_minions_channel = "brine_minions";
// presence: ORIGIN, then one line per minion: `+ID` connected to ORIGIN,
// `-ID` left it (written with the minion_data rows).
inline constexpr const char* k_postgres_presence_channel = "brine_presence";
// undelivered: ORIGIN, JID, then one line per minion newly recorded as
// undelivered for the job.
inline constexpr const char* k_postgres_undelivered_channel = "brine_undelivered";
// file_pins: ORIGIN (the pinned gitfs revisions changed; every master reads
// them again).
inline constexpr const char* k_postgres_file_pins_channel = "brine_file_pins";
// reports: ORIGIN, then one line per minion: the newest of its reports that
// the batch stored, `MINION\tJID\tSTARTED_MS\tSTATUS\tTEST(0|1)\tFUN`
// (written with the reports; other masters keep each minion's latest, for
// the inventory's last runs).
inline constexpr const char* k_postgres_reports_channel = "brine_reports";

// The largest payload brine sends (PostgreSQL's limit is 8000 bytes); the
// minions of a bigger batch are split over several notifications.
inline constexpr size_t k_postgres_max_payload = 7900;

// Masters sharing a database hold distinct slots in [0, k_master_slots).
inline constexpr int k_master_slots = 100;

// pg_advisory_lock keys ("brine" and a number): schema migration, master
// slots, and returns against undelivered records.
inline constexpr int64_t k_postgres_schema_lock = 0x6272696e65000001;
inline constexpr int64_t k_postgres_slots_lock = 0x6272696e65000002;
inline constexpr int64_t k_postgres_delivery_lock = 0x6272696e65000003;

// Why a database at `db_version` cannot serve a brine whose schema is
// `code_version` without `brine store migrate` (or an upgrade); empty when it
// can. Version 0 is a database without brine's tables.
std::string postgres_schema_problem(int db_version, int code_version);

}  // namespace brine::store
