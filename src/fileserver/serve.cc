#include "fileserver/serve.h"

#include <algorithm>
#include <string>
#include <vector>

#include "fileserver/path.h"

namespace brine::fileserver {

using json = nlohmann::json;

bool is_count(const json& v) {
  return v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0);
}

namespace {

json manifest_body(const manifest& m) {
  json files = json::array();
  for (const auto& e : m.files) files.push_back(json::array({e.path, e.hash, e.size, e.mode}));
  return {{"saltenv", m.saltenv}, {"revision", m.revision}, {"files", std::move(files)},
          {"dirs", m.dirs}};
}

}  // namespace

json serve(backend& r, const json& request, uint64_t max_reply_bytes) {
  const json* op_field = request.contains("op") ? &request["op"] : nullptr;
  if (op_field == nullptr || !op_field->is_string()) {
    return {{"error", "file_request: op must be envs, list or get"}};
  }
  std::string op = op_field->get<std::string>();
  if (op == "envs") return {{"envs", r.envs()}};
  const json* env = request.contains("saltenv") ? &request["saltenv"] : nullptr;
  if (env == nullptr || !env->is_string() || !valid_saltenv(env->get<std::string>())) {
    return {{"error", "file_request " + op + ": saltenv must be a saltenv name"}};
  }
  std::string saltenv = *env;
  if (op == "list") {
    auto m = r.list(saltenv);
    if (request.contains("revision") && request["revision"] == m->revision) {
      return {{"saltenv", saltenv}, {"revision", m->revision}, {"unchanged", true}};
    }
    return manifest_body(*m);
  }
  if (op != "get") return {{"error", "file_request: unknown op '" + op + "' (envs, list, get)"}};
  const json* files = request.contains("files") ? &request["files"] : nullptr;
  if (files == nullptr || !files->is_array()) {
    return {{"error", "file_request get: files must be a list of [path, offset]"}};
  }
  uint64_t budget = max_reply_bytes;
  if (request.contains("max_bytes") && is_count(request["max_bytes"])) {
    budget = std::min<uint64_t>(budget, request["max_bytes"].get<uint64_t>());
  }
  json out = json::array();
  for (const auto& f : *files) {
    if (!f.is_array() || f.size() != 2 || !f[0].is_string() || !is_count(f[1])) {
      return {{"error", "file_request get: files must be a list of [path, offset]"}};
    }
    std::string raw = f[0];
    auto checked = check_path(raw);
    if (!checked.error.empty()) {
      out.push_back({{"path", raw}, {"error", "refused: " + checked.error}});
      continue;
    }
    uint64_t offset = f[1];
    auto c = r.read(saltenv, checked.path, offset, budget);
    if (!c.error.empty()) {
      out.push_back({{"path", raw}, {"error", c.error}});
      continue;
    }
    budget -= std::min<uint64_t>(budget, c.data.size());
    std::vector<uint8_t> bytes(c.data.begin(), c.data.end());
    out.push_back({{"path", raw},
                   {"offset", offset},
                   {"hash", c.hash},
                   {"size", c.size},
                   {"mode", c.mode},
                   {"data", json::binary(std::move(bytes))}});
    if (budget == 0) break;
  }
  return {{"saltenv", saltenv}, {"files", std::move(out)}};
}

}  // namespace brine::fileserver
