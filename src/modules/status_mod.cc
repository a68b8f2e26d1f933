// Salt's status module, the functions formulas call: status.time (the
// postgres formula's pillar.example) and status.loadavg.

#include <cstdio>
#include <ctime>
#include <string>

#include "base/error.h"
#include "modules/arguments.h"
#include "modules/registry.h"

namespace brine::modules {
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

}  // namespace

void register_status_module(registry& reg) {
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
}

}  // namespace brine::modules
