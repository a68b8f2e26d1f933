// Salt's pure data helpers that SLS templates call, as execution functions:
// slsutil (merge, merge_all, update, serialize, deserialize), defaults
// (merge, update, deepcopy), log (debug ... critical: logged, return None)
// and file.join/dirname/basename. Templates reach the same
// names through the state compiler's bridge, which runs its own versions on
// template values (they keep key order and change their arguments in place,
// as Salt's do); these serve brine call and brine cmd.

#include <spdlog/spdlog.h>


#include <yaml-cpp/yaml.h>

#include "base/yaml_json.h"
#include "modules/arguments.h"
#include "modules/context.h"
#include "modules/data.h"
#include "modules/registry.h"

namespace brine::modules {

namespace slsutil_mod {
namespace {

using nlohmann::json;

// salt.utils.dictupdate.update.
json& update(json& dest, const json& upd, bool recursive, bool merge_lists) {
  if (!dest.is_object() || !upd.is_object()) {
    throw base::error("Cannot update using non-dict types in dictupdate.update()");
  }
  bool shared = false;
  for (const auto& [k, v] : upd.items()) shared = shared || dest.contains(k);
  if (!shared) recursive = false;
  for (const auto& [k, val] : upd.items()) {
    auto it = dest.find(k);
    if (recursive && it != dest.end() && it->is_object() && val.is_object()) {
      update(*it, val, true, merge_lists);
    } else if (recursive && it != dest.end() && it->is_array() && val.is_array() && merge_lists) {
      for (const auto& x : val) {
        if (std::find(it->begin(), it->end(), x) == it->end()) it->push_back(x);
      }
    } else {
      dest[k] = val;
    }
  }
  return dest;
}

json merge(json a, const json& b, const std::string& strategy, bool merge_lists) {
  if (strategy == "overwrite" && a.is_object() && b.is_object()) {
    for (const auto& [k, v] : b.items()) {
      if (a.contains(k)) a[k] = v;
    }
  }
  return update(a, b, true, strategy == "none" ? false : merge_lists);
}

asio::awaitable<outcome> slsutil_merge(call c) {
  arguments a("slsutil.merge", c, {"obj_a", "obj_b", "strategy", "renderer", "merge_lists"});
  co_return outcome{merge(a.need("obj_a"), a.need("obj_b"), a.scalar_text("strategy", "smart"),
                          a.flag("merge_lists", false))};
}

asio::awaitable<outcome> slsutil_merge_all(call c) {
  arguments a("slsutil.merge_all", c, {"lst", "strategy", "renderer", "merge_lists"});
  const json& lst = a.need("lst");
  if (!lst.is_array()) a.fail("lst must be a list");
  json ret = json::object();
  for (const auto& obj : lst) {
    ret = merge(ret, obj, a.scalar_text("strategy", "smart"), a.flag("merge_lists", false));
  }
  co_return outcome{ret};
}

asio::awaitable<outcome> slsutil_update(call c) {
  arguments a("slsutil.update", c, {"dest", "upd", "recursive_update", "merge_lists"});
  json dest = a.need("dest");
  co_return outcome{update(dest, a.need("upd"), a.flag("recursive_update", true),
                           a.flag("merge_lists", false))};
}

asio::awaitable<outcome> slsutil_serialize(call c) {
  arguments a("slsutil.serialize", c, {"serializer", "obj"}, true);
  std::string s = a.scalar_text("serializer", "");
  const json* obj = a.get("obj");
  json v = obj ? *obj : json();
  if (s == "json") co_return outcome{v.dump()};
  if (s == "yaml") {
    YAML::Emitter out;
    out << YAML::Load(v.dump());
    co_return outcome{std::string(out.c_str()) + "\n"};
  }
  a.fail("serializer '" + s + "' is not supported (json, yaml)");
}

asio::awaitable<outcome> slsutil_deserialize(call c) {
  arguments a("slsutil.deserialize", c, {"serializer", "stream_or_string"}, true);
  std::string s = a.scalar_text("serializer", "");
  std::string text = a.scalar_text("stream_or_string", "");
  if (s == "json") {
    try {
      co_return outcome{json::parse(text)};
    } catch (const json::exception& e) {
      a.fail(e.what());
    }
  }
  if (s == "yaml") {
    try {
      co_return outcome{base::yaml_to_json(YAML::Load(text))};
    } catch (const YAML::Exception& e) {
      a.fail(e.what());
    }
  }
  a.fail("serializer '" + s + "' is not supported (json, yaml)");
}

asio::awaitable<outcome> defaults_merge(call c) {
  arguments a("defaults.merge", c, {"dest", "src", "merge_lists", "in_place", "convert_none"});
  json dest = a.need("dest");
  json src = a.need("src");
  bool convert = a.flag("convert_none", true);
  if (src.is_null() && convert) src = json::object();
  if (dest.is_null() && convert) dest = json::object();
  co_return outcome{update(dest, src, true, a.flag("merge_lists", false))};
}

asio::awaitable<outcome> defaults_update(call c) {
  arguments a("defaults.update", c, {"dest", "defaults", "merge_lists", "in_place", "convert_none"});
  json nodes = a.need("dest");
  json defaults = a.need("defaults");
  bool convert = a.flag("convert_none", true);
  if (nodes.is_null() && convert) nodes = json::object();
  if (defaults.is_null() && convert) defaults = json::object();
  if (!nodes.is_object()) a.fail("dest must be a dictionary");
  for (auto& [name, vars] : nodes.items()) {
    json merged = defaults;
    json v = vars.is_null() && convert ? json::object() : vars;
    vars = update(merged, v, true, a.flag("merge_lists", true));
  }
  co_return outcome{nodes};
}

asio::awaitable<outcome> defaults_deepcopy(call c) {
  arguments a("defaults.deepcopy", c, {"source"});
  co_return outcome{a.need("source")};
}

asio::awaitable<outcome> file_join(call c) {
  arguments a("file.join", c, {}, true);
  std::string out;
  bool first = true;
  for (const auto& p : a.rest()) {
    std::string s = a.text_of("path", p);
    if (first || s.starts_with("/")) {
      out = s;
    } else if (out.empty() || out.ends_with("/")) {
      out += s;
    } else {
      out += "/" + s;
    }
    first = false;
  }
  co_return outcome{out};
}

asio::awaitable<outcome> file_dirname(call c) {
  arguments a("file.dirname", c, {"path"});
  std::string p = a.text_of("path", a.need("path"));
  auto at = p.rfind('/');
  if (at == std::string::npos) co_return outcome{""};
  std::string head = p.substr(0, at + 1);
  if (head.find_first_not_of('/') != std::string::npos) {
    while (head.ends_with("/")) head.pop_back();
  }
  co_return outcome{head};
}

asio::awaitable<outcome> file_basename(call c) {
  arguments a("file.basename", c, {"path"});
  std::string p = a.text_of("path", a.need("path"));
  auto at = p.rfind('/');
  co_return outcome{at == std::string::npos ? p : p.substr(at + 1)};
}

template <spdlog::level::level_enum L>
asio::awaitable<outcome> log_at(call c) {
  arguments a("log", c, {"message"}, true);
  const json* m = a.get("message");
  spdlog::log(L, "{}", m ? (m->is_string() ? m->get<std::string>() : m->dump()) : "");
  co_return outcome{nullptr};
}

}  // namespace
}  // namespace slsutil_mod

void register_slsutil_module(registry& reg) {
  using namespace slsutil_mod;
  using k = registry::kind;
  reg.add("slsutil.merge", slsutil_merge,
          "slsutil.merge OBJ_A OBJ_B [strategy=smart] [merge_lists=False]: OBJ_B merged into a "
          "copy of OBJ_A (salt.utils.dictupdate.merge)", k::instant);
  reg.add("slsutil.merge_all", slsutil_merge_all,
          "slsutil.merge_all LST [strategy=smart] [merge_lists=False]: the dicts of LST merged "
          "in order", k::instant);
  reg.add("slsutil.update", slsutil_update,
          "slsutil.update DEST UPD [recursive_update=True] [merge_lists=False]: DEST updated "
          "with UPD, recursively", k::instant);
  reg.add("slsutil.serialize", slsutil_serialize,
          "slsutil.serialize SERIALIZER OBJ: OBJ as json or yaml text", k::instant);
  reg.add("slsutil.deserialize", slsutil_deserialize,
          "slsutil.deserialize SERIALIZER TEXT: the data of json or yaml text", k::instant);
  reg.add("defaults.merge", defaults_merge,
          "defaults.merge DEST SRC [merge_lists=False]: SRC merged into DEST, recursively",
          k::instant);
  reg.add("defaults.update", defaults_update,
          "defaults.update DEST DEFAULTS [merge_lists=True]: each value of DEST merged over "
          "DEFAULTS", k::instant);
  reg.add("defaults.deepcopy", defaults_deepcopy, "defaults.deepcopy SOURCE: a copy of SOURCE",
          k::instant);
  reg.add("file.join", file_join, "file.join PATH...: the paths joined as os.path.join does",
          k::instant);
  reg.add("file.dirname", file_dirname, "file.dirname PATH: os.path.dirname of PATH", k::instant);
  reg.add("file.basename", file_basename, "file.basename PATH: os.path.basename of PATH",
          k::instant);
  reg.add("log.debug", log_at<spdlog::level::debug>, "log.debug MESSAGE: logs it; returns None",
          k::instant);
  reg.add("log.info", log_at<spdlog::level::info>, "log.info MESSAGE: logs it; returns None",
          k::instant);
  reg.add("log.warning", log_at<spdlog::level::warn>,
          "log.warning MESSAGE: logs it; returns None", k::instant);
  reg.add("log.error", log_at<spdlog::level::err>, "log.error MESSAGE: logs it; returns None",
          k::instant);
  reg.add("log.critical", log_at<spdlog::level::critical>,
          "log.critical MESSAGE: logs it; returns None", k::instant);
}

}  // namespace brine::modules
