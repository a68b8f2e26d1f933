#pragma once

#include <map>
#include <string>
#include <vector>

#include "render/interpreter.h"

// The filters, tests and globals Salt 3006 adds to Jinja (salt.utils.jinja,
// salt.utils.data, stringutils, hashutils, network, path, yamlencoding and
// the SerializerExtension), with Salt's semantics. Salt's filters are
// always on in brine, as in Salt; the ones Salt cannot give a deterministic
// or host-free answer for (random_hash, dns_check, file_hashsum, ...) fail
// naming the filter.
namespace brine::render::detail {

// Salt's filters that have no Jinja namesake; builtin_filters() merges them.
const std::map<std::string, filter_fn>& salt_filters();
// Salt's tests (match, equalto, list); builtin_tests() merges them.
const std::map<std::string, test_fn>& salt_tests();
// Salt's globals (raise, odict, ifelse), or an undefined value.
value salt_global(const std::string& name);

// Jinja's `random` filter: one item of the sequence, chosen as Python's
// random.choice does, or undefined for an empty one. Here, beside Salt's
// random_shuffle and random_sample, so that the three share one generator.
value jinja_random(interpreter& in, const value& v, call_args& a);

// pprint.pformat(v): Jinja's pprint filter and Salt's python filter.
std::string python_pformat(const value& v);

// Python's textwrap.wrap(text, width, expand_tabs=False,
// replace_whitespace=False, ...) for Jinja's wordwrap filter (here for its
// regex engine).
std::vector<std::string> textwrap(const std::string& text, std::size_t width, bool break_long_words,
                                  bool break_on_hyphens);

}  // namespace brine::render::detail

namespace brine::render {

// Salt replaces four of Jinja's filters with its own: `tojson` (keys in
// insertion order, any json.dumps option), `unique` (exact, keeps order),
// `min` and `max` (Python's min()/max(), no attribute or case folding).
// Jinja's stay the built-ins; a host rendering Salt's templates installs
// Salt's through environment::filters with this, which also sets
// environment::yaml_loader to Salt's dialect (render/yaml.h) when unset.
void use_salt_dialect(environment& env);

// Marks every dict in `v` (v too) a collections.OrderedDict, as Salt's YAML
// renderer makes each mapping of an sls or pillar file (SaltYamlSafeLoader
// with dictclass=OrderedDict), for a host putting such data (a pillar) in a
// template's context: Jinja then says "'collections.OrderedDict object' has
// no attribute 'x'". load_yaml_value is not that loader: Salt's load_yaml,
// import_yaml and slsutil.deserialize use safe_load, whose mappings are
// dicts.
void mark_ordered_dicts(const value& v);

}  // namespace brine::render
