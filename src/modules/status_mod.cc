// Salt's status module, the functions formulas call: status.time (the
// postgres formula's pillar.example) and status.loadavg; and brine's
// status.metrics, the minion daemon's own figures.

#include <cstdio>
#include <ctime>
#include <string>

#include "base/clock.h"
#include "base/error.h"
#include "base/fs.h"
#include "modules/arguments.h"
#include "modules/context.h"
#include "modules/registry.h"

namespace brine::modules {
namespace status_mod {
namespace {

// status.time(format='%A, %d. %B %Y %I:%M%p'): the local time, formatted
// by strftime (Salt: datetime.today().strftime(format)).
asio::awaitable<outcome> status_time(call c) {
  arguments a("status.time", c, {"format"});
  std::string format = a.text("format").value_or("%A, %d. %B %Y %I:%M%p");
  std::time_t now = std::time(nullptr);
  std::tm local{};
  ::localtime_r(&now, &local);
  std::string out(256 + format.size() * 4, '\0');
  std::size_t n = format.empty() ? 0 : std::strftime(out.data(), out.size(), format.c_str(), &local);
  if (n == 0 && !format.empty()) {
    throw base::error("status.time: format '" + format + "' gives nothing (or too much) to print");
  }
  out.resize(n);
  co_return outcome{out};
}

// status.loadavg(): {"1-min", "5-min", "15-min"} from /proc/loadavg.
asio::awaitable<outcome> status_loadavg(call c) {
  arguments a("status.loadavg", c, {});
  double one = 0, five = 0, fifteen = 0;
  std::FILE* f = std::fopen("/proc/loadavg", "re");
  if (f == nullptr) throw base::error("status.loadavg: cannot read /proc/loadavg");
  int got = std::fscanf(f, "%lf %lf %lf", &one, &five, &fifteen);
  std::fclose(f);
  if (got != 3) throw base::error("status.loadavg: /proc/loadavg is not three numbers");
  nlohmann::json ret = {{"1-min", one}, {"5-min", five}, {"15-min", fifteen}};
  co_return outcome{ret};
}

// The figures of the minion daemon: its own (asked through a master), or
// the copy it keeps in its cachedir (brine call, a process of its own).
// Built outside the coroutine: g++ 12 miscompiles brace-initialised json
// inside coroutines.
outcome metrics_of(const call& c, const std::string& format) {
  if (format != "json" && format != "prometheus") {
    throw base::error("status.metrics: format must be json or prometheus, got '" + format + "'");
  }
  if (c.context == nullptr) throw base::error("status.metrics: no minion runs this function");
  nlohmann::json ret = nlohmann::json::object();
  std::string text;
  nlohmann::json figures = c.context->metrics();
  if (!figures.is_null()) {
    ret["source"] = "daemon";
    text = c.context->metrics_text();
  } else {
    const auto& opts = c.context->opts();
    std::string cachedir = opts.contains("cachedir") && opts["cachedir"].is_string()
                               ? opts["cachedir"].get<std::string>()
                               : std::string("/var/cache/brine/minion");
    std::string path = cachedir + "/" + std::string(k_metrics_copy);
    if (!base::file_exists(path)) {
      throw base::error("status.metrics: no figures in " + path +
                        ": the minion daemon with cachedir " + cachedir +
                        " has not run yet; start it, or ask it through a master "
                        "(brine cmd ID status.metrics)");
    }
    nlohmann::json copy = nlohmann::json::parse(base::read_file(path), nullptr, false);
    if (!copy.is_object() || !copy.contains("figures") || !copy["time"].is_number_integer()) {
      throw base::error("status.metrics: " + path + " is not a copy of the daemon's figures");
    }
    figures = copy["figures"];
    text = copy.value("prometheus", "");
    ret["source"] = "copy";
    ret["time"] = copy["time"];
    ret["age_seconds"] = base::unix_now() - copy["time"].get<int64_t>();
  }
  if (format == "prometheus") return outcome{text};
  ret["figures"] = std::move(figures);
  return outcome{ret};
}

// status.metrics(format='json'): the minion daemon's figures.
asio::awaitable<outcome> status_metrics(call c) {
  arguments a("status.metrics", c, {"format"});
  co_return metrics_of(c, a.text("format").value_or("json"));
}

}  // namespace
}  // namespace status_mod

void register_status_module(registry& reg) {
  using namespace status_mod;
  using k = registry::kind;
  reg.add("status.time", status_time,
          "status.time(format='%A, %d. %B %Y %I:%M%p') -> the minion's local time, formatted "
          "with strftime's directives.\n\n"
          "CLI example: brine cmd '*' status.time '%s'",
          k::instant);
  reg.add("status.loadavg", status_loadavg,
          "status.loadavg() -> {'1-min', '5-min', '15-min'}: the load averages.\n\n"
          "CLI example: brine cmd '*' status.loadavg",
          k::instant);
  reg.add("status.metrics", status_metrics,
          "status.metrics(format='json') -> the minion daemon's own figures: returns sent and "
          "acknowledged, the spool's returns and bytes, connections to masters (reconnects), "
          "jobs received, run and refused, job and state run durations. json: {source, "
          "figures: {name: value, or [{labels, value}]}}; prometheus: the same as Prometheus "
          "text. Asked through a master, the daemon answers with its figures now (source "
          "daemon); brine call, a process of its own, reads the copy the daemon keeps in its "
          "cachedir, rewritten every 10 s when a figure moved (source copy, with its time and "
          "age_seconds).\n\n"
          "CLI example: brine cmd '*' status.metrics\n"
          "CLI example: brine call status.metrics format=prometheus",
          k::instant);
}

}  // namespace brine::modules
