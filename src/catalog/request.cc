#include "catalog/request.h"

#include <set>

#include "fileserver/path.h"
#include "fileserver/roots.h"
#include "proto/frame.h"

namespace brine::catalog {

namespace {

json optional_text(const std::optional<std::string>& v) { return v ? json(*v) : json(); }

// An optional string field: absent or null is nullopt; false when it is
// something else.
bool read_optional(const json& body, const char* name, std::optional<std::string>& out) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return true;
  if (!it->is_string()) return false;
  out = it->get<std::string>();
  return true;
}

// Whether every string in `v` is UTF-8 (JSON text, and so the compiler's
// values, cannot hold anything else): a body that fails is refused whole.
template <typename J>
bool utf8(const J& v) {
  try {
    (void)v.dump();
    return true;
  } catch (const nlohmann::json::exception&) {
    return false;
  }
}

const char* kind_name(reply::kind k) {
  switch (k) {
    case reply::kind::chunks:
      return "chunks";
    case reply::kind::errors:
      return "errors";
    case reply::kind::no_top:
      return "no_top";
    case reply::kind::minion:
      return "minion";
  }
  return "chunks";
}

void collect(const ordered_json& v, const std::string& env,
             std::vector<std::pair<std::string, std::string>>& out,
             std::set<std::pair<std::string, std::string>>& seen) {
  if (v.is_string()) {
    const auto& s = v.get_ref<const std::string&>();
    if (!s.starts_with("salt://")) return;
    auto u = fileserver::parse_url(s);
    if (!u) return;
    auto checked = fileserver::check_path(u->path);
    if (!checked.error.empty()) return;
    std::pair<std::string, std::string> ref{u->saltenv.value_or(env), checked.path};
    if (seen.insert(ref).second) out.push_back(std::move(ref));
  } else if (v.is_array() || v.is_object()) {
    for (const auto& e : v) collect(e, env, out, seen);
  }
}

}  // namespace

json to_body(const request& r) {
  json b = json::object();
  b["fun"] = r.fun;
  b["mods"] = optional_text(r.mods);
  b["saltenv"] = optional_text(r.saltenv);
  b["exclude"] = r.exclude;
  b["grains"] = r.grains;
  b["pillar"] = proto::ordered_bytes(r.pillar);
  b["pillar_compiled_here"] = r.pillar_compiled_here;
  b["opts"] = r.opts;
  if (!r.master_tops.empty()) b["master_tops"] = r.master_tops;
  b["jid"] = r.jid;
  return b;
}

std::optional<request> request_from_body(const json& body, std::string& why) {
  request r;
  if (!body.is_object()) {
    why = "the body is not a map";
    return std::nullopt;
  }
  if (!utf8(body)) {
    why = "a text in it is not UTF-8";
    return std::nullopt;
  }
  auto fun = body.find("fun");
  if (fun == body.end() || !fun->is_string()) {
    why = "'fun' is not a string";
    return std::nullopt;
  }
  r.fun = fun->get<std::string>();
  if (!read_optional(body, "mods", r.mods)) {
    why = "'mods' is not a string";
    return std::nullopt;
  }
  if (!read_optional(body, "saltenv", r.saltenv)) {
    why = "'saltenv' is not a string";
    return std::nullopt;
  }
  r.exclude = body.value("exclude", json());
  auto grains = body.find("grains");
  if (grains == body.end() || !grains->is_object()) {
    why = "'grains' is not a map";
    return std::nullopt;
  }
  r.grains = *grains;
  auto pillar = body.find("pillar");
  std::optional<ordered_json> p;
  if (pillar != body.end() && pillar->is_binary()) p = proto::from_ordered_bytes(*pillar);
  if (!p || !p->is_object()) {
    why = "'pillar' is not MessagePack bytes of a map";
    return std::nullopt;
  }
  if (!utf8(*p)) {
    why = "a text in 'pillar' is not UTF-8";
    return std::nullopt;
  }
  r.pillar = std::move(*p);
  auto here = body.find("pillar_compiled_here");
  r.pillar_compiled_here = here != body.end() && here->is_boolean() && here->get<bool>();
  auto opts = body.find("opts");
  if (opts == body.end() || !opts->is_object()) {
    why = "'opts' is not a map";
    return std::nullopt;
  }
  r.opts = *opts;
  if (auto t = body.find("master_tops"); t != body.end() && t->is_object()) r.master_tops = *t;
  auto jid = body.find("jid");
  if (jid != body.end() && jid->is_string()) r.jid = jid->get<std::string>();
  return r;
}

std::string key_of(const request& r, const std::map<std::string, std::string>& revisions) {
  // Length-prefixed fields: no two different requests give the same text.
  std::string text;
  auto field = [&text](std::string_view v) {
    text += std::to_string(v.size());
    text += ':';
    text += v;
  };
  for (const auto& [env, rev] : revisions) {
    field(env);
    field(rev);
  }
  field("|");
  field(r.mods ? "m" + *r.mods : "-");
  field(r.saltenv ? "s" + *r.saltenv : "-");
  // MessagePack, not JSON text: exact for any value (maps sorted, the
  // pillar in its order).
  auto packed = [&field](const std::vector<uint8_t>& bytes) {
    field(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  };
  packed(json::to_msgpack(r.exclude));
  packed(json::to_msgpack(r.grains));
  packed(ordered_json::to_msgpack(r.pillar));
  field(r.pillar_compiled_here ? "1" : "0");
  packed(json::to_msgpack(r.opts));
  packed(json::to_msgpack(r.master_tops));
  return fileserver::hash_bytes(text);
}

json to_body(const reply& r) {
  json b = json::object();
  b["kind"] = kind_name(r.what);
  switch (r.what) {
    case reply::kind::chunks: {
      b["chunks"] = proto::ordered_bytes(r.chunks);
      json files = json::array();
      for (const auto& f : r.files) {
        files.push_back({{"saltenv", f.saltenv},
                         {"path", f.path},
                         {"hash", f.hash},
                         {"size", f.size},
                         {"mode", f.mode}});
      }
      b["files"] = std::move(files);
      break;
    }
    case reply::kind::errors:
      b["errors"] = r.errors;
      break;
    case reply::kind::no_top:
      break;
    case reply::kind::minion:
      b["reason"] = r.reason;
      break;
  }
  b["cached"] = r.cached;
  return b;
}

std::optional<reply> reply_from_body(const json& body, std::string& why) {
  reply r;
  if (!body.is_object()) {
    why = "the body is not a map";
    return std::nullopt;
  }
  if (!utf8(body)) {
    why = "a text in it is not UTF-8";
    return std::nullopt;
  }
  std::string kind;
  if (auto k = body.find("kind"); k != body.end() && k->is_string()) kind = k->get<std::string>();
  auto cached = body.find("cached");
  r.cached = cached != body.end() && cached->is_boolean() && cached->get<bool>();
  if (kind == "chunks") {
    r.what = reply::kind::chunks;
    auto chunks = body.find("chunks");
    std::optional<ordered_json> c;
    if (chunks != body.end() && chunks->is_binary()) c = proto::from_ordered_bytes(*chunks);
    if (!c || !c->is_array()) {
      why = "'chunks' is not MessagePack bytes of a list";
      return std::nullopt;
    }
    if (!utf8(*c)) {
      why = "a text in 'chunks' is not UTF-8";
      return std::nullopt;
    }
    r.chunks = std::move(*c);
    auto files = body.find("files");
    if (files != body.end() && files->is_array()) {
      for (const auto& f : *files) {
        if (!f.is_object() || !f.contains("path") || !f["path"].is_string() ||
            !f.contains("saltenv") || !f["saltenv"].is_string() || !f.contains("hash") ||
            !f["hash"].is_string()) {
          why = "an entry of 'files' lacks saltenv, path or hash";
          return std::nullopt;
        }
        file_ref ref;
        ref.saltenv = f["saltenv"].get<std::string>();
        ref.path = f["path"].get<std::string>();
        ref.hash = f["hash"].get<std::string>();
        if (auto s = f.find("size"); s != f.end() && s->is_number_unsigned()) {
          ref.size = s->get<uint64_t>();
        }
        if (auto m = f.find("mode"); m != f.end() && m->is_number_unsigned()) {
          ref.mode = m->get<uint32_t>();
        }
        r.files.push_back(std::move(ref));
      }
    }
    return r;
  }
  if (kind == "errors") {
    r.what = reply::kind::errors;
    auto errors = body.find("errors");
    if (errors == body.end() || !errors->is_array()) {
      why = "'errors' is not a list";
      return std::nullopt;
    }
    r.errors = *errors;
    return r;
  }
  if (kind == "no_top") {
    r.what = reply::kind::no_top;
    return r;
  }
  if (kind == "minion") {
    r.what = reply::kind::minion;
    if (auto why_ = body.find("reason"); why_ != body.end() && why_->is_string()) {
      r.reason = why_->get<std::string>();
    }
    return r;
  }
  why = "'kind' is not chunks, errors, no_top or minion";
  return std::nullopt;
}

std::vector<std::pair<std::string, std::string>> files_named(const ordered_json& chunks) {
  std::vector<std::pair<std::string, std::string>> out;
  std::set<std::pair<std::string, std::string>> seen;
  if (!chunks.is_array()) return out;
  for (const auto& chunk : chunks) {
    if (!chunk.is_object()) continue;
    std::string env = "base";
    if (auto e = chunk.find("__env__"); e != chunk.end() && e->is_string()) {
      env = e->get<std::string>();
    }
    for (auto it = chunk.begin(); it != chunk.end(); ++it) {
      if (it.key().starts_with("__")) continue;
      collect(it.value(), env, out, seen);
    }
  }
  return out;
}

}  // namespace brine::catalog
