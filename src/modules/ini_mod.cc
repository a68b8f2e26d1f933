// Salt's ini_manage module, ini.*: an ini file read into ordered sections
// as salt/modules/ini_manage.py's _Ini and _Section read it (comments and
// unparsed lines kept as entries of their own, indented lines folded into
// the option above, a commented-out option replaced in place by the option
// it names) and written back as Salt's flush writes it ("key = value",
// options before sections, a blank line before each section).

#include <cctype>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/python_str.h"
#include "modules/arguments.h"
#include "modules/py_regex.h"
#include "modules/registry.h"

namespace brine::modules {
namespace ini_mod {
namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;
namespace fs = std::filesystem;

struct section;

// An entry's value: text (None for the placeholder of a key being added),
// or a section.
struct entry {
  std::string key;
  std::optional<std::string> text;
  std::shared_ptr<section> sect;
};

bool is_comment_key(const std::string& key) {
  std::size_t i = 0;
  while (i < key.size() && std::isspace(static_cast<unsigned char>(key[i]))) ++i;
  return i < key.size() && (key[i] == '#' || key[i] == ';');
}

// Python's str.strip(chars) for a set of characters.
std::string strip_chars(std::string s, std::string_view chars) {
  std::size_t b = s.find_first_not_of(chars);
  if (b == std::string::npos) return "";
  std::size_t e = s.find_last_not_of(chars);
  return s.substr(b, e - b + 1);
}

std::vector<std::string> split_lines_on(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (;;) {
    std::size_t at = s.find(sep, start);
    out.push_back(s.substr(start, at == std::string::npos ? std::string::npos : at - start));
    if (at == std::string::npos) return out;
    start = at + 1;
  }
}

// An indentation as Salt compares it: each tab four spaces.
std::string tabs_as_spaces(const std::string& indent) {
  std::string out;
  for (char ch : indent) out += ch == '\t' ? std::string("    ") : std::string(1, ch);
  return out;
}

// _Section: an OrderedDict of entries with the separator and commenter it
// was read with.
struct section {
  std::string name;
  std::string sep = "=";
  std::string com = "#";
  bool no_spaces = false;
  std::vector<entry> entries;

  section(std::string n, std::string separator, std::string commenter, bool no_sp)
      : name(std::move(n)), sep(std::move(separator)), com(std::move(commenter)), no_spaces(no_sp) {}

  entry* find(const std::string& key) {
    for (auto& e : entries)
      if (e.key == key) return &e;
    return nullptr;
  }
  void put(entry e) {  // OrderedDict's __setitem__: in place, else at the end
    if (entry* at = find(e.key)) {
      *at = std::move(e);
    } else {
      entries.push_back(std::move(e));
    }
  }
  std::optional<entry> pop(const std::string& key) {
    for (auto it = entries.begin(); it != entries.end(); ++it) {
      if (it->key == key) {
        entry e = std::move(*it);
        entries.erase(it);
        return e;
      }
    }
    return std::nullopt;
  }

  std::string option_pattern() const {
    return R"((\s*)(.+?)\s*()" + re_escape(sep) + R"()\s*(.*)\s*)";
  }

  // _Section.refresh: the lines of `text` as entries.
  void refresh(std::string text) {
    text = strip_chars(std::move(text), "\n");
    if (text.empty()) return;
    entries.clear();
    py_regex comment(R"(^\s*(#|;)\s*(.*))");
    py_regex indented(R"((\s+)(.*))");
    py_regex option(option_pattern());
    int comments = 1, unknowns = 1;
    std::string curr_indent;
    for (const std::string& line : split_lines_on(text, '\n')) {
      if (comment.match(line)) {
        com = comment.group(line, 1).value_or("#");
        set_text("#comment" + std::to_string(comments++), line);
        continue;
      }
      if (indented.match(line)) {
        std::string indent = indented.group(line, 1).value_or("");
        if (tabs_as_spaces(indent) > curr_indent) {
          if (!entries.empty()) {
            entry& prev = entries.back();
            if (!prev.sect) set_text(prev.key, prev.text.value_or("None") + "\n" + line);
          }
          continue;
        }
      }
      if (option.match(line)) {
        std::string indent = option.group(line, 1).value_or("");
        curr_indent = tabs_as_spaces(indent);
        std::string key = option.group(line, 2).value_or("");
        sep = option.group(line, 3).value_or(sep);
        set_text(key, option.group(line, 4).value_or(""));
        continue;
      }
      set_text("#unknown" + std::to_string(unknowns++), line);
    }
  }

  // _Section.update of one text value, its changes ignored (refresh's use).
  void set_text(const std::string& key, const std::string& value) {
    ojson one = ojson::object();
    one[key] = value;
    update(one);
  }

  // _uncomment_if_commented: a "#key = value" comment gives its place to
  // `key` (with no value yet); else `key` goes at the end.
  void uncomment_if_commented(const std::string& key) {
    py_regex option(option_pattern());
    std::size_t at = entries.size();
    for (std::size_t i = 0; i < entries.size(); ++i) {
      const entry& e = entries[i];
      if (e.key.find("#comment") == std::string::npos || !e.text) continue;
      std::string body = *e.text;
      std::size_t hashes = body.find_first_not_of('#');
      body = hashes == std::string::npos ? "" : body.substr(hashes);
      if (option.match(body) && option.group(body, 2) == key) {
        at = i;
        break;
      }
    }
    if (at < entries.size()) {
      entries[at] = entry{key, std::nullopt, nullptr};
    } else {
      entries.push_back(entry{key, std::nullopt, nullptr});
    }
  }

  // dict(section), nested: what Salt shows as a section's "after".
  ojson as_dict() const {
    ojson out = ojson::object();
    for (const auto& e : entries) {
      if (e.sect) {
        out[e.key] = e.sect->as_dict();
      } else {
        out[e.key] = e.text ? ojson(*e.text) : ojson();
      }
    }
    return out;
  }

  // _Section.update: the changes {key: {before, after}} (a section's own
  // changes nested under its name).
  ojson update(const ojson& values) {
    ojson changes = ojson::object();
    for (const auto& [key, value] : values.items()) {
      entry incoming{key, std::nullopt, nullptr};
      ojson plain;
      if (value.is_object()) {
        incoming.sect = std::make_shared<section>(key, sep, com, no_spaces);
        incoming.sect->update(value);
        plain = incoming.sect->as_dict();
      } else {
        incoming.text = base::python_str_of(value);
        plain = *incoming.text;
      }
      entry* have = find(key);
      if (have == nullptr) {
        changes[key] = ojson{{"before", nullptr}, {"after", plain}};
        if (!incoming.sect) uncomment_if_commented(key);
        put(std::move(incoming));
        continue;
      }
      if (have->sect) {
        if (!incoming.sect) {
          throw base::error("ini.set_option: " + key +
                            " is a section in the file; give it a mapping of options, not a value");
        }
        ojson sub = have->sect->update(value);
        if (!sub.empty()) changes[key] = sub;
        continue;
      }
      bool differ = incoming.sect || have->text != incoming.text;
      if (differ) {
        changes[key] = ojson{{"before", have->text ? ojson(*have->text) : ojson()}, {"after", plain}};
        put(std::move(incoming));
      }
    }
    return changes;
  }

  // gen_ini: "\n[name]\n", then the comments and options in order, then the
  // sections.
  void gen(std::vector<std::string>& out) {
    out.push_back("\n[" + name + "]\n");
    std::vector<section*> sections;
    for (auto& e : entries) {
      if (is_comment_key(e.key)) {
        out.push_back(e.text.value_or("None") + "\n");
      } else if (e.sect) {
        sections.push_back(e.sect.get());
      } else {
        if (sep.find_first_not_of(' ') == std::string::npos) sep = " ";
        if (no_spaces) {
          if (sep != " ") sep = strip_chars(sep, " \t\n\r\f\v");
        } else if (sep != " ") {
          sep = " " + strip_chars(sep, " \t\n\r\f\v") + " ";
        }
        out.push_back(e.key + sep + e.text.value_or("None") + "\n");
      }
    }
    for (section* s : sections) s->gen(out);
  }
};

// Python's str.splitlines, joined with "\n" (the ASCII line breaks).
std::string normal_lines(const std::string& text) {
  std::string out;
  std::string line;
  std::vector<std::string> lines;
  for (std::size_t i = 0; i < text.size(); ++i) {
    char ch = text[i];
    if (ch == '\r' && i + 1 < text.size() && text[i + 1] == '\n') {
      lines.push_back(line);
      line.clear();
      ++i;
    } else if (ch == '\n' || ch == '\r' || ch == '\v' || ch == '\f' || ch == '\x1c' ||
               ch == '\x1d' || ch == '\x1e') {
      lines.push_back(line);
      line.clear();
    } else {
      line += ch;
    }
  }
  if (!line.empty()) lines.push_back(line);
  for (std::size_t i = 0; i < lines.size(); ++i) out += (i ? "\n" : "") + lines[i];
  return out;
}

// _Ini: the file as a section of its own (what is above the first section
// header) holding the sections.
struct ini_file {
  std::string path;
  section top;

  ini_file(std::string p, std::string separator, bool no_spaces)
      : path(std::move(p)), top(path, std::move(separator), "#", no_spaces) {}

  void refresh() {
    std::error_code ec;
    if (!fs::exists(path, ec)) return;
    std::ifstream in(path, std::ios::binary);
    if (!in) throw base::error("Unable to open file '" + path + "'");
    std::ostringstream s;
    s << in.rdbuf();
    std::string text = normal_lines(s.str());
    if (text.empty()) return;
    top.entries.clear();
    // INI_REGX.split: the text before the first header, then name, body...
    py_regex header(R"(^\s*\[(.+?)\]\s*$)", k_re_multiline);
    std::vector<std::string> parts;
    std::size_t pos = 0;
    // A header match is never empty (it holds "[x]"), so each one moves on.
    while (pos < text.size() && header.search(text, pos)) {
      parts.push_back(text.substr(pos, header.begin() - pos));
      parts.push_back(header.group(text, 1).value_or(""));
      pos = header.end();
    }
    parts.push_back(pos < text.size() ? text.substr(pos) : "");
    top.refresh(parts[0]);
    for (std::size_t i = 1; i + 1 < parts.size(); i += 2) {
      section read(parts[i], top.sep, "#", false);
      read.refresh(parts[i + 1]);
      ojson one = ojson::object();
      one[read.name] = read.as_dict();
      top.update(one);
    }
  }

  void flush() {
    std::vector<std::string> out;
    top.gen(out);
    out.erase(out.begin());  // the file's own name
    if (!out.empty()) {  // no line break before the first line
      std::size_t first = out[0].find_first_not_of('\n');
      out[0] = first == std::string::npos ? "" : out[0].substr(first);
    }
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    if (!f) throw base::error("Unable to write file '" + path + "'");
    for (const auto& piece : out) f << piece;
    if (!f.flush()) throw base::error("Unable to write file '" + path + "'");
  }
};

ini_file load(const arguments& a, bool no_spaces = false) {
  std::string path = a.scalar_text("file_name", "");
  if (path.empty()) a.fail("needs file_name: " + a.fun() + " /etc/app.ini ...");
  ini_file f(path, a.scalar_text("separator", "="), no_spaces);
  f.refresh();
  return f;
}

ojson value_of(const entry& e);

// ini_odict2dict: sections and options, comments left out.
ojson without_comments(const section& s) {
  ojson out = ojson::object();
  for (const auto& e : s.entries) {
    if (!e.key.starts_with("#")) out[e.key] = value_of(e);
  }
  return out;
}

// An entry as the functions answer it: a section's options, an option's
// text, None for an option without one.
ojson value_of(const entry& e) {
  if (e.sect) return without_comments(*e.sect);
  return e.text ? ojson(*e.text) : ojson();
}

outcome answer(ojson v) {
  outcome o{json(v), true, 0};
  o.ordered_ret = std::make_shared<const ojson>(std::move(v));
  return o;
}

asio::awaitable<outcome> set_option(call c) {
  arguments a("ini.set_option", c, {"file_name", "sections", "separator", "encoding", "no_spaces"});
  ini_file f = load(a, a.flag("no_spaces", false));
  ojson sections = ojson::object();
  if (const json* s = a.get("sections")) {
    if (!s->is_object()) a.fail("sections must be a mapping of sections (or options) to values");
    sections = ojson(*s);
  }
  ojson changes = f.top.update(sections);
  f.flush();
  co_return answer(std::move(changes));
}

asio::awaitable<outcome> get_option(call c) {
  arguments a("ini.get_option", c, {"file_name", "section", "option", "separator", "encoding"});
  ini_file f = load(a);
  std::string option = a.scalar_text("option", "");
  std::string sect = a.scalar_text("section", "");
  entry* e = nullptr;
  if (!sect.empty()) {
    entry* s = f.top.find(sect);
    if (s != nullptr && s->sect) e = s->sect->find(option);
  } else {
    e = f.top.find(option);
  }
  if (e == nullptr) co_return answer(ojson());
  co_return answer(value_of(*e));
}

asio::awaitable<outcome> remove_option(call c) {
  arguments a("ini.remove_option", c, {"file_name", "section", "option", "separator", "encoding"});
  ini_file f = load(a);
  std::string option = a.scalar_text("option", "");
  std::string sect = a.scalar_text("section", "");
  std::optional<entry> gone;
  entry* s = sect.empty() ? nullptr : f.top.find(sect);
  if (s != nullptr && s->sect) {
    gone = s->sect->pop(option);
  } else {
    gone = f.top.pop(option);
  }
  f.flush();
  if (!gone) co_return answer(ojson());
  co_return answer(value_of(*gone));
}

asio::awaitable<outcome> get_section(call c) {
  arguments a("ini.get_section", c, {"file_name", "section", "separator", "encoding"});
  ini_file f = load(a);
  entry* s = f.top.find(a.scalar_text("section", ""));
  co_return answer(s != nullptr && s->sect ? without_comments(*s->sect) : ojson::object());
}

asio::awaitable<outcome> remove_section(call c) {
  arguments a("ini.remove_section", c, {"file_name", "section", "separator", "encoding"});
  ini_file f = load(a);
  std::optional<entry> gone = f.top.pop(a.scalar_text("section", ""));
  if (!gone) co_return answer(ojson());
  f.flush();
  co_return answer(gone->sect ? without_comments(*gone->sect) : ojson::object());
}

asio::awaitable<outcome> get_ini(call c) {
  arguments a("ini.get_ini", c, {"file_name", "separator", "encoding"});
  ini_file f = load(a);
  co_return answer(without_comments(f.top));
}

}  // namespace
}  // namespace ini_mod

void register_ini_module(registry& reg) {
  using namespace ini_mod;
  reg.add("ini.set_option", set_option,
          "ini.set_option FILE_NAME SECTIONS [separator='='] [no_spaces=False]: sets the options "
          "of SECTIONS ({section: {key: value}}, or {key: value} above every section) in the ini "
          "file, creating it and its sections as needed; returns the changes {key: {before, "
          "after}}.\n\nCLI example: brine cmd '*' ini.set_option /etc/app.ini '{main: {port: 80}}'");
  reg.add("ini.get_option", get_option,
          "ini.get_option FILE_NAME SECTION OPTION [separator='=']: the option's value, None when "
          "it is not there (SECTION '' for one above every section).\n\nCLI example: brine cmd "
          "'*' ini.get_option /etc/app.ini main port");
  reg.add("ini.remove_option", remove_option,
          "ini.remove_option FILE_NAME SECTION OPTION [separator='=']: removes the option and "
          "returns its value (None when it was not there).\n\nCLI example: brine cmd '*' "
          "ini.remove_option /etc/app.ini main port");
  reg.add("ini.get_section", get_section,
          "ini.get_section FILE_NAME SECTION [separator='=']: the section's options, {} when it "
          "is not there.\n\nCLI example: brine cmd '*' ini.get_section /etc/app.ini main");
  reg.add("ini.remove_section", remove_section,
          "ini.remove_section FILE_NAME SECTION [separator='=']: removes the section and returns "
          "its options (None when it was not there).\n\nCLI example: brine cmd '*' "
          "ini.remove_section /etc/app.ini main");
  reg.add("ini.get_ini", get_ini,
          "ini.get_ini FILE_NAME [separator='=']: the whole file as {option: value, section: "
          "{option: value}}, comments left out.\n\nCLI example: brine cmd '*' ini.get_ini "
          "/etc/app.ini");
}

}  // namespace brine::modules
