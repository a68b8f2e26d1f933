#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

// A state run's catalog asked of a compile master, and its answer: the
// bodies of compile_request and compile_reply (docs/protocol.md, "Compile
// masters"), built and checked here for both ends.
namespace brine::catalog {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

// What a minion's state run compiles: its function's mods, saltenv and
// exclude, and the minion as the compile sees it (grains, the run's pillar
// with pillar= merged, options). The master compiles with exactly these,
// so its low chunks are the ones the minion would have made.
struct request {
  std::string fun;  // state.apply, state.highstate, state.sls, state.test, state.sls_id
  std::optional<std::string> mods;
  std::optional<std::string> saltenv;
  json exclude;  // null or Salt's exclude list
  json grains = json::object();
  ordered_json pillar = ordered_json::object();
  bool pillar_compiled_here = false;
  json opts = json::object();
  json master_tops = json::object();  // Salt's master_tops the minion holds
  std::string jid;  // the job's, for admission (not part of the key)
};

json to_body(const request& r);
// nullopt with `why` naming the field when the body is malformed.
std::optional<request> request_from_body(const json& body, std::string& why);

// The catalog cache's key: SHA-256 (hex) over the saltenvs' revisions
// (saltenv -> manifest revision) and every field of `r` but its jid.
std::string key_of(const request& r, const std::map<std::string, std::string>& revisions);

// A salt:// file a catalog's chunks name, as the master serves it now.
struct file_ref {
  std::string saltenv;
  std::string path;
  std::string hash;
  uint64_t size = 0;
  uint32_t mode = 0644;
};

struct reply {
  enum class kind {
    chunks,  // compiled: run `chunks`
    errors,  // Salt's compile errors (a list of strings), exit code 1
    no_top,  // the top files give this minion nothing
    minion,  // compile on the minion (`reason`): not targeted, or a template
             // calls a function that must run there
  };
  kind what = kind::chunks;
  ordered_json chunks = ordered_json::array();
  json errors = json::array();
  std::string reason;
  std::vector<file_ref> files;  // what the chunks name (kind chunks)
  bool cached = false;          // answered from the catalog cache
};

json to_body(const reply& r);
std::optional<reply> reply_from_body(const json& body, std::string& why);

// The salt:// files `chunks` name anywhere in their arguments, as
// (saltenv, path): the URL's ?saltenv= if it has one, else the chunk's
// __env__; each once, in the order first named.
std::vector<std::pair<std::string, std::string>> files_named(const ordered_json& chunks);

}  // namespace brine::catalog
