#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "render/value.h"

// Salt's YAML dialect: loading as salt.utils.yamlloader.SaltYamlSafeLoader
// does (the loader of the yaml renderer, of pillar files and of the
// load_yaml/import_yaml filters and tags), and dumping as
// salt.utils.yaml.safe_dump does (the `yaml` filter). Pure functions; safe
// to call from several threads.
namespace brine::render {

// YAML that cannot be loaded. what() is "<name> line L column C: <message>"
// (or "<name>: <message>" when the position is unknown); line() and
// column() are 1-based, 0 when unknown. Syntax errors are libyaml's (the
// parser PyYAML's C loader uses), in its words: message() is the problem,
// then the context when there is one ("did not find expected ',' or ']'
// (while parsing a flow sequence at line 1 column 4)").
class yaml_error : public template_error {
 public:
  yaml_error(const std::string& name, int line, int column, std::string message,
             std::string salt_message = {});
  int line() const { return line_; }
  int column() const { return column_; }
  const std::string& message() const { return message_; }
  // What Salt's yaml renderer reports for the same text: str() of the
  // MarkedYAMLError PyYAML's C loader raises (context, its mark, problem,
  // its mark: `while parsing a flow sequence\n  in "<unicode string>",
  // line 1, column 4\ndid not find expected ',' or ']'\n  in "<unicode
  // string>", line 2, column 2`), or a scanner error's problem alone, as
  // SaltRenderError words it. message() when not given.
  const std::string& salt_message() const { return salt_message_; }

 private:
  int line_;
  int column_;
  std::string message_;
  std::string salt_message_;
};

// The data of one YAML document, `name` naming it in errors, as
// SaltYamlSafeLoader constructs it: YAML 1.1 scalars (yes/no/on/off are
// booleans, `0x`, `0b` and `_` in integers, `.inf`), except that a plain
// integer with leading zeros is decimal (`0644` is 644, as Salt users write
// file modes; PyYAML alone reads 420); timestamps stay strings; merge keys
// (`<<`, a mapping or a list of mappings, explicit keys winning); a key seen
// twice is refused ("found conflicting ID 'x'"), as are mapping or sequence
// keys, tags SafeLoader does not construct (`!!python/unicode` is a string)
// and a second document. An empty text is null.
//
// Json: nlohmann::json (keys sorted) or nlohmann::ordered_json (document
// order, as Salt's OrderedDict loader keeps it). Keys become strings (1 and
// '1' are still two keys, as in Python).
template <class Json>
Json load_yaml(std::string_view text, const std::string& name);

// The same as an engine value: dicts in document order, keys keeping their
// type (int, bool, None, float), duplicates found with Python's == (so `1`
// and `true` conflict, as in Python).
value load_yaml_value(std::string_view text, const std::string& name);

struct yaml_dump_options {
  // PyYAML's default_flow_style: true writes every collection in flow style
  // (`{a: 1, b: [1, 2]}`), false none, and Salt's default (None in
  // safe_dump) only the collections that hold no collection.
  enum class flow { always, never, leaves } flow_style = flow::always;
  // yaml.dump's sort_keys: a dict's keys are sorted.
  bool sort_keys = true;
  // Salt's SafeOrderedDumper (salt.utils.yaml.safe_dump, the `yaml`
  // filter) writes an OrderedDict (a dict marked ordered_dict: what Salt's
  // YAML renderer made) in its own order whatever sort_keys says; its
  // serializers' Dumper (slsutil.serialize) sorts it like any dict.
  bool ordered_dicts_in_order = false;
  // Drop the trailing newline and the "..." document end marker, as the
  // `yaml` filter does (`.strip()`).
  bool strip = true;
};

// The text salt.utils.yaml.safe_dump(v, default_flow_style=...) prints with
// Salt's SafeOrderedDumper (allow_unicode, an 80-column width, 2-space
// indentation, PyYAML's choice of plain, single- or double-quoted scalars).
// Throws template_error for a value YAML cannot hold (a callable, an
// undefined value).
std::string dump_yaml(const value& v, const yaml_dump_options& options = {});

}  // namespace brine::render
