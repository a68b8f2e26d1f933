// Salt's http_json and http_yaml ext_pillar: a document fetched over HTTP
// for each minion, "%s" in the URL its id, and with with_grains each
// "<grain>" the value of that grain of the minion.
#include <spdlog/spdlog.h>

#include <regex>

#include "base/error.h"
#include "base/python.h"
#include "base/python_str.h"
#include "base/python_truth.h"
#include "ext_pillar/arguments.h"
#include "ext_pillar/ext_pillar.h"
#include "http/client.h"
#include "modules/data.h"
#include "render/yaml.h"

namespace brine::ext_pillar {

using nlohmann::ordered_json;

namespace http_fetch {
namespace {

// The URL for this minion, or nullopt (logged as Salt logs it) when a
// grain it names is missing or false.
std::optional<std::string> url_for(const pillar::options::ext_call& call, std::string url,
                                   bool with_grains) {
  url = base::python_replace(std::move(url), "%s", base::url_quote(call.id));
  if (!with_grains) return url;
  nlohmann::json grains = call.grains ? call.grains.to_json() : nlohmann::json::object();
  static const std::regex k_grain("<(.*?)>");
  std::string original = url;
  for (std::sregex_iterator m(original.begin(), original.end(), k_grain), end; m != end; ++m) {
    std::string name = (*m)[1].str();
    const nlohmann::json* v = modules::traverse(grains, name, ":");
    if (v == nullptr || !base::python_truth(*v)) {
      spdlog::error("Unable to get minion '{}' grain: {}", call.id, name);
      return std::nullopt;
    }
    url = base::python_replace(std::move(url), "<" + name + ">", base::url_quote(base::python_str_of(*v)));
  }
  return url;
}

pillar::options::ext_function fetcher(bool json) {
  return [json](const pillar::options::ext_call& call) -> ordered_json {
    std::vector<detail::parameter> params = {{"url", std::nullopt},
                                             {"with_grains", ordered_json(false)},
                                             {"header_dict", ordered_json(nullptr)},
                                             {"auth", ordered_json(nullptr)},
                                             {"username", ordered_json(nullptr)},
                                             {"password", ordered_json(nullptr)}};
    // Salt 3006 added namespace to http_json only.
    if (json) params.push_back({"namespace", ordered_json(nullptr)});
    auto args = detail::bind(call.config, params);
    if (!args[0].is_string()) throw base::error("url must be a string, got " + args[0].dump());
    auto url = url_for(call, args[0].get<std::string>(), base::python_truth(args[1]));
    if (!url) return ordered_json::object();
    http::get_options o;
    if (args[2].is_object()) {
      for (const auto& [name, value] : args[2].items()) o.headers[name] = detail::text_of(value);
    }
    // auth: (user, password), as requests takes it; username and password win.
    if (args[3].is_array() && args[3].size() == 2) {
      o.username = detail::text_of(args[3][0]);
      o.password = detail::text_of(args[3][1]);
    }
    if (args[4].is_string()) o.username = args[4].get<std::string>();
    if (args[5].is_string()) o.password = args[5].get<std::string>();
    std::string space = json && args[6].is_string() ? args[6].get<std::string>() : "";
    spdlog::debug("Getting url: {}", http::redact_url(*url));
    http::reply r = http::get(*url, o);
    if (r.status < 200 || r.status >= 300) {
      // Salt's http.query gives no "dict" then: its words, and the status.
      spdlog::error("Error on minion '{}' http query: {}\nMore Info:\nstatus: {}", call.id,
                    http::redact_url(*url), r.status);
      return ordered_json::object();
    }
    try {
      ordered_json data = json ? ordered_json::parse(r.body)
                               : render::load_yaml<ordered_json>(r.body, http::redact_url(*url));
      if (space.empty()) return data;
      ordered_json nested = ordered_json::object();
      nested[space] = std::move(data);
      return nested;
    } catch (const std::exception& e) {
      throw base::error(std::string("the body of ") + http::redact_url(*url) + " is not " +
                        (json ? "JSON" : "YAML") + ": " + e.what());
    }
  };
}

}  // namespace
}  // namespace http_fetch

pillar::options::ext_function http_json() { return http_fetch::fetcher(true); }
pillar::options::ext_function http_yaml() { return http_fetch::fetcher(false); }

}  // namespace brine::ext_pillar
