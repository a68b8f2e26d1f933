// Salt's file states that edit a file's text in place: file.append,
// file.prepend, file.replace, file.line, file.blockreplace, file.comment,
// file.uncomment, file.keyvalue, and file.serialize (which writes a whole
// file from data). Each follows Salt 3006's state and the execution
// function behind it (salt/states/file.py, salt/modules/file.py): the same
// line splitting, the same regular expressions (py_regex, file_util.h), the
// same diffs (diff.h), comments and changes. Under test nothing is written.
//
// A Salt execution function that raises (a bad regex, file.line's "Found
// more than expected occurrences") is a base::error here: the runner reports
// "An exception occurred in this state: MESSAGE" where Salt prints its
// traceback.

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <map>
#include <filesystem>
#include <optional>

#include "base/error.h"
#include "base/python_truth.h"
#include "render/python_json.h"
#include "render/value.h"
#include "render/yaml.h"
#include "modules/diff.h"
#include "states/file_util.h"
#include "states/registry.h"

namespace brine::states {
namespace file_edit_states {
namespace {

namespace fs = std::filesystem;

std::string arg_text(const state_call& c, const char* key, const std::string& fallback = "") {
  const json* v = c.arg(key);
  return v == nullptr || v->is_null() ? fallback : python_str(*v);
}

bool has(const state_call& c, const char* key) {
  const json* v = c.arg(key);
  return v != nullptr && !v->is_null();
}

bool is_file(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}
bool exists(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0;
}

std::string dirname(const std::string& p) {
  auto slash = p.rfind('/');
  if (slash == std::string::npos) return "";
  return slash == 0 ? "/" : p.substr(0, slash);
}

// Salt's _check_file: "" when the file is there, else why not.
std::string check_file(const std::string& name) {
  if (name.empty() || name.front() != '/') return "Specified file " + name + " is not an absolute path";
  if (!exists(name)) return name + ": file not found";
  return "";
}

std::string realpath(const std::string& p) {
  std::error_code ec;
  fs::path r = fs::weakly_canonical(p, ec);
  return ec ? p : r.string();
}

std::string must_read(const std::string& path) {
  std::optional<std::string> text = read_file(path);
  if (!text) throw base::error("Unable to open file '" + path + "'");
  return *text;
}

void must_write(const std::string& path, std::string_view data) {
  if (std::string why = write_file(path, data); !why.empty()) throw base::error(why);
}

std::string join(const std::vector<std::string>& lines, std::string_view sep = "") {
  std::string out;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (i) out += sep;
    out += lines[i];
  }
  return out;
}

// file.search: re.search with MULTILINE added to `flags`, on the file's bytes.
bool search(const std::string& text, const std::string& pattern, long long flags = k_re_multiline) {
  py_regex re(pattern, flags | k_re_multiline);
  return re.search(text);
}

// Salt's _validate_str_list: a string is one item, a list's items are str()'d,
// anything else (None too) is str() of it.
std::vector<std::string> str_list(const json* v) {
  if (v == nullptr) return {"None"};
  if (v->is_array()) {
    std::vector<std::string> out;
    for (const auto& item : *v) out.push_back(python_str(item));
    return out;
  }
  return {python_str(*v)};
}

// shlex.shlex(text) (posix=False) with whitespace_split: Salt's
// build_whitespace_split_regex's words.
std::vector<std::string> shlex_words(const std::string& text, std::string_view quotes) {
  std::vector<std::string> out;
  std::size_t i = 0;
  auto space = [](char ch) { return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n'; };
  while (i < text.size()) {
    if (space(text[i])) {
      ++i;
      continue;
    }
    std::string token;
    if (quotes.find(text[i]) != std::string_view::npos) {
      char q = text[i];
      std::size_t close = text.find(q, i + 1);
      if (close == std::string::npos) throw base::error("No closing quotation");
      token = text.substr(i, close + 1 - i);
      i = close + 1;
    } else {
      while (i < text.size() && !space(text[i])) token += text[i++];
    }
    out.push_back(token);
  }
  return out;
}

// salt.utils.stringutils.build_whitespace_split_regex.
std::string whitespace_split_regex(const std::string& text) {
  std::string regex;
  for (const std::string& line : str_splitlines(text, false)) {
    std::string_view quotes = "'\"";
    if (line.find("'\\\"") != std::string::npos) {
      quotes = "";
    } else if (line.find('\'') != std::string::npos) {
      quotes = "\"";
    } else if (line.find('"') != std::string::npos) {
      quotes = "'";
    }
    std::vector<std::string> parts;
    for (const auto& w : shlex_words(line, quotes)) parts.push_back(re_escape(w));
    regex += "(?:[\\s]+)?" + join(parts, "(?:[\\s]+)?") + "(?:[\\s]+)?";
  }
  return "(?m)^" + regex + "$";
}

json not_supported(const json& ret, const std::string& fun, const state_call& c,
                   std::initializer_list<const char*> keys) {
  for (const char* key : keys) {
    if (has(c, key)) return failed_ret(ret, fun + ": " + key + " is not supported by brine");
  }
  return json();
}

// Salt's file.touch state under test, for append/prepend on a missing file.
json touch_test(const std::string& name) {
  json r = json::object();
  r["name"] = name;
  r["changes"] = json::object();
  r["result"] = nullptr;
  r["comment"] = "File " + name + " is set to be created";
  r["changes"]["new"] = name;
  return r;
}

// Creates `name` (and with makedirs its parents), as append/prepend's call
// of the touch state does; "" when it is there now.
std::string create_empty(const std::string& name, bool makedirs) {
  std::error_code ec;
  if (makedirs) fs::create_directories(dirname(name), ec);
  if (!fs::is_directory(dirname(name), ec)) return "Directory not present to touch file " + name;
  if (!exists(name)) must_write(name, "");
  return "";
}

// Shared start of append and prepend: makedirs, the file (created if
// missing); a non-null json is the state's answer already.
json prepare_text_file(state_call& c, json& ret, const std::string& name) {
  if (c.flag("makedirs") && c.arg("makedirs")->is_boolean()) {
    std::string dir = dirname(name);
    if (c.test) {
      ret["comment"] = "Directory " + dir + " is set to be updated";
      ret["result"] = nullptr;
    } else {
      std::error_code ec;
      fs::create_directories(dir, ec);
    }
  }
  if (std::string why = check_file(name); !why.empty()) {
    if (c.test) return touch_test(name);
    if (name.empty() || name.front() != '/' || !create_empty(name, c.flag("makedirs")).empty() ||
        !check_file(name).empty()) {
      return failed_ret(ret, why);
    }
  }
  return json();
}

asio::awaitable<json> append(state_call c) {
  json ret = make_ret(c.name(), false);
  if (c.name().empty()) co_return failed_ret(ret, "Must provide name to file.append");
  std::string name = expand_user(c.name());
  if (json r = not_supported(ret, "file.append", c, {"source", "sources"}); !r.is_null()) co_return r;
  if (json r = prepare_text_file(c, ret, name); !r.is_null()) co_return r;
  std::vector<std::string> text = str_list(c.arg("text"));
  std::string before = must_read(name);
  std::vector<std::string> slines = str_splitlines(before, false);
  bool ignore_whitespace = c.flag("ignore_whitespace", true);
  std::vector<std::string> append_lines;
  for (const auto& chunk : text) {
    if (search(before, ignore_whitespace ? whitespace_split_regex(chunk) : chunk)) continue;
    for (const auto& line : str_splitlines(chunk, false)) append_lines.push_back(line);
  }
  auto diff_of = [&](const std::vector<std::string>& nlines) {
    return join(unified_diff(slines, nlines), "\n");
  };
  if (c.test) {
    ret["comment"] = "File " + name + " is set to be updated";
    ret["result"] = nullptr;
    std::vector<std::string> nlines = slines;
    nlines.insert(nlines.end(), append_lines.begin(), append_lines.end());
    if (nlines != slines) {
      ret["changes"]["diff"] = diff_of(nlines);
    } else {
      ret["comment"] = "File " + name + " is in correct state";
      ret["result"] = true;
    }
    co_return ret;
  }
  if (!append_lines.empty()) {
    // Salt's file.append: a newline first if the file does not end in one.
    std::string after = before;
    if (!after.empty() && after.back() != '\n') after += '\n';
    for (const auto& line : append_lines) after += line + "\n";
    must_write(name, after);
    ret["comment"] = "Appended " + std::to_string(append_lines.size()) + " lines";
  } else {
    ret["comment"] = "File " + name + " is in correct state";
  }
  std::vector<std::string> nlines = str_splitlines(must_read(name), false);
  if (nlines != slines) ret["changes"]["diff"] = diff_of(nlines);
  ret["result"] = true;
  co_return ret;
}

asio::awaitable<json> prepend(state_call c) {
  std::string name = expand_user(c.name());
  json ret = make_ret(name, false);
  if (name.empty()) co_return failed_ret(ret, "Must provide name to file.prepend");
  if (json r = not_supported(ret, "file.prepend", c, {"source", "sources"}); !r.is_null()) co_return r;
  if (json r = prepare_text_file(c, ret, name); !r.is_null()) co_return r;
  std::vector<std::string> text = str_list(c.arg("text"));
  bool header = c.flag("header");
  std::string before = must_read(name);
  std::vector<std::string> slines = str_splitlines(before, true);
  std::size_t count = 0;
  std::vector<std::string> test_lines, preface;
  for (const auto& chunk : text) {
    if (!header && search(before, whitespace_split_regex(chunk))) continue;
    for (const auto& line : str_splitlines(chunk, false)) {
      if (c.test) {
        ret["comment"] = "File " + name + " is set to be updated";
        ret["result"] = nullptr;
        test_lines.push_back(line + "\n");
      } else {
        preface.push_back(line);
      }
      ++count;
    }
  }
  if (c.test) {
    std::vector<std::string> nlines = test_lines;
    nlines.insert(nlines.end(), slines.begin(), slines.end());
    if (nlines != slines) {
      ret["changes"]["diff"] = get_diff(slines, nlines);
      ret["result"] = nullptr;
    } else {
      ret["comment"] = "File " + name + " is in correct state";
      ret["result"] = true;
    }
    co_return ret;
  }
  // Salt's file.prepend rewrites the file through a text-mode read.
  auto write_prepended = [&] {
    std::string out;
    for (const auto& line : preface) out += line + "\n";
    must_write(name, out + universal_newlines(before));
  };
  if (header) {
    std::vector<std::string> head(slines.begin(),
                                  slines.begin() + static_cast<std::ptrdiff_t>(
                                                       std::min(preface.size(), slines.size())));
    std::vector<std::string> target_lines;
    for (const auto& chunk : head) {
      for (const auto& l : str_splitlines(chunk, false)) target_lines.push_back(l);
    }
    if (target_lines != preface) {
      write_prepended();
    } else {
      count = 0;
    }
  } else {
    write_prepended();
  }
  std::vector<std::string> nlines = str_splitlines(must_read(name), true);
  if (nlines != slines) ret["changes"]["diff"] = get_diff(slines, nlines);
  ret["comment"] = count ? "Prepended " + std::to_string(count) + " lines"
                         : "File " + name + " is in correct state";
  ret["result"] = true;
  co_return ret;
}

// ---- file.replace ----------------------------------------------------------

// Salt's file.replace execution function: the diff (or whether it changed,
// with show_changes off), writing unless dry_run.
json replace_file(const state_call& c, const std::string& given, bool dry_run) {
  std::string path = realpath(given);
  std::string pattern = arg_text(c, "pattern");
  std::string repl = arg_text(c, "repl");
  long long count = has(c, "count") ? c.arg("count")->get<long long>() : 0;
  long long flags = has(c, "flags") ? re_flags(*c.arg("flags")) : k_re_multiline;
  bool append_nf = c.flag("append_if_not_found"), prepend_nf = c.flag("prepend_if_not_found");
  std::string backup = ".bak";
  if (const json* b = c.arg("backup"); b != nullptr) backup = b->is_boolean() || b->is_null() ? (c.flag("backup") ? "True" : "") : python_str(*b);
  if (append_nf && prepend_nf) {
    throw base::error("Only one of append and prepend_if_not_found is permitted");
  }
  bool has_nfc = has(c, "not_found_content") && c.flag("not_found_content");
  std::string nfc = has_nfc ? arg_text(c, "not_found_content") : "";
  std::string content = has_nfc && (append_nf || prepend_nf) ? nfc : repl;
  if (c.flag("backslash_literal")) {
    std::string doubled;
    for (char ch : repl) doubled += ch == '\\' ? std::string("\\\\") : std::string(1, ch);
    repl = doubled;
  }
  std::string data = must_read(path);
  py_regex re(pattern, flags);
  auto [result, nrepl] = re.subn(repl, data, count);
  bool found = nrepl > 0;
  bool has_changes = found && pattern != arg_text(c, "repl");
  if (append_nf || prepend_nf) {
    py_regex again("^" + re_escape(content) + "($|(?=\r\n))", flags);
    if (again.search(data)) found = true;
  }
  std::vector<std::string> orig_file = split_lines(data);
  std::vector<std::string> new_file = split_lines(result);
  if (orig_file == new_file) has_changes = false;
  std::string backup_text = data;
  if (has_changes && !dry_run) must_write(path, result);
  if (!found && (append_nf || prepend_nf)) {
    std::string add = (has_nfc ? nfc : repl) + "\n";
    if (prepend_nf) {
      new_file.insert(new_file.begin(), add);
    } else {
      if (!new_file.empty() && new_file.back().back() != '\n') new_file.back() += "\n";
      new_file.push_back(add);
    }
    has_changes = true;
    if (!dry_run) {
      backup_text = must_read(path);
      must_write(path, join(new_file));
    }
  }
  if (!backup.empty() && has_changes && !dry_run) must_write(path + backup, backup_text);
  std::string differences = get_diff(orig_file, new_file);
  if (c.flag("show_changes", true)) return differences;
  return differences.empty() ? false : has_changes;
}

// file.line's and file.blockreplace's answer: the module's diff as the
// change (None under test), or nothing to do.
json edited_ret(json ret, const json& changes, bool test) {
  if (base::python_truth(changes)) {
    ret["changes"]["diff"] = changes;
    ret["result"] = test ? json() : json(true);
    ret["comment"] = test ? "Changes would be made" : "Changes were made";
  } else {
    ret["result"] = true;
    ret["comment"] = "No changes needed to be made";
  }
  return ret;
}

asio::awaitable<json> replace(state_call c) {
  std::string name = expand_user(c.name());
  json ret = make_ret(name);
  if (name.empty()) co_return failed_ret(ret, "Must provide name to file.replace");
  if (std::string why = check_file(name); !why.empty()) {
    if (c.flag("ignore_if_missing") && why.find("file not found") != std::string::npos) {
      ret["comment"] = "No changes needed to be made";
      co_return ret;
    }
    co_return failed_ret(ret, why);
  }
  json changes = replace_file(c, name, c.test);
  if (base::python_truth(changes)) {
    ret["changes"]["diff"] = changes;
    ret["result"] = c.test ? json() : json(true);
    ret["comment"] = c.test ? "Changes would have been made" : "Changes were made";
  } else {
    ret["comment"] = "No changes needed to be made";
  }
  co_return ret;
}

// ---- file.line ---------------------------------------------------------------

std::string get_eol(const std::string& line) {
  if (line.ends_with("\r\n")) return "\r\n";
  if (line.ends_with("\n")) return "\n";
  if (line.ends_with("\r")) return "\r";
  return "";
}

std::string set_line_indent(const std::string& src, const std::string& line, bool indent) {
  if (!indent) return line;
  std::size_t n = 0;
  while (n < src.size() && (src[n] == ' ' || src[n] == '\t')) ++n;
  return src.substr(0, n) + py_lstrip(line);
}

std::string set_line_eol(const std::string& src, const std::string& line) {
  std::string eol = get_eol(src);
  return py_rstrip(line) + (eol.empty() ? "\n" : eol);
}

// _regex_to_static: the lines the expression finds (by regex or as text);
// nullopt for no lines or no expression.
std::optional<std::vector<std::string>> regex_to_static(const std::vector<std::string>& src,
                                                         const std::optional<std::string>& regex) {
  if (src.empty() || !regex || regex->empty()) return std::nullopt;
  py_regex re(*regex, k_re_dotall);
  std::vector<std::string> out;
  for (const auto& line : src) {
    if (re.search(line) || line.find(*regex) != std::string::npos) out.push_back(line);
  }
  return out;
}

bool any_line(const std::optional<std::vector<std::string>>& v) { return v && !v->empty(); }

std::size_t index_of(const std::vector<std::string>& lines, const std::string& line) {
  return static_cast<std::size_t>(std::find(lines.begin(), lines.end(), line) - lines.begin());
}

void assert_occurrence(const std::vector<std::string>& probe, const std::string& target) {
  if (probe.size() == 1) return;
  std::string msg = probe.size() > 1 ? "more than" : "less than";
  throw base::error("Found " + msg + " expected occurrences in \"" + target + "\" expression");
}

std::vector<std::string> set_line(std::vector<std::string> lines, const std::optional<std::string>& content,
                                  std::optional<std::string> match, const std::string& mode,
                                  const std::optional<std::string>& location,
                                  const std::optional<std::string>& before_expr,
                                  const std::optional<std::string>& after_expr, bool indent) {
  if ((!match || match->empty()) && !before_expr && !after_expr) match = content;
  auto after = regex_to_static(lines, after_expr);
  auto before = regex_to_static(lines, before_expr);
  auto matched = regex_to_static(lines, match);
  const std::string text = content.value_or("");
  auto same = [&](const std::string& line) { return py_rstrip(line, "\r\n") == py_rstrip(text, "\r\n"); };
  if (lines.empty() && (mode == "delete" || mode == "replace")) {
    lines.clear();
  } else if (mode == "delete" && any_line(matched)) {
    std::string first = matched->front();
    std::erase(lines, first);
  } else if (mode == "replace" && any_line(matched)) {
    std::size_t idx = index_of(lines, matched->front());
    lines[idx] = set_line_indent(lines[idx], text, indent);
  } else if (mode == "insert") {
    if (!before && !after && !location) {
      throw base::error("On insert either \"location\" or \"before/after\" conditions are required.");
    }
    if (location && !location->empty()) {
      if (*location == "end") {
        if (!lines.empty()) {
          lines.push_back(set_line_indent(lines.back(), text, indent));
        } else {
          lines.push_back(text);
        }
      } else if (*location == "start") {
        if (!lines.empty()) {
          lines.insert(lines.begin(), set_line_eol(lines.front(), text));
        } else {
          lines = {text + "\n"};
        }
      }
    } else if (any_line(before) && any_line(after)) {
      assert_occurrence(*before, "before");
      assert_occurrence(*after, "after");
      std::size_t last = index_of(lines, before->front());
      lines.insert(lines.begin() + static_cast<std::ptrdiff_t>(last), set_line_indent(lines[last], text, indent));
    } else if (any_line(after)) {
      assert_occurrence(*after, "after");
      std::size_t idx = index_of(lines, after->front());
      if (idx + 1 >= lines.size() || !same(lines[idx + 1])) {
        lines.insert(lines.begin() + static_cast<std::ptrdiff_t>(idx + 1), set_line_indent(lines[idx], text, indent));
      }
    } else if (any_line(before)) {
      assert_occurrence(*before, "before");
      std::size_t idx = index_of(lines, before->front());
      const std::string& prev = lines[idx == 0 ? lines.size() - 1 : idx - 1];
      if (!same(prev)) {
        lines.insert(lines.begin() + static_cast<std::ptrdiff_t>(idx), set_line_indent(lines[idx], text, indent));
      }
    } else {
      throw base::error("Neither before or after was found in file");
    }
  } else if (mode == "ensure") {
    if (any_line(before) && any_line(after)) {
      assert_occurrence(*after, "after");
      assert_occurrence(*before, "before");
      std::size_t after_index = index_of(lines, after->front());
      std::size_t before_index = index_of(lines, before->front());
      bool already_there = std::any_of(lines.begin(), lines.end(),
                                       [&](const std::string& l) { return py_lstrip(l) == text; });
      if (!already_there) {
        if (after_index + 1 == before_index) {
          lines.insert(lines.begin() + static_cast<std::ptrdiff_t>(after_index + 1),
                       set_line_indent(lines[after_index], text, indent));
        } else if (after_index + 2 == before_index) {
          lines[after_index + 1] = set_line_indent(lines[after_index], text, indent);
        } else {
          throw base::error("Found more than one line between boundaries \"before\" and \"after\".");
        }
      }
    } else if (any_line(before)) {
      assert_occurrence(*before, "before");
      std::size_t idx = index_of(lines, before->front());
      const std::string& prev = lines[idx == 0 ? lines.size() - 1 : idx - 1];
      if (idx == 0 || !same(prev)) {
        lines.insert(lines.begin() + static_cast<std::ptrdiff_t>(idx), set_line_indent(prev, text, indent));
      }
    } else if (any_line(after)) {
      assert_occurrence(*after, "after");
      std::size_t idx = index_of(lines, after->front());
      if (idx + 1 >= lines.size() || !same(lines[idx + 1])) {
        lines.insert(lines.begin() + static_cast<std::ptrdiff_t>(idx + 1), set_line_indent(lines[idx], text, indent));
      }
    } else {
      throw base::error(
          "Wrong conditions? Unable to ensure line without knowing where to put it before and/or "
          "after.");
    }
  }
  return lines;
}

std::optional<std::string> opt_text(const state_call& c, const char* key) {
  if (!has(c, key)) return std::nullopt;
  return python_str(*c.arg(key));
}

// Salt's file.line execution function.
json line_file(const state_call& c, const std::string& given, const std::string& mode) {
  std::string path = realpath(given);
  if (!is_file(path)) throw base::error("File \"" + path + "\" does not exists or is not a file.");
  std::optional<std::string> content = opt_text(c, "content");
  std::optional<std::string> match = opt_text(c, "match");
  std::optional<std::string> before = opt_text(c, "before"), after = opt_text(c, "after");
  if (!before && !after && (!match || match->empty())) match = content;
  std::string raw = must_read(path);
  std::string text = universal_newlines(raw);
  std::vector<std::string> body = read_lines(text);
  std::string body_before = join(body);
  if (!body.empty() && !get_eol(body.back()).empty()) body.emplace_back();
  if (raw.empty() && (mode == "delete" || mode == "replace")) body.clear();
  body = set_line(std::move(body), content, match, mode, opt_text(c, "location"), before, after,
                  c.flag("indent", true));
  if (!body.empty()) {
    for (std::size_t idx = 0; idx < body.size(); ++idx) {
      if (get_eol(body[idx]).empty() && idx + 1 < body.size()) {
        std::size_t prev = idx == 0 || idx == 1 ? 1 : idx - 1;
        body[idx] = set_line_eol(body[prev], body[idx]);
      }
    }
    if (body.back().empty()) body.pop_back();
  }
  std::string after_text = join(body);
  bool changed = after_text != body_before;
  if (changed && c.flag("backup") && !c.test) {
    char stamp[32];
    std::time_t now = std::time(nullptr);
    std::strftime(stamp, sizeof stamp, "%Y-%m-%d-%H-%M-%S", std::localtime(&now));
    must_write(path + "." + stamp, raw);
  }
  std::string diff;
  if (changed) {
    if (c.flag("show_changes", true)) diff = get_diff(str_splitlines(text, true), body);
    if (!c.test) must_write(path, after_text);
  }
  if (c.flag("show_changes", true) && !diff.empty()) return diff;
  return changed;
}

asio::awaitable<json> line(state_call c) {
  std::string name = expand_user(c.name());
  json ret = make_ret(name);
  if (name.empty()) co_return failed_ret(ret, "Must provide name to file.line");
  if (json r = not_supported(ret, "file.line", c, {"user", "group", "file_mode"}); !r.is_null()) co_return r;
  // Salt runs file.managed(create=create, replace=False) first: with
  // create, a missing file is made empty.
  if (c.flag("create") && !c.test && !name.empty() && name.front() == '/' && !exists(name) &&
      fs::is_directory(dirname(name))) {
    must_write(name, "");
  }
  if (std::string why = check_file(name); !why.empty()) co_return failed_ret(ret, why);
  std::string mode = arg_text(c, "mode");
  for (char& ch : mode) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (mode.empty()) co_return failed_ret(ret, "Mode was not defined. How to process the file?");
  if (mode != "delete" && !has(c, "content")) {
    co_return failed_ret(ret, "Content can only be empty if mode is ['delete']");
  }
  if (mode != "insert" && mode != "ensure" && mode != "delete" && mode != "replace") {
    throw base::error("Unknown mode: \"" + mode + "\"");
  }
  json changes = line_file(c, name, mode);
  co_return edited_ret(std::move(ret), changes, c.test);
}

// ---- file.blockreplace ---------------------------------------------------------

json blockreplace_file(const state_call& c, const std::string& path, const std::string& content) {
  std::string marker_start = arg_text(c, "marker_start", "#-- start managed zone --");
  std::string marker_end = arg_text(c, "marker_end", "#-- end managed zone --");
  bool append_nf = c.flag("append_if_not_found"), prepend_nf = c.flag("prepend_if_not_found");
  std::optional<std::string> before_match = opt_text(c, "insert_before_match");
  std::optional<std::string> after_match = opt_text(c, "insert_after_match");
  int exclusive = int(append_nf) + int(prepend_nf) + int(before_match && !before_match->empty()) +
                  int(after_match && !after_match->empty());
  if (exclusive > 1) {
    throw base::error(
        "Only one of append_if_not_found, prepend_if_not_found, insert_before_match, and "
        "insert_after_match is permitted");
  }
  if (!exists(path)) throw base::error("File not found: " + path);
  bool append_newline = false;
  if (!has(c, "append_newline")) {
    append_newline = !content.ends_with("\n");
  } else {
    append_newline = c.flag("append_newline");
  }
  std::vector<std::string> split_content;
  {
    std::size_t start = 0;
    for (;;) {
      std::size_t crlf = content.find("\r\n", start);
      std::string win = content.substr(start, crlf == std::string::npos ? std::string::npos : crlf - start);
      std::size_t s = 0;
      for (;;) {
        std::size_t nl = win.find('\n', s);
        split_content.push_back(win.substr(s, nl == std::string::npos ? std::string::npos : nl - s));
        if (nl == std::string::npos) break;
        s = nl + 1;
      }
      if (crlf == std::string::npos) break;
      start = crlf + 2;
    }
  }
  auto add_content = [&](const std::string& linesep, std::vector<std::string>& lines,
                         bool include_marker_start, std::string end_line) {
    end_line = py_rstrip(end_line, "\r\n") + linesep;
    if (include_marker_start) lines.push_back(marker_start + linesep);
    for (std::size_t i = 0; i < split_content.size(); ++i) {
      if (i + 1 != split_content.size()) {
        lines.push_back(split_content[i] + linesep);
      } else if (append_newline) {
        lines.push_back(split_content[i] + linesep);
        lines.push_back(end_line);
      } else {
        lines.push_back(split_content[i] + end_line);
      }
    }
  };
  std::vector<std::string> orig_file, new_file;
  bool in_block = false, block_found = false;
  std::string linesep;
  std::string data = must_read(path);
  for (const std::string& line : split_lines(data)) {
    bool keep = true;
    if (linesep.empty()) linesep = line.ends_with("\r\n") ? "\r\n" : "\n";
    if (line.find(marker_start) != std::string::npos) {
      in_block = true;
    } else if (in_block) {
      keep = false;
      std::size_t pos = line.find(marker_end);
      if (pos != std::string::npos) {
        in_block = false;
        block_found = true;
        add_content(linesep, new_file, false, line.substr(pos));
      }
    }
    orig_file.push_back(line);
    if (keep) new_file.push_back(line);
  }
  if (linesep.empty()) linesep = "\n";
  if (in_block) throw base::error("Unterminated marked block. End of file reached before marker_end.");
  if (!block_found) {
    if (prepend_nf) {
      std::vector<std::string> pre;
      add_content(linesep, pre, true, marker_end);
      pre.insert(pre.end(), new_file.begin(), new_file.end());
      new_file = std::move(pre);
      block_found = true;
    } else if (append_nf) {
      if (!new_file.empty() && !new_file.back().ends_with(linesep)) new_file.back() += linesep;
      add_content(linesep, new_file, true, marker_end);
      block_found = true;
    } else if ((before_match && !before_match->empty()) || (after_match && !after_match->empty())) {
      bool insert_after = !(before_match && !before_match->empty());
      py_regex re(insert_after ? *after_match : *before_match);
      for (std::size_t i = 0; i < orig_file.size(); ++i) {
        if (!re.search(orig_file[i])) continue;
        std::vector<std::string> block;
        add_content(linesep, block, true, marker_end);
        std::size_t at = i;
        for (const auto& l : block) {
          if (insert_after) ++at;
          new_file.insert(new_file.begin() + static_cast<std::ptrdiff_t>(std::min(at, new_file.size())), l);
          if (!insert_after) ++at;
        }
        block_found = true;
        break;
      }
    }
  }
  if (!block_found) throw base::error("Cannot edit marked block. Markers were not found in file.");
  std::string diff = get_diff(orig_file, new_file);
  bool has_changes = !diff.empty();
  if (has_changes && !c.test) {
    const json* b = c.arg("backup");
    bool backup_off = b != nullptr && b->is_boolean() && !b->get<bool>();
    if (!backup_off) must_write(path + arg_text(c, "backup", ".bak"), data);
    must_write(path, join(new_file));
  }
  if (c.flag("show_changes", true)) return diff;
  return has_changes;
}

asio::awaitable<json> blockreplace(state_call c) {
  std::string name = expand_user(c.name());
  json ret = make_ret(name, false);
  if (name.empty()) co_return failed_ret(ret, "Must provide name to file.blockreplace");
  if (json r = not_supported(ret, "file.blockreplace", c, {"source", "sources"}); !r.is_null()) co_return r;
  if (std::string why = check_file(name); !why.empty()) co_return failed_ret(ret, why);
  std::string content = arg_text(c, "content");
  // file.accumulated's texts for this file follow the content: those
  // required by this state, else all of them (Salt's blockreplace).
  if (c.per_run != nullptr && c.per_run->accumulators.contains(name)) {
    const json& acc = c.per_run->accumulators[name];
    json deps = c.per_run->accumulator_deps.value(name, json::object());
    json id = c.low.value("__id__", json());
    std::vector<std::string> filtered;
    for (const auto& [a, ids] : deps.items()) {
      if (acc.contains(a) && std::find(ids.begin(), ids.end(), id) != ids.end()) filtered.push_back(a);
    }
    if (filtered.empty()) {
      for (const auto& [a, texts] : acc.items()) filtered.push_back(a);
    }
    for (const auto& a : filtered) {
      for (const auto& line : acc[a]) {
        content += (content.empty() ? "" : "\n") + python_str(line);
      }
    }
  }
  json changes;
  try {
    changes = blockreplace_file(c, name, content);
  } catch (const std::exception& e) {
    ret["comment"] = std::string("Encountered error managing block: ") + e.what() +
                     ". See the log for details.";
    co_return ret;
  }
  co_return edited_ret(std::move(ret), changes, c.test);
}

// ---- file.comment / file.uncomment ---------------------------------------------

// Salt's file.comment_line: each line re.match-ing gets `ch` put before it
// (cmnt) or its leading `ch` characters taken off; the file is rewritten
// only if one matched.
void comment_line(const std::string& given, const std::string& regex, const std::string& ch, bool cmnt,
                  const std::string& backup) {
  std::string pattern;
  std::string core = py_rstrip(py_lstrip(regex, "^"), "$");
  if (cmnt) {
    pattern = (regex.starts_with("^") ? "^" : "") + ("(" + core + ")") + (regex.ends_with("$") ? "$" : "");
  } else {
    pattern = "^" + ch + "\\s*(" + core + ")" + (regex.ends_with("$") ? "$" : "");
  }
  std::string path = realpath(given);
  if (!is_file(path)) throw base::error("File not found: " + path);
  std::string data = must_read(path);
  py_regex re(pattern);
  bool found = false;
  std::string out;
  for (const std::string& line : read_lines(data)) {
    if (re.match(line)) {
      found = true;
      out += cmnt ? ch + line : py_lstrip(line, ch);
    } else {
      out += line;
    }
  }
  if (!found) return;
  must_write(path, out);
  if (!backup.empty()) must_write(path + backup, data);
}

std::string backup_suffix(const state_call& c) {
  const json* b = c.arg("backup");
  if (b == nullptr) return ".bak";
  if (b->is_null() || (b->is_boolean() && !b->get<bool>())) return "";
  return python_str(*b);
}

asio::awaitable<json> comment(state_call c) {
  std::string name = expand_user(c.name());
  json ret = make_ret(name, false);
  if (name.empty()) co_return failed_ret(ret, "Must provide name to file.comment");
  if (std::string why = check_file(name); !why.empty()) co_return failed_ret(ret, why);
  std::string regex = arg_text(c, "regex");
  std::string ch = arg_text(c, "char", "#");
  // Salt drops a leading (?x) flag, a ^ and a trailing $.
  std::string unanchor = regex;
  if (unanchor.size() >= 4 && unanchor.starts_with("(?") && unanchor[3] == ')' &&
      std::string_view("iLmsux").find(unanchor[2]) != std::string_view::npos) {
    unanchor = unanchor.substr(4);
  }
  if (unanchor.starts_with("^")) unanchor = unanchor.substr(1);
  if (unanchor.ends_with("$")) unanchor.pop_back();
  std::string uncomment_regex = "^(?!\\s*" + ch + ")\\s*" + unanchor;
  std::string comment_regex = ch + unanchor;
  std::string before = must_read(name);
  if (!search(before, uncomment_regex)) {
    if (search(before, comment_regex)) {
      ret["comment"] = "Pattern already commented";
      ret["result"] = true;
      co_return ret;
    }
    if (c.flag("ignore_missing")) {
      ret["comment"] = "Pattern not found and ignore_missing set to True";
      ret["result"] = true;
      co_return ret;
    }
    co_return failed_ret(ret, unanchor + ": Pattern not found");
  }
  if (c.test) {
    ret["changes"][name] = "updated";
    ret["comment"] = "File " + name + " is set to be updated";
    ret["result"] = nullptr;
    co_return ret;
  }
  std::vector<std::string> slines = str_splitlines(before, true);
  comment_line(name, regex, ch, true, backup_suffix(c));
  std::string after = must_read(name);
  std::vector<std::string> nlines = str_splitlines(after, true);
  bool ok = search(after, comment_regex);
  ret["result"] = ok;
  if (slines != nlines) ret["changes"]["diff"] = get_diff(slines, nlines);
  ret["comment"] = ok ? "Commented lines successfully" : "Expected commented lines not found";
  co_return ret;
}

asio::awaitable<json> uncomment(state_call c) {
  std::string name = expand_user(c.name());
  json ret = make_ret(name, false);
  if (name.empty()) co_return failed_ret(ret, "Must provide name to file.uncomment");
  if (std::string why = check_file(name); !why.empty()) co_return failed_ret(ret, why);
  std::string regex = arg_text(c, "regex");
  std::string ch = arg_text(c, "char", "#");
  std::string bare = py_lstrip(regex, "^");
  std::string before = must_read(name);
  if (search(before, ch + "[ \t]*" + bare)) {
    // commented: to be uncommented
  } else if (search(before, "^[ \t]*" + bare)) {
    ret["comment"] = "Pattern already uncommented";
    ret["result"] = true;
    co_return ret;
  } else {
    co_return failed_ret(ret, regex + ": Pattern not found");
  }
  if (c.test) {
    ret["changes"][name] = "updated";
    ret["comment"] = "File " + name + " is set to be updated";
    ret["result"] = nullptr;
    co_return ret;
  }
  std::vector<std::string> slines = read_lines(before);
  comment_line(name, regex, ch, false, backup_suffix(c));
  std::string after = must_read(name);
  std::vector<std::string> nlines = read_lines(after);
  bool ok = search(after, "^[ \t]*" + bare);
  ret["result"] = ok;
  if (slines != nlines) ret["changes"]["diff"] = get_diff(slines, nlines);
  ret["comment"] = ok ? "Uncommented lines successfully" : "Expected uncommented lines not found";
  co_return ret;
}

// ---- file.keyvalue ----------------------------------------------------------------

asio::awaitable<json> keyvalue(state_call c) {
  std::string name = expand_user(c.name());
  json ret = make_ret(name);
  ret["result"] = nullptr;
  if (name.empty()) co_return failed_ret(ret, "Must provide name to file.keyvalue");
  if (json r = not_supported(ret, "file.keyvalue", c, {"search_only"}); !r.is_null()) co_return r;
  json key_values = json::object();
  const json* kv = c.arg("key_values");
  if (has(c, "key") && has(c, "value")) {
    if (kv != nullptr && kv->is_object()) {
      co_return failed_ret(ret, "file.keyvalue can not combine key_values with key and value");
    }
    key_values[python_str(*c.arg("key"))] = *c.arg("value");
  } else if (kv == nullptr || !kv->is_object() || kv->empty()) {
    bool empty = kv == nullptr || kv->is_null() || (kv->is_boolean() && !kv->get<bool>()) ||
                 ((kv->is_object() || kv->is_array() || kv->is_string()) && kv->empty());
    co_return failed_ret(ret, std::string("file.keyvalue key and value not supplied and key_values ") +
                             (empty ? "is empty" : "is not a dictionary"));
  } else {
    key_values = *kv;
  }
  std::optional<std::string> data = read_file(name);
  if (!data || fs::is_directory(name)) {
    ret["comment"] = "unable to open " + name;
    ret["result"] = c.flag("ignore_if_missing");
    co_return ret;
  }
  std::string separator = arg_text(c, "separator", "=");
  long long count = has(c, "count") ? c.arg("count")->get<long long>() : 1;
  std::optional<std::string> uncomment = opt_text(c, "uncomment");
  bool key_ignore_case = c.flag("key_ignore_case"), value_ignore_case = c.flag("value_ignore_case");
  auto lower = [](std::string s) {
    for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return s;
  };
  std::vector<std::string> diff, content;
  long long changes = 0;
  std::map<std::string, long long> diff_count;
  for (const auto& [k, v] : key_values.items()) diff_count[k] = count;
  for (std::string line : read_lines(universal_newlines(*data))) {
    std::string test_line = uncomment ? py_lstrip(line, *uncomment) : py_lstrip(line);
    bool did_uncomment = line.size() > test_line.size();
    if (key_ignore_case) test_line = lower(test_line);
    for (const auto& [key, value] : key_values.items()) {
      std::string test_key = key_ignore_case ? lower(key) : key;
      if (!test_line.starts_with(test_key)) continue;
      std::string working = did_uncomment ? (uncomment ? py_lstrip(line, *uncomment) : py_lstrip(line)) : line;
      std::size_t at = separator.empty() ? std::string::npos : working.find(separator);
      if (at == std::string::npos) continue;
      std::string line_key = working.substr(0, at), line_value = working.substr(at + separator.size());
      bool keys_match = key_ignore_case ? lower(line_key) == test_key : line_key == test_key;
      if (!keys_match) continue;
      line_value = py_strip(line_value);
      std::string test_value = py_strip(python_str(value));
      if (value_ignore_case) {
        line_value = lower(line_value);
        test_value = lower(test_value);
      }
      bool values_match = line_value == test_value;
      bool needs_changing = false;
      if (did_uncomment) {
        if (diff_count[key] > 0) {
          needs_changing = true;
        } else if (!values_match) {
          values_match = true;
        }
      } else if (diff_count[key] == 0) {
        needs_changing = true;
      }
      if (!values_match || needs_changing) {
        diff.push_back("- " + line);
        line.clear();
        if (diff_count[key] != 0) {
          line = line_key + separator + python_str(value) + "\n";
          if (!value.is_string()) {
            diff.push_back("+ " + py_rstrip(line) + " (from " + python_type(value) + " type)\n");
          } else {
            diff.push_back("+ " + line);
          }
        }
        ++changes;
      }
      if (diff_count[key] > 0) --diff_count[key];
    }
    content.push_back(line);
  }
  if (c.flag("append_if_not_found")) {
    std::vector<std::string> tmpdiff;
    for (const auto& [key, value] : key_values.items()) {
      if (diff_count[key] > 0) {
        std::string line = key + separator + python_str(value) + "\n";
        tmpdiff.push_back("+ " + line);
        content.push_back(line);
        ++changes;
      }
    }
    if (!tmpdiff.empty()) {
      diff.push_back("- <EOF>\n");
      diff.insert(diff.end(), tmpdiff.begin(), tmpdiff.end());
      diff.push_back("+ <EOF>\n");
    }
  } else if (c.flag("prepend_if_not_found")) {
    bool did_diff = false;
    for (const auto& [key, value] : key_values.items()) {
      if (diff_count[key] > 0) {
        std::string line = key + separator + python_str(value) + "\n";
        if (!did_diff) {
          diff.insert(diff.begin(), "  <SOF>\n");
          did_diff = true;
        }
        diff.insert(diff.begin() + 1, "+ " + line);
        content.insert(content.begin(), line);
        ++changes;
      }
    }
  }
  if (changes == 0) {
    ret["result"] = true;
    co_return ret;
  }
  bool show = c.flag("show_changes", true);
  if (c.test) {
    ret["comment"] = "File " + name + " is set to be changed (" + std::to_string(changes) + " lines)";
    if (show) {
      ret["changes"]["diff"] = join(diff);
      ret["comment"] = ret["comment"].get<std::string>() + "\nPredicted diff:\n\r\t\t" + join(diff, "\r\t\t");
      ret["result"] = nullptr;
    }
    co_return ret;
  }
  ret["comment"] = "Changed " + std::to_string(changes) + " lines";
  if (show) ret["changes"]["diff"] = join(diff);
  if (!write_file(name, join(content)).empty()) {
    ret["comment"] = name + " not writable";
    ret["result"] = false;
    co_return ret;
  }
  ret["result"] = true;
  co_return ret;
}

// ---- file.serialize -------------------------------------------------------------

// salt.utils.dictupdate.update (merge_lists off).
void merge_into(json& dest, const json& upd) {
  for (const auto& [k, v] : upd.items()) {
    if (v.is_object() && dest.contains(k) && dest[k].is_object()) {
      merge_into(dest[k], v);
    } else {
      dest[k] = v;
    }
  }
}

// RecursiveDictDiffer(past, current).diffs, keys missing from current ignored.
json recursive_diff(const json& past, const json& current) {
  json out = json::object();
  for (const auto& [k, v] : current.items()) {
    if (!past.contains(k)) {
      out[k] = {{"new", v}, {"old", "<_null_>"}};
    } else if (past[k] != v) {
      if (v.is_object() && past[k].is_object()) {
        json sub = recursive_diff(past[k], v);
        if (!sub.empty()) out[k] = sub;
      } else {
        out[k] = {{"new", v}, {"old", past[k]}};
      }
    }
  }
  return out;
}

asio::awaitable<json> serialize(state_call c) {
  std::string name = expand_user(c.name());
  json ret = sorted_ret(name);
  if (name.empty()) co_return failed_ret(ret, "Must provide name to file.serialize");
  if (json r = not_supported(ret, "file.serialize", c,
                             {"dataset_pillar", "user", "group", "serializer_opts",
                              "deserializer_opts", "encoding", "backup"});
      !r.is_null()) {
    co_return r;
  }
  if (!c.flag("create", true) && !is_file(name)) {
    ret["comment"] = "File " + name + " is not present and is not set for creation";
    co_return ret;
  }
  if (has(c, "serializer") && has(c, "formatter")) {
    co_return failed_ret(ret, "Only one of serializer and formatter are allowed");
  }
  std::string serializer = arg_text(c, "serializer", arg_text(c, "formatter", "yaml"));
  if (serializer.empty()) serializer = "yaml";
  for (char& ch : serializer) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  const json* dataset_arg = c.arg("dataset");
  if (dataset_arg == nullptr || dataset_arg->is_null()) {
    co_return failed_ret(ret, "Neither 'dataset' nor 'dataset_pillar' was defined");
  }
  if (serializer != "json" && serializer != "yaml") {
    ret = json::object();
    ret["changes"] = json::object();
    ret["comment"] = "The " + serializer +
                     " serializer could not be found. It either does not exist or its "
                     "prerequisites are not installed.";
    ret["name"] = name;
    ret["result"] = false;
    co_return ret;
  }
  json dataset = *dataset_arg;
  std::optional<json> existing, merged;
  if (c.flag("merge_if_exists") && is_file(name)) {
    std::string text = must_read(name);
    try {
      existing = serializer == "json" ? json::parse(text)
                                      : render::load_yaml<json>(text, name);
    } catch (const std::exception& e) {
      ret["result"] = false;
      ret["comment"] = std::string("Failed to deserialize existing data: ") + e.what();
      co_return ret;
    }
    if (!existing->is_null()) {
      json m = *existing;
      if (m.is_object() && dataset.is_object()) {
        merge_into(m, dataset);
      } else {
        m = dataset;
      }
      if (m == *existing) {
        ret["comment"] = "The file " + name + " is in the correct state";
        co_return ret;
      }
      merged = m;
      dataset = m;
    }
  }
  std::string contents;
  if (serializer == "json") {
    render::json_dumps_options o;
    o.indent = "  ";
    o.sort_keys = true;
    o.item_separator = ",";
    contents = render::python_json_dumps(dataset, o);
  } else {
    render::yaml_dump_options o;
    o.flow_style = render::yaml_dump_options::flow::never;
    o.sort_keys = true;
    contents = render::dump_yaml(render::value::from_json(dataset), o);
  }
  contents += "\n";
  std::optional<mode_t> mode;
  if (has(c, "mode")) {
    mode = parse_mode(*c.arg("mode"));
    if (!mode) co_return failed_ret(ret, "Invalid mode " + arg_text(c, "mode"));
  }
  std::optional<std::string> have = is_file(name) ? read_file(name) : std::nullopt;
  if (exists(name) && !is_file(name)) co_return failed_ret(ret, "Specified target " + name + " is a directory");
  struct stat st {};
  bool mode_differs = have && mode && ::stat(name.c_str(), &st) == 0 && (st.st_mode & 07777) != *mode;
  bool show = c.flag("show_changes", true);
  if (c.test) {
    if (!have) {
      ret["changes"]["newfile"] = name;
    } else {
      if (*have != contents) {
        ret["changes"]["diff"] = show ? get_diff(read_lines(*have), read_lines(contents))
                                      : std::string("<show_changes=False>");
      }
      if (mode_differs) ret["changes"]["mode"] = mode_text(*mode);
    }
    if (!ret["changes"].empty()) {
      ret["result"] = nullptr;
      ret["comment"] = "Dataset will be serialized and stored into " + name;
    } else {
      ret["comment"] = "The file " + name + " is in the correct state";
    }
  } else if (have && *have == contents && !mode_differs) {
    ret["comment"] = "File " + name + " is in the correct state";
  } else {
    std::string parent = dirname(name);
    if (!fs::is_directory(parent)) {
      if (!c.flag("makedirs")) co_return failed_ret(ret, "Parent directory not present");
      std::error_code ec;
      fs::create_directories(parent, ec);
    }
    if (!have || *have != contents) {
      if (std::string why = write_file(name, contents, mode); !why.empty()) co_return failed_ret(ret, why);
      ret["changes"]["diff"] = !have ? std::string("New file")
                               : show ? get_diff(read_lines(*have), read_lines(contents))
                                      : std::string("<show_changes=False>");
      if (mode && (!have || mode_differs)) ret["changes"]["mode"] = mode_text(*mode);
    } else {
      ::chmod(name.c_str(), *mode);
      ret["changes"]["mode"] = mode_text(*mode);
    }
    ret["comment"] = "File " + name + " updated";
  }
  if (existing && existing->is_object() && merged && merged->is_object()) {
    ret["changes"]["diff"] = recursive_diff(*existing, *merged);
  }
  co_return ret;
}

}  // namespace
}  // namespace file_edit_states

void register_file_edit_states(registry& reg) {
  using namespace file_edit_states;
  reg.add("file.append", append, {"name"},
          "file.append name=PATH text=TEXT|[LINES] [makedirs=False] [ignore_whitespace=True]: "
          "the text is in the file, appended where missing (source= is not in brine)");
  reg.add("file.prepend", prepend, {"name"},
          "file.prepend name=PATH text=TEXT|[LINES] [makedirs=False] [header=False]: the text "
          "is at the top of the file (source= is not in brine)");
  reg.add("file.replace", replace, {"name", "pattern", "repl"},
          "file.replace name=PATH pattern=RE repl=TEXT [count=0] [flags=8] "
          "[append_if_not_found] [prepend_if_not_found] [not_found_content] [backup=.bak] "
          "[show_changes] [ignore_if_missing] [backslash_literal]: Python re.sub on the file");
  reg.add("file.line", line, {"name"},
          "file.line name=PATH mode=ensure|replace|delete|insert [content=] [match=] "
          "[before=] [after=] [location=start|end] [indent=True] [backup] [create]: one line");
  reg.add("file.blockreplace", blockreplace, {"name"},
          "file.blockreplace name=PATH content=TEXT [marker_start=] [marker_end=] "
          "[append_if_not_found] [prepend_if_not_found] [insert_before_match] "
          "[insert_after_match] [append_newline] [backup=.bak]: the block between the markers");
  reg.add("file.comment", comment, {"name", "regex"},
          "file.comment name=PATH regex=RE [char=#] [backup=.bak] [ignore_missing]: matching "
          "lines are commented out");
  reg.add("file.uncomment", uncomment, {"name", "regex"},
          "file.uncomment name=PATH regex=RE [char=#] [backup=.bak]: matching commented lines "
          "are uncommented");
  reg.add("file.keyvalue", keyvalue, {"name"},
          "file.keyvalue name=PATH key=K value=V | key_values={K: V} [separator==] "
          "[append_if_not_found] [prepend_if_not_found] [uncomment=] [count=1] "
          "[key_ignore_case] [value_ignore_case]: key/value lines");
  reg.add("file.serialize", serialize, {"name"},
          "file.serialize name=PATH dataset=DATA [serializer|formatter=yaml|json] [mode=] "
          "[makedirs] [merge_if_exists] [create=True]: the file holds DATA serialized");
}

}  // namespace brine::states
