#include "modules/apt_sources.h"

#include <algorithm>
#include <cctype>

namespace brine::modules::apt {
namespace {

bool space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

std::string_view strip(std::string_view s) {
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

std::vector<std::string> words(std::string_view s) {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && space(s[i])) ++i;
    std::size_t start = i;
    while (i < s.size() && !space(s[i])) ++i;
    if (i > start) out.emplace_back(s.substr(start, i - start));
  }
  return out;
}

std::string strip_brackets(std::string_view s) {
  while (!s.empty() && (s.front() == '[' || s.front() == ']')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == '[' || s.back() == ']')) s.remove_suffix(1);
  return std::string(s);
}

std::string value_of(const std::string& opt) {
  auto eq = opt.find('=');
  return eq == std::string::npos ? "" : opt.substr(eq + 1);
}

std::string join(const std::vector<std::string>& parts, const char* sep) {
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) out += (i ? sep : "") + parts[i];
  return out;
}

// Salt's _invalid(): whether the line is a source at all, and its words
// with the leading '#' and the trailing comment taken off.
struct split_line {
  bool disabled = false;
  bool invalid = false;
  std::string comment;
  std::vector<std::string> words;
};

split_line classify(std::string_view line) {
  split_line out;
  line = strip(line);
  if (line.empty()) {
    out.invalid = true;
    return out;
  }
  if (line.front() == '#') {
    out.disabled = true;
    line.remove_prefix(1);
  }
  auto hash = line.find('#');
  if (hash != std::string_view::npos && hash > 0) {
    out.comment = std::string(line.substr(hash + 1));
    line = line.substr(0, hash);
  }
  out.words = words(line);
  static const char* const types[] = {"deb", "deb-src", "rpm", "rpm-src"};
  if (out.words.size() < 3 ||
      std::find(std::begin(types), std::end(types), out.words[0]) == std::end(types)) {
    out.invalid = true;
    return out;
  }
  if (out.words[1].starts_with('[') &&
      std::none_of(out.words.begin() + 1, out.words.end(),
                   [](const std::string& w) { return w.ends_with(']'); })) {
    out.invalid = true;
  }
  return out;
}

}  // namespace

std::vector<source_option> line_options(std::string_view line) {
  std::vector<source_option> out;
  // re.search(r"\[(.*=.*?)\]", line): the first '[' followed by an '=' that a
  // ']' follows; the greedy .* takes the last such '=', then the first ']'.
  line = line.substr(0, line.find('\n'));
  std::string_view match;
  for (std::size_t open = line.find('['); open != std::string_view::npos;
       open = line.find('[', open + 1)) {
    auto last_close = line.rfind(']');
    if (last_close == std::string_view::npos || last_close <= open) break;
    auto eq = line.rfind('=', last_close);
    if (eq == std::string_view::npos || eq <= open) continue;
    auto close = line.find(']', eq);
    match = line.substr(open, close - open + 1);
    break;
  }
  if (match.empty()) return out;
  auto put = [&out](const std::string& key, const std::string& full) {
    for (auto& o : out) {
      if (o.key == key) {
        o.full = full;
        return;
      }
    }
    out.push_back({key, full});
  };
  for (const std::string& opt : words(strip_brackets(match))) {
    if (opt.starts_with("arch")) {
      put("arch", opt);
    } else if (opt.starts_with("signed-by")) {
      put("signed-by", opt);
    } else {
      put(opt.substr(0, opt.find('=')), opt);
    }
  }
  return out;
}

source_entry parse_line(std::string_view line, std::string file) {
  source_entry e;
  e.line = std::string(line.substr(0, line.find('\n')));
  e.file = std::move(file);
  split_line s = classify(e.line);
  e.disabled = s.disabled;
  e.comment = s.comment;
  if (s.invalid) {
    e.invalid = true;
    return e;
  }
  std::vector<std::string> tokens = std::move(s.words);
  if (tokens[1].starts_with('[')) {
    std::vector<std::string> bare;
    for (const auto& t : tokens) {
      std::string b = strip_brackets(t);
      if (!b.empty()) bare.push_back(std::move(b));
    }
    tokens = std::move(bare);
    e.options = line_options(e.line);
    for (const auto& o : line_options(e.line)) {
      if (o.key == "arch") {
        // Every arch= option adds (Salt extends one list).
        for (const auto& a : split_list(value_of(o.full))) e.architectures.push_back(a);
      } else if (o.key == "signed-by") {
        e.signedby = value_of(o.full);
      }
      auto at = std::find(tokens.begin(), tokens.end(), o.full);
      if (at != tokens.end()) tokens.erase(at);
    }
  }
  if (tokens.size() < 3) {
    e.invalid = true;
    return e;
  }
  e.type = tokens[0];
  e.uri = tokens[1];
  e.dist = tokens[2];
  e.comps.assign(tokens.begin() + 3, tokens.end());
  return e;
}

std::vector<source_entry> parse_file(std::string_view text, const std::string& file) {
  std::vector<source_entry> out;
  while (!text.empty()) {
    auto nl = text.find('\n');
    out.push_back(parse_line(text.substr(0, nl), file));
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return out;
}

std::string source_entry::render() const {
  if (invalid) return line;
  std::vector<std::string> parts;
  if (disabled) parts.emplace_back("#");
  parts.push_back(type);
  std::vector<source_option> opts = line_options(line);
  auto set = [&opts](const std::string& key, const std::string& full) {
    for (auto& o : opts) {
      if (o.key == key) {
        o.full = full;
        return;
      }
    }
    opts.push_back({key, full});
  };
  if (!architectures.empty()) set("arch", "arch=" + join(architectures, ","));
  if (!signedby.empty()) set("signed-by", "signed-by=" + signedby);
  std::vector<std::string> fulls;
  for (const auto& o : opts) {
    if (!o.full.empty()) fulls.push_back(o.full);
  }
  if (!fulls.empty()) parts.push_back("[" + join(fulls, " ") + "]");
  parts.push_back(uri);
  parts.push_back(dist);
  parts.push_back(join(comps, " "));
  if (!comment.empty()) parts.push_back("#" + comment);
  return join(parts, " ");
}

std::vector<std::string> split_list(std::string_view text) {
  std::vector<std::string> out;
  while (true) {
    auto comma = text.find(',');
    std::string_view part = strip(text.substr(0, comma));
    if (!part.empty()) out.emplace_back(part);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return out;
}

std::string strip_uri(std::string_view repo) {
  std::vector<std::string> parts = words(repo);
  for (auto& p : parts) {
    if (p.starts_with("http://") || p.starts_with("https://") || p.starts_with("ftp://")) {
      while (!p.empty() && p.back() == '/') p.pop_back();
    }
  }
  return join(parts, " ");
}

}  // namespace brine::modules::apt
