#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "render/value.h"

// Python's json.dumps, to the byte: the one writer behind Jinja's and Salt's
// tojson, Salt's json filter, slsutil.serialize and salt-call --out=json.
namespace brine::render {

// The arguments of json.dumps that change its text. The defaults are
// Python's.
struct json_dumps_options {
  bool sort_keys = false;
  // Every code point past '~' (and control characters) as \uXXXX, beyond
  // the BMP as a surrogate pair; off, UTF-8 is written as it is.
  bool ensure_ascii = true;
  // Unset: all on one line. Set: each item on a line of its own, indented by
  // this string once per level (json.dumps's indent=n is n spaces).
  std::optional<std::string> indent;
  // Unset: ", ", or "," with an indent, as json.dumps picks.
  std::optional<std::string> item_separator;
  std::string key_separator = ": ";
  // Jinja's htmlsafe_json_dumps: < > & ' written as \u escapes.
  bool html_safe = false;
};

// json.dumps's indent argument as a template passes it: None, a string,
// or n for n spaces (none for n < 0, as in Python).
std::optional<std::string> json_indent(const value& indent);

// Throws template_error with Python's TypeError texts for what JSON cannot
// hold (a callable, a dict key that is a tuple, keys of unlike types to
// sort), and for an undefined value its undefined message.
std::string python_json_dumps(const value& v, const json_dumps_options& o = {});
// Decoded JSON (a dict is a JSON object: its keys are strings).
std::string python_json_dumps(const nlohmann::ordered_json& v, const json_dumps_options& o = {});

}  // namespace brine::render
