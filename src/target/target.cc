#include "target/target.h"

#include <algorithm>
#include <set>
#include <stdexcept>

#include "target/program.h"

namespace brine::target {

namespace {

constexpr std::pair<std::string_view, type> k_types[] = {
    {"glob", type::glob},
    {"pcre", type::pcre},
    {"list", type::list},
    {"grain", type::grain},
    {"grain_pcre", type::grain_pcre},
    {"pillar", type::pillar},
    {"pillar_pcre", type::pillar_pcre},
    {"ipcidr", type::ipcidr},
    {"nodegroup", type::nodegroup},
    {"compound", type::compound},
};

std::string_view trim(std::string_view s) {
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

void sort_unique(std::vector<std::string>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
}

}  // namespace

std::optional<type> parse_type(std::string_view name) {
  for (const auto& [n, t] : k_types) {
    if (n == name) return t;
  }
  return std::nullopt;
}

std::string_view type_name(type t) {
  for (const auto& [n, v] : k_types) {
    if (v == t) return n;
  }
  return "?";
}

nodegroups nodegroups_from_json(const nlohmann::json& value) {
  nodegroups out;
  auto add = [&](const std::string& name, const nlohmann::json& def) {
    if (def.is_string()) {
      out[name] = def.get<std::string>();
    } else if (def.is_array()) {
      std::vector<std::string> words;
      for (const auto& w : def) {
        if (w.is_object() || w.is_array() || w.is_null()) {
          throw base::error("nodegroups: " + name +
                            ": every item of the list must be a word (a minion id, a target or "
                            "an operator), got " +
                            w.dump());
        }
        words.push_back(detail::python_str(w));
      }
      out[name] = std::move(words);
    } else {
      throw base::error("nodegroups: " + name +
                        " must be a compound target (a string) or a list of words, got " +
                        def.dump());
    }
  };
  if (value.is_null()) return out;
  if (value.is_object()) {
    for (const auto& [name, def] : value.items()) add(name, def);
  } else if (value.is_array()) {
    for (const auto& entry : value) {
      if (!entry.is_object() || entry.size() != 1) {
        throw base::error("nodegroups: a list entry must be one 'name: target' pair, got " +
                          entry.dump());
      }
      add(entry.begin().key(), entry.begin().value());
    }
  } else {
    throw base::error("nodegroups must be a map of nodegroup names to targets, got " +
                      value.dump());
  }
  return out;
}

namespace detail {

std::vector<std::string> parse_id_list(std::string_view text) {
  std::vector<std::string> ids;
  std::string_view t = trim(text);
  if (t.starts_with('[')) {
    auto j = nlohmann::json::parse(t, nullptr, false);
    if (!j.is_discarded() && j.is_array()) {
      for (const auto& e : j) {
        if (!e.is_string() && !e.is_number()) {
          throw std::invalid_argument("is a list with an item that is not a minion id: " +
                                      e.dump());
        }
        ids.push_back(python_str(e));
      }
    } else {
      // A YAML flow sequence: [a, 'b', "c"].
      if (!t.ends_with(']'))
        throw std::invalid_argument("opens a list with '[' but never closes it");
      std::string_view inner = t.substr(1, t.size() - 2);
      while (!inner.empty()) {
        size_t comma = inner.find(',');
        std::string_view item = trim(inner.substr(0, comma));
        if (item.size() >= 2 && (item.front() == '\'' || item.front() == '"') &&
            item.back() == item.front()) {
          item = item.substr(1, item.size() - 2);
        }
        if (!item.empty()) ids.emplace_back(item);
        if (comma == std::string_view::npos) break;
        inner.remove_prefix(comma + 1);
      }
    }
  } else if (t.find(',') != std::string_view::npos) {
    std::string item;
    for (char c : t) {
      if (c == ',') {
        if (!item.empty()) ids.push_back(std::move(item));
        item.clear();
      } else if (c != ' ') {
        item += c;
      }
    }
    if (!item.empty()) ids.push_back(std::move(item));
  } else {
    size_t i = 0;
    while (i < t.size()) {
      size_t end = t.find_first_of(" \t\n\r", i);
      if (end == std::string_view::npos) end = t.size();
      if (end > i) ids.emplace_back(t.substr(i, end - i));
      i = end + 1;
    }
  }
  sort_unique(ids);
  if (ids.empty()) throw std::invalid_argument("names no minion id");
  return ids;
}

term make_term(type t, std::string_view pattern, char delimiter) {
  switch (t) {
    case type::glob:
      return glob_term{glob(pattern, false)};
    case type::pcre:
      try {
        return pcre_term{regex(std::string(pattern))};
      } catch (const std::regex_error& e) {
        throw std::invalid_argument(std::string("is not a valid regular expression: ") + e.what());
      }
    case type::list: {
      // L@: comma-separated, as Salt's _check_list_minions splits it.
      list_term l;
      size_t start = 0;
      while (start <= pattern.size()) {
        size_t comma = std::min(pattern.find(',', start), pattern.size());
        if (comma > start) l.ids.emplace_back(pattern.substr(start, comma - start));
        start = comma + 1;
      }
      if (l.ids.empty()) throw std::invalid_argument("names no minion id");
      sort_unique(l.ids);
      return l;
    }
    case type::grain:
    case type::grain_pcre:
    case type::pillar:
    case type::pillar_pcre: {
      bool pillar = t == type::pillar || t == type::pillar_pcre;
      bool regex_values = t == type::grain_pcre || t == type::pillar_pcre;
      data_term d{pillar, subdict_matcher(pattern, delimiter, regex_values), {}};
      if (!d.matcher.defect().empty()) throw std::invalid_argument(d.matcher.defect());
      // The matcher walks from the key before the first delimiter, unless
      // that key is `*` (every entry of the top level).
      std::string_view top = pattern.substr(0, pattern.find(delimiter));
      if (top != "*") d.top_key = std::string(top);
      return d;
    }
    case type::ipcidr:
      return cidr_term{cidr_matcher(pattern)};
    case type::nodegroup:
    case type::compound:
      break;
  }
  throw std::logic_error("make_term: not a single term type");
}

}  // namespace detail

uint32_t expression::program::add_term(detail::term t) {
  if (const auto* d = std::get_if<detail::data_term>(&t)) {
    (d->pillar ? uses_pillar : uses_grains) = true;
    if (!d->pillar) {
      if (d->top_key.empty()) {
        all_grains = true;
      } else {
        grain_keys.push_back(d->top_key);
      }
    }
  } else if (std::holds_alternative<detail::cidr_term>(t)) {
    uses_grains = true;
    grain_keys.insert(grain_keys.end(), {"ipv4", "ipv6"});
  }
  terms.push_back(std::move(t));
  return static_cast<uint32_t>(terms.size() - 1);
}

uint32_t expression::program::add_node(detail::node n) {
  nodes.push_back(n);
  return static_cast<uint32_t>(nodes.size() - 1);
}

bool expression::program::eval(uint32_t n, std::string_view id, const minion_data& d,
                               bool greedy) const {
  const detail::node& x = nodes[n];
  switch (x.kind) {
    case detail::node::op::and_:
      return eval(x.a, id, d, greedy) && eval(x.b, id, d, greedy);
    case detail::node::op::or_:
      return eval(x.a, id, d, greedy) || eval(x.b, id, d, greedy);
    case detail::node::op::not_:
      return !eval(x.a, id, d, greedy);
    case detail::node::op::term:
      break;
  }
  const detail::term& t = terms[x.a];
  if (const auto* g = std::get_if<detail::glob_term>(&t)) return g->pattern.matches(id);
  if (const auto* l = std::get_if<detail::list_term>(&t)) {
    return std::binary_search(l->ids.begin(), l->ids.end(), id);
  }
  if (const auto* dt = std::get_if<detail::data_term>(&t)) {
    packed::value data = dt->pillar ? d.pillar : d.grains;
    return data ? dt->matcher.matches(data) : greedy;
  }
  if (const auto* c = std::get_if<detail::cidr_term>(&t)) {
    return d.grains ? c->matcher.matches(d.grains) : greedy;
  }
  return std::get<detail::pcre_term>(t).pattern.matches(id);
}

expression expression::parse(std::string_view text, type t, const nodegroups& groups,
                             char delimiter) {
  auto p = std::make_shared<program>();
  p->text = std::string(text);
  p->kind = t;
  if (t == type::compound || t == type::nodegroup) {
    p->root = detail::parse_compound(*p, text, t, groups);
  } else {
    std::string head = "target '" + p->text + "' (" + std::string(type_name(t)) + ")";
    if (trim(text).empty()) throw error(head + ": empty expression", 0);
    try {
      detail::term term = t == type::list ? detail::list_term{detail::parse_id_list(text)}
                                          : detail::make_term(t, text, delimiter);
      p->root = p->add_node({detail::node::op::term, p->add_term(std::move(term))});
    } catch (const std::invalid_argument& e) {
      throw error(head + " " + e.what(), 0);
    }
  }

  // The ids of list terms, except those right after a `not` (Salt reports
  // none of those as missing). Nodegroups make the tree a DAG: visit each
  // (node, negated) pair once.
  std::set<std::pair<uint32_t, bool>> seen;
  auto collect = [&](auto& self, uint32_t n, bool negated) -> void {
    if (!seen.emplace(n, negated).second) return;
    const detail::node& x = p->nodes[n];
    switch (x.kind) {
      case detail::node::op::and_:
      case detail::node::op::or_:
        self(self, x.a, false);
        self(self, x.b, false);
        return;
      case detail::node::op::not_:
        self(self, x.a, true);
        return;
      case detail::node::op::term:
        if (const auto* l = std::get_if<detail::list_term>(&p->terms[x.a]); l && !negated) {
          p->listed.insert(p->listed.end(), l->ids.begin(), l->ids.end());
        }
        return;
    }
  };
  collect(collect, p->root, false);
  sort_unique(p->listed);
  sort_unique(p->grain_keys);
  return expression(std::move(p));
}

bool expression::matches(std::string_view id, const minion_data& data, bool greedy) const {
  return p_->eval(p_->root, id, data, greedy);
}

bool expression::matches(std::string_view id, const tree_data& data, bool greedy) const {
  packed::document grains, pillar;
  if (data.grains && p_->uses_grains) grains = packed::document(*data.grains);
  if (data.pillar && p_->uses_pillar) pillar = packed::document(*data.pillar);
  return p_->eval(p_->root, id, {grains.root(), pillar.root()}, greedy);
}

const std::string& expression::text() const { return p_->text; }
type expression::kind() const { return p_->kind; }
bool expression::uses_grains() const { return p_->uses_grains; }
bool expression::uses_pillar() const { return p_->uses_pillar; }
std::optional<std::vector<std::string>> expression::grain_keys() const {
  if (p_->all_grains) return std::nullopt;
  return p_->grain_keys;
}
const std::vector<std::string>& expression::listed() const { return p_->listed; }

match_result match(const expression& e, const cache_view& cache, bool greedy) {
  const expression::program& p = *e.p_;
  match_result r;
  std::vector<char> present(p.listed.size(), 0);
  bool sorted = true;
  cache.for_each([&](const std::string& id, const minion_data& d) {
    if (p.eval(p.root, id, d, greedy)) {
      if (!r.minions.empty() && !(r.minions.back() < id)) sorted = false;
      r.minions.push_back(id);
    }
    if (!p.listed.empty()) {
      auto it = std::lower_bound(p.listed.begin(), p.listed.end(), id);
      if (it != p.listed.end() && *it == id) present[it - p.listed.begin()] = 1;
    }
  });
  if (!sorted) sort_unique(r.minions);
  for (size_t i = 0; i < p.listed.size(); ++i) {
    if (!present[i]) r.missing.push_back(p.listed[i]);
  }
  return r;
}

}  // namespace brine::target
