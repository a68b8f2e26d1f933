#include "cli/highstate_output.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <vector>

#include "base/python.h"
#include "cli/output.h"
#include "state/high.h"

namespace brine::cli {

using ojson = nlohmann::ordered_json;

namespace {

struct palette {
  std::string green, cyan, red, light_red, light_yellow, endc;
};

palette colors(bool on) {
  if (!on) return {};
  return {"\033[0;32m", "\033[0;36m", "\033[0;31m", "\033[1;31m", "\033[1;33m", "\033[0;0m"};
}

std::vector<std::string> split_tag(const std::string& tag) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (;;) {
    size_t at = tag.find("_|-", start);
    parts.push_back(tag.substr(start, at == std::string::npos ? std::string::npos : at - start));
    if (at == std::string::npos) break;
    start = at + 3;
  }
  while (parts.size() < 4) parts.push_back("");
  return parts;
}

std::string py(const ojson& v) { return v.is_string() ? v.get<std::string>() : state::py_str(v); }

std::string strip(const std::string& s) {
  auto b = s.find_first_not_of(" \t\n\r\f\v");
  if (b == std::string::npos) return "";
  auto e = s.find_last_not_of(" \t\n\r\f\v");
  return s.substr(b, e - b + 1);
}

// Python's str() of a float as Salt prints a duration.
std::string duration_text(const ojson& d) {
  if (d.is_string()) return d.get<std::string>();
  return state::py_str(d);
}

std::string terse(const std::string& tcolor, const std::vector<std::string>& comps,
                  const ojson& ret, const palette& c) {
  std::string result = "Clean";
  if (!ret.value("changes", ojson::object()).empty()) result = "Changed";
  const ojson& r = ret.contains("result") ? ret["result"] : ojson();
  if (r.is_boolean() && !r.get<bool>()) {
    result = "Failed";
  } else if (r.is_null()) {
    result = "Differs";
  }
  std::string out = tcolor + "  Name: " + comps[2] + " - Function: " + comps[0] + "." +
                    comps[3] + " - Result: " + result;
  if (ret.contains("start_time")) {
    out += " - Started: " + py(ret["start_time"]) +
           " - Duration: " + duration_text(ret["duration"]) + " ms";
  }
  return out + c.endc;
}

}  // namespace

bool is_state_function(const std::string& fun) {
  for (const char* f : {"state.apply", "state.highstate", "state.sls", "state.sls_id",
                        "state.single", "state.test", "state.top", "state.template",
                        "state.template_str", "state.pkg"}) {
    if (fun == f) return true;
  }
  return false;
}

std::string highstate_out(const std::string& host, const ojson& data, const highstate_options& o) {
  palette c = colors(o.color);
  std::string hcolor = c.green;
  std::vector<std::string> lines;
  if (data.is_array()) {
    hcolor = c.light_red;
    lines.push_back("    " + hcolor + "Data failed to compile:" + c.endc);
    for (const auto& err : data) {
      lines.push_back(hcolor + "----------\n    " + py(err) + c.endc);
    }
  } else if (!data.is_object()) {
    std::string text = nested_at(nlohmann::json(data), 4);
    if (!text.empty() && text.back() == '\n') text.pop_back();
    lines.push_back(text);
    hcolor = c.cyan;
  } else {
    std::vector<std::pair<std::string, const ojson*>> states;
    for (const auto& [tag, info] : data.items()) {
      if (info.is_object() && info.contains("result")) states.emplace_back(tag, &info);
    }
    std::stable_sort(states.begin(), states.end(), [](const auto& a, const auto& b) {
      return a.second->value("__run_num__", 0) < b.second->value("__run_num__", 0);
    });
    // Counts by result: true, false, null (Salt's rcounts).
    int succeeded = 0, failed = 0, not_run = 0, warnings = 0, changed = 0;
    double total_ms = 0;
    for (const auto& [tag, retp] : states) {
      ojson ret = *retp;
      const ojson result = ret["result"];
      bool is_failed = result.is_boolean() && !result.get<bool>();
      bool is_none = result.is_null();
      if (is_failed) {
        ++failed;
      } else if (is_none) {
        ++not_run;
      } else {
        ++succeeded;
      }
      if (ret.contains("duration") && ret["duration"].is_number()) {
        total_ms += ret["duration"].get<double>();
      }
      const ojson changes = ret.value("changes", ojson::object());
      bool schanged = !changes.empty();
      std::string ctext;
      if (schanged) {
        ctext = changes.is_object()
                    ? "\n" + nested_at(nlohmann::json(changes), 14)
                    : "Invalid Changes data: " + py(changes);
        // Salt's out_format rstrips the nested text (a diff's last context
        // line, a lone space, goes with it).
        while (!ctext.empty() && std::isspace(static_cast<unsigned char>(ctext.back()))) {
          ctext.pop_back();
        }
        ++changed;
      }
      bool ok = result.is_boolean() && result.get<bool>();
      if (!o.state_verbose && ok && !schanged) continue;
      std::string tcolor = schanged ? c.cyan : c.green;
      if (is_failed) {
        hcolor = c.red;
        tcolor = c.red;
      }
      if (is_none) {
        hcolor = c.light_yellow;
        tcolor = c.light_yellow;
      }
      std::string output = o.state_output;
      std::transform(output.begin(), output.end(), output.begin(), ::tolower);
      auto comps = split_tag(tag);
      if (output.size() >= 3 && output.ends_with("_id")) comps[2] = comps[1];
      if (output.starts_with("terse")) {
        lines.push_back(terse(tcolor, comps, ret, c));
        continue;
      }
      if (output.starts_with("mixed")) {
        if (!is_failed) {
          lines.push_back(terse(tcolor, comps, ret, c));
          continue;
        }
      } else if (output.starts_with("changes")) {
        if (ok && !schanged) {
          lines.push_back(terse(tcolor, comps, ret, c));
          continue;
        }
      }
      std::string comment = strip(py(ret.value("comment", ojson(""))));
      comment = base::python_replace(comment, "\n", "\n" + std::string(14, ' '));
      lines.push_back(tcolor + "----------" + c.endc);
      lines.push_back("    " + tcolor + "      ID: " + comps[1] + c.endc);
      lines.push_back("    " + tcolor + "Function: " + comps[0] + "." + comps[3] + c.endc);
      if (comps[1] != comps[2]) lines.push_back("    " + tcolor + "    Name: " + comps[2] + c.endc);
      lines.push_back("    " + tcolor + "  Result: " + py(result) + c.endc);
      lines.push_back("    " + tcolor + " Comment: " + comment + c.endc);
      if (ret.contains("start_time")) {
        lines.push_back("    " + tcolor + " Started: " + py(ret["start_time"]) + c.endc);
        std::string d = ret.contains("duration") ? duration_text(ret["duration"]) + " ms" : "";
        lines.push_back("    " + tcolor + "Duration: " + d + c.endc);
      }
      lines.push_back(tcolor + "     Changes:   " + ctext + c.endc);
      if (ret.contains("warnings") && ret["warnings"].is_array()) {
        ++warnings;
        std::string w;
        for (const auto& line : ret["warnings"]) w += (w.empty() ? "" : "\n") + py(line);
        lines.push_back("   " + c.light_red + " Warnings: " + w + c.endc);
      }
    }
    // Salt measures the widest of the counts it kept, one per result kind
    // that occurred.
    size_t count_max = 0;
    auto widen = [&](int n, bool present) {
      if (present) count_max = std::max(count_max, std::to_string(n).size());
    };
    widen(succeeded, succeeded > 0);
    widen(failed, failed > 0);
    widen(not_run, not_run > 0);
    widen(warnings, warnings > 0);
    size_t line_max = 9 + count_max + 2;
    auto counts_line = [&](const std::string& label, int n) {
      std::string num = std::to_string(n);
      size_t width = line_max - (label.size() + 2);
      if (num.size() < width) num = std::string(width - num.size(), ' ') + num;
      return label + ": " + num;
    };
    lines.push_back(c.cyan + "\nSummary for " + host + "\n" + std::string(line_max, '-') + c.endc);
    std::string stats;
    if (not_run > 0) stats = c.light_yellow + "unchanged=" + std::to_string(not_run) + c.endc;
    if (changed > 0) {
      if (!stats.empty()) stats += ", ";
      stats += c.green + "changed=" + std::to_string(changed) + c.endc;
    }
    if (!stats.empty()) stats = " (" + stats + ")";
    lines.push_back(c.green + counts_line("Succeeded", succeeded + not_run) + c.endc + stats);
    lines.push_back((failed ? c.red : c.cyan) + counts_line("Failed", failed) + c.endc);
    if (warnings) lines.push_back(c.light_red + counts_line("Warnings", warnings) + c.endc);
    std::string total = std::to_string(succeeded + failed + not_run);
    size_t tw = line_max - 7;
    if (total.size() < tw) total = std::string(tw - total.size(), ' ') + total;
    lines.push_back(c.cyan + std::string(line_max, '-') + "\nTotal states run: " + total + c.endc);
    std::string unit = "ms";
    if (total_ms > 999) {
      total_ms /= 1000;
      unit = "s";
    }
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.3f", total_ms);
    std::string d = buf;
    size_t dw = line_max - 5;
    if (d.size() < dw) d = std::string(dw - d.size(), ' ') + d;
    lines.push_back(c.cyan + "Total run time: " + d + " " + unit + c.endc);
  }
  std::string out = hcolor + host + ":" + c.endc;
  for (const auto& l : lines) out += "\n" + l;
  return out + "\n";
}

}  // namespace brine::cli
