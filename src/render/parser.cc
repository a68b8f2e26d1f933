#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <set>

#include "base/utf8.h"
#include "render/ast.h"

namespace brine::render::detail {
namespace {

constexpr int k_max_nesting = 100;

enum class tok {
  data,
  block_begin,
  block_end,
  var_begin,
  var_end,
  name,
  string,
  integer,
  floating,
  op,
  eof
};

struct token {
  tok t;
  std::string text;
  std::size_t pos = 0;
  value literal;
};

// Jinja's describe_token: a name as itself, an operator as its text, other
// tokens by Jinja's names for their types. Messages quote it, as Jinja does.
std::string describe(const token& t) {
  switch (t.t) {
    case tok::data:
      return "template data / text";
    case tok::block_begin:
      return "begin of statement block";
    case tok::block_end:
      return "end of statement block";
    case tok::var_begin:
      return "begin of print statement";
    case tok::var_end:
      return "end of print statement";
    case tok::eof:
      return "end of template";
    case tok::string:
      return "string";
    case tok::integer:
      return "integer";
    case tok::floating:
      return "float";
    default:
      return t.text;
  }
}

using base::append_utf8;

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

class lexer {
 public:
  lexer(const std::string& src, const std::string& name, const parse_options& o)
      : src_(src), name_(name), o_(o) {}

  [[noreturn]] void fail(std::size_t pos, const std::string& msg) const {
    int line = 1;
    int col = 1;
    for (std::size_t i = 0; i < pos && i < src_.size(); ++i) {
      if (src_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    throw located_error("template '" + name_ + "' line " + std::to_string(line) + " column " +
                        std::to_string(col) + ": " + msg);
  }

  std::vector<token> run() {
    std::size_t pos = 0;
    bool strip_next = false;
    while (pos < src_.size()) {
      std::size_t found = std::string::npos;
      for (std::size_t i = src_.find('{', pos); i != std::string::npos; i = src_.find('{', i + 1)) {
        if (i + 1 < src_.size() &&
            (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) {
          found = i;
          break;
        }
      }
      std::string text =
          src_.substr(pos, found == std::string::npos ? std::string::npos : found - pos);
      if (strip_next) {
        std::size_t k = 0;
        while (k < text.size() && is_space(text[k])) ++k;
        text.erase(0, k);
        strip_next = false;
      }
      if (found == std::string::npos) {
        emit_data(text, pos);
        break;
      }
      char kind = src_[found + 1];
      char mod = found + 2 < src_.size() ? src_[found + 2] : '\0';
      if (mod == '-') {
        while (!text.empty() && is_space(text.back())) text.pop_back();
      } else if (o_.lstrip_blocks && kind != '{' && mod != '+') {
        auto nl = text.rfind('\n');
        std::size_t l = nl == std::string::npos ? 0 : nl + 1;
        bool line_starting = nl != std::string::npos || pos == 0 || src_[pos - 1] == '\n';
        if (line_starting && std::all_of(text.begin() + static_cast<std::ptrdiff_t>(l), text.end(),
                                         [](char c) { return c == ' ' || c == '\t'; }))
          text.erase(l);
      }
      emit_data(text, pos);
      std::size_t p = found + 2 + ((mod == '-' || mod == '+') ? 1 : 0);
      if (kind == '#') {
        auto end = src_.find("#}", p);
        if (end == std::string::npos) fail(found, "missing end of comment tag");
        bool minus = end > p && src_[end - 1] == '-';
        pos = end + 2;
        if (minus) {
          strip_next = true;
        } else if (o_.trim_blocks && pos < src_.size() && src_[pos] == '\n') {
          ++pos;
        }
        continue;
      }
      if (kind == '%' && try_raw(found, p, pos, strip_next)) continue;
      out_.push_back(
          {kind == '%' ? tok::block_begin : tok::var_begin, kind == '%' ? "{%" : "{{", found, {}});
      pos = lex_tag(p, kind == '%', strip_next);
    }
    // Jinja's end of template is on the line of the last token when a tag
    // is left open (its error names that line).
    bool in_tag = !out_.empty() && out_.back().t != tok::data &&
                  out_.back().t != tok::block_end && out_.back().t != tok::var_end;
    out_.push_back({tok::eof, "", in_tag ? out_.back().pos : src_.size(), {}});
    return std::move(out_);
  }

 private:
  void emit_data(const std::string& text, std::size_t pos) {
    if (!text.empty()) out_.push_back({tok::data, text, pos, {}});
  }

  std::size_t skip_ws(std::size_t p) const {
    while (p < src_.size() && is_space(src_[p])) ++p;
    return p;
  }

  // `{% raw %}...{% endraw %}`: the text between is data, as it is.
  bool try_raw(std::size_t begin, std::size_t p, std::size_t& pos, bool& strip_next) {
    std::size_t q = skip_ws(p);
    if (src_.compare(q, 3, "raw") != 0) return false;
    q = skip_ws(q + 3);
    bool minus = false;
    if (src_.compare(q, 1, "-") == 0) {
      minus = true;
      ++q;
    }
    if (src_.compare(q, 2, "%}") != 0) return false;
    q += 2;
    if (minus) q = skip_ws(q);
    std::size_t search = q;
    while (true) {
      auto e = src_.find("{%", search);
      if (e == std::string::npos) fail(begin, "missing end of raw directive");
      std::size_t r = e + 2;
      bool lminus = r < src_.size() && src_[r] == '-';
      if (r < src_.size() && (src_[r] == '-' || src_[r] == '+')) ++r;
      r = skip_ws(r);
      if (src_.compare(r, 6, "endraw") != 0) {
        search = e + 2;
        continue;
      }
      r = skip_ws(r + 6);
      bool rminus = false;
      if (r < src_.size() && (src_[r] == '-' || src_[r] == '+')) {
        rminus = src_[r] == '-';
        ++r;
      }
      if (src_.compare(r, 2, "%}") != 0) {
        search = e + 2;
        continue;
      }
      std::string text = src_.substr(q, e - q);
      if (lminus) {
        while (!text.empty() && is_space(text.back())) text.pop_back();
      } else if (o_.lstrip_blocks) {
        auto nl = text.rfind('\n');
        std::size_t l = nl == std::string::npos ? 0 : nl + 1;
        if (std::all_of(text.begin() + static_cast<std::ptrdiff_t>(l), text.end(),
                        [](char c) { return c == ' ' || c == '\t'; }))
          text.erase(l);
      }
      emit_data(text, q);
      pos = r + 2;
      if (rminus) {
        strip_next = true;
      } else if (o_.trim_blocks && pos < src_.size() && src_[pos] == '\n') {
        ++pos;
      }
      return true;
    }
  }

  std::size_t lex_tag(std::size_t p, bool block, bool& strip_next) {
    const char* end = block ? "%}" : "}}";
    std::string closers;
    while (true) {
      p = skip_ws(p);
      // The parser reports the end, as what it expected there.
      if (p >= src_.size()) return p;
      if (closers.empty()) {
        if ((src_[p] == '-' || (block && src_[p] == '+')) && src_.compare(p + 1, 2, end) == 0) {
          out_.push_back({block ? tok::block_end : tok::var_end, end, p, {}});
          p += 3;
          // `+%}` keeps the newline that trim_blocks would remove.
          if (src_[p - 3] == '-') strip_next = true;
          return p;
        }
        if (src_.compare(p, 2, end) == 0) {
          out_.push_back({block ? tok::block_end : tok::var_end, end, p, {}});
          p += 2;
          if (block && o_.trim_blocks && p < src_.size() && src_[p] == '\n') ++p;
          return p;
        }
      }
      char c = src_[p];
      std::size_t start = p;
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        while (p < src_.size() &&
               (std::isalnum(static_cast<unsigned char>(src_[p])) || src_[p] == '_'))
          ++p;
        out_.push_back({tok::name, src_.substr(start, p - start), start, {}});
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        p = lex_number(p);
      } else if (c == '\'' || c == '"') {
        p = lex_string(p);
      } else {
        static const char* two[] = {"==", "!=", "<=", ">=", "//", "**"};
        std::string op;
        for (const char* t : two)
          if (src_.compare(p, 2, t) == 0) op = t;
        if (op.empty()) {
          if (std::string("+-*/%~<>=.,:|()[]{}").find(c) == std::string::npos)
            fail(p, std::string("unexpected char '") + c + "'");
          op = std::string(1, c);
        }
        // Jinja's lexer checks that brackets pair up.
        if (op == "(" || op == "[" || op == "{") {
          closers.push_back(op == "(" ? ')' : op == "[" ? ']' : '}');
        } else if (op == ")" || op == "]" || op == "}") {
          if (closers.empty()) fail(p, "unexpected '" + op + "'");
          if (closers.back() != op[0])
            fail(p, "unexpected '" + op + "', expected '" + closers.back() + "'");
          closers.pop_back();
        }
        out_.push_back({tok::op, op, start, {}});
        p += op.size();
      }
    }
  }

  std::size_t lex_number(std::size_t p) {
    std::size_t start = p;
    std::string digits;
    auto take_digits = [&] {
      while (p < src_.size() &&
             (std::isdigit(static_cast<unsigned char>(src_[p])) || src_[p] == '_')) {
        if (src_[p] != '_') digits += src_[p];
        ++p;
      }
    };
    if (src_[p] == '0' && p + 2 < src_.size() &&
        std::string("xXoObB").find(src_[p + 1]) != std::string::npos &&
        std::isxdigit(static_cast<unsigned char>(src_[p + 2]))) {
      char kind = static_cast<char>(std::tolower(static_cast<unsigned char>(src_[p + 1])));
      int base = kind == 'x' ? 16 : kind == 'o' ? 8 : 2;
      p += 2;
      while (p < src_.size() &&
             (std::isxdigit(static_cast<unsigned char>(src_[p])) || src_[p] == '_')) {
        if (src_[p] != '_') digits += src_[p];
        ++p;
      }
      char* end = nullptr;
      errno = 0;
      long long v = std::strtoll(digits.c_str(), &end, base);
      if (*end != '\0') fail(start, "invalid digit in number literal");
      if (errno == ERANGE) fail(start, "integer literal too large");
      out_.push_back({tok::integer, src_.substr(start, p - start), start,
                      value(static_cast<std::int64_t>(v))});
      return p;
    }
    take_digits();
    bool is_float = false;
    if (p + 1 < src_.size() && src_[p] == '.' &&
        std::isdigit(static_cast<unsigned char>(src_[p + 1]))) {
      is_float = true;
      digits += '.';
      ++p;
      take_digits();
    }
    if (p < src_.size() && (src_[p] == 'e' || src_[p] == 'E')) {
      std::size_t q = p + 1;
      if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) ++q;
      if (q < src_.size() && std::isdigit(static_cast<unsigned char>(src_[q]))) {
        is_float = true;
        digits += 'e';
        digits += src_.substr(p + 1, q - p - 1);
        p = q;
        take_digits();
      }
    }
    token t{is_float ? tok::floating : tok::integer, src_.substr(start, p - start), start, {}};
    if (is_float) {
      t.literal = std::strtod(digits.c_str(), nullptr);
    } else {
      errno = 0;
      long long v = std::strtoll(digits.c_str(), nullptr, 10);
      if (errno == ERANGE) fail(start, "integer literal too large");
      t.literal = static_cast<std::int64_t>(v);
    }
    out_.push_back(std::move(t));
    return p;
  }

  std::size_t lex_string(std::size_t p) {
    char q = src_[p];
    std::size_t start = p++;
    std::string s;
    while (true) {
      if (p >= src_.size()) fail(start, "unterminated string");
      char c = src_[p];
      if (c == q) break;
      if (c == '\\' && p + 1 < src_.size()) {
        char e = src_[++p];
        switch (e) {
          case 'n':
            s += '\n';
            break;
          case 't':
            s += '\t';
            break;
          case 'r':
            s += '\r';
            break;
          case '0':
            s += '\0';
            break;
          case '\\':
          case '\'':
          case '"':
            s += e;
            break;
          case '\n':
            break;
          case 'x':
          case 'u':
          case 'U': {
            std::size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
            std::uint32_t cp = 0;
            for (std::size_t k = 1; k <= n; ++k) {
              char h = p + k < src_.size() ? src_[p + k] : '\0';
              if (!std::isxdigit(static_cast<unsigned char>(h)))
                fail(p - 1, std::string("truncated \\") + e + " escape");
              cp = cp * 16 + static_cast<std::uint32_t>(std::isdigit(static_cast<unsigned char>(h))
                                                            ? h - '0'
                                                            : (std::tolower(h) - 'a' + 10));
            }
            if (cp > 0x10ffff) fail(p - 1, "illegal Unicode character");
            append_utf8(s, cp);
            p += n;
            break;
          }
          default:
            s += '\\';
            s += e;
        }
        ++p;
        continue;
      }
      s += c;
      ++p;
    }
    out_.push_back({tok::string, src_.substr(start, p + 1 - start), start, value(s)});
    return p + 1;
  }

  const std::string& src_;
  const std::string& name_;
  const parse_options& o_;
  std::vector<token> out_;
};

void find_names(const expr* e, std::set<std::string>& names) {
  if (!e) return;
  if (e->k == expr::kind::name) names.insert(e->name);
  for (const auto& a : e->args) find_names(a.get(), names);
  for (const auto& [k, a] : e->kwargs) find_names(a.get(), names);
  find_names(e->dyn_args.get(), names);
  find_names(e->dyn_kwargs.get(), names);
}

void find_names(const body& b, std::set<std::string>& names) {
  for (const auto& s : b) {
    find_names(s->target.get(), names);
    find_names(s->value.get(), names);
    find_names(s->condition.get(), names);
    for (const auto& [c, branch] : s->branches) {
      find_names(c.get(), names);
      find_names(branch, names);
    }
    find_names(s->children, names);
    find_names(s->else_children, names);
    for (const auto& p : s->params) find_names(p.default_value.get(), names);
    for (const auto& [t, v] : s->assigns) find_names(v.get(), names);
  }
}

void note_special_names(stmt& s) {
  std::set<std::string> names;
  find_names(s.children, names);
  s.uses_varargs = names.count("varargs") != 0;
  s.uses_kwargs = names.count("kwargs") != 0;
  s.uses_caller = names.count("caller") != 0;
}

class parser {
 public:
  parser(std::vector<token> toks, const lexer& lx, const std::string& src)
      : t_(std::move(toks)), lx_(lx), src_(src) {}

  body parse_template() {
    body b = parse_body({});
    if (cur().t != tok::eof) unexpected(cur());
    return b;
  }

 private:
  const token& cur() const { return t_[i_]; }
  const token& peek(std::size_t n = 1) const { return t_[std::min(i_ + n, t_.size() - 1)]; }
  token next() { return t_[i_ < t_.size() - 1 ? i_++ : i_]; }
  bool is_op(const char* s) const { return cur().t == tok::op && cur().text == s; }
  bool is_name(const char* s) const { return cur().t == tok::name && cur().text == s; }
  bool skip_op(const char* s) {
    if (!is_op(s)) return false;
    ++i_;
    return true;
  }
  bool skip_name(const char* s) {
    if (!is_name(s)) return false;
    ++i_;
    return true;
  }
  [[noreturn]] void fail(const token& t, const std::string& msg) const { lx_.fail(t.pos, msg); }
  // Jinja's TokenStream.expect failing: `what` is Jinja's name for the
  // token it wanted.
  [[noreturn]] void expected(const std::string& what) const {
    if (cur().t == tok::eof) fail(cur(), "unexpected end of template, expected '" + what + "'.");
    fail(cur(), "expected token '" + what + "', got '" + describe(cur()) + "'");
  }
  [[noreturn]] void unexpected(const token& t) const {
    fail(t, "unexpected '" + describe(t) + "'");
  }
  void expect_op(const char* s) {
    if (!skip_op(s)) expected(s);
  }
  void expect_name(const char* s) {
    if (!skip_name(s)) expected(s);
  }
  void expect_end() {
    if (cur().t != tok::block_end) expected("end of statement block");
    ++i_;
  }
  std::string expect_name() {
    if (cur().t != tok::name) expected("name");
    return next().text;
  }

  // Line and column of a token: a binary search in the offsets where lines
  // start (found once per template). Scanning from the start of the source
  // for every node made parsing quadratic in the template's length (a
  // formula's 47 KB map took most of a minute).
  void position(const token& t, int& line, int& col) const {
    if (line_starts_.empty()) {
      line_starts_.push_back(0);
      for (std::size_t i = 0; i < src_.size(); ++i) {
        if (src_[i] == '\n') line_starts_.push_back(i + 1);
      }
    }
    std::size_t target = std::min<std::size_t>(t.pos, src_.size());
    auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), target);
    std::size_t index = static_cast<std::size_t>(it - line_starts_.begin()) - 1;
    line = static_cast<int>(index) + 1;
    col = static_cast<int>(target - line_starts_[index]) + 1;
  }
  mutable std::vector<std::size_t> line_starts_;

  expr_ptr make(expr::kind k, const token& at) {
    auto e = std::make_unique<expr>();
    e->k = k;
    position(at, e->line, e->column);
    return e;
  }
  stmt_ptr make_stmt(stmt::kind k, const token& at) {
    auto s = std::make_unique<stmt>();
    s->k = k;
    position(at, s->line, s->column);
    return s;
  }

  // Statements until `{% <one of ends>`; leaves the tag name as the current token.
  // `ends` in Jinja's order (its messages list them so); `block` is the tag
  // being closed.
  body parse_body(const std::vector<std::string>& ends, const std::string& block = "") {
    body b;
    open_ends_.push_back(&ends);
    struct pop {
      std::vector<const std::vector<std::string>*>& v;
      ~pop() { v.pop_back(); }
    } popper{open_ends_};
    while (true) {
      const token& t = cur();
      if (t.t == tok::eof) {
        if (!ends.empty()) fail_unknown_tag(t, nullptr, block);
        return b;
      }
      if (t.t == tok::data) {
        auto s = make_stmt(stmt::kind::text, t);
        s->text = t.text;
        b.push_back(std::move(s));
        ++i_;
      } else if (t.t == tok::var_begin) {
        auto s = make_stmt(stmt::kind::output, t);
        ++i_;
        s->value = parse_tuple(false, true);
        if (cur().t != tok::var_end) expected("end of print statement");
        ++i_;
        b.push_back(std::move(s));
      } else if (t.t == tok::block_begin) {
        const token& n = peek();
        if (n.t == tok::name && std::find(ends.begin(), ends.end(), n.text) != ends.end()) {
          ++i_;
          return b;
        }
        ++i_;
        b.push_back(parse_statement(block));
      } else {
        unexpected(t);
      }
    }
  }

  // Jinja's _fail_ut_eof: an unknown tag `name` (null: the end of the
  // template) while the blocks of open_ends_ wait to be closed, the
  // innermost `block`.
  [[noreturn]] void fail_unknown_tag(const token& t, const std::string* name,
                                     const std::string& block) {
    const std::vector<std::string>* looking = nullptr;
    bool expected_somewhere = false;
    for (const auto* e : open_ends_) {
      if (e->empty()) continue;
      looking = e;
      if (name != nullptr && std::find(e->begin(), e->end(), *name) != e->end()) {
        expected_somewhere = true;
      }
    }
    std::string msg = name == nullptr ? "Unexpected end of template."
                                      : "Encountered unknown tag '" + *name + "'.";
    if (looking != nullptr) {
      std::string want;
      for (const auto& e : *looking) want += (want.empty() ? "'" : " or '") + e + "'";
      msg += expected_somewhere ? " You probably made a nesting mistake. Jinja is expecting this "
                                  "tag, but currently looking for " + want + "."
                                : " Jinja was looking for the following tags: " + want + ".";
    }
    if (!block.empty()) msg += " The innermost block that needs to be closed is '" + block + "'.";
    fail(t, msg);
  }

  stmt_ptr parse_statement(const std::string& block) {
    nesting guard(*this);
    const token& t = cur();
    if (t.t != tok::name) fail(t, "expected a tag name, got '" + describe(t) + "'");
    const std::string& n = t.text;
    if (n == "if") return parse_if();
    if (n == "for") return parse_for();
    if (n == "set") return parse_set();
    if (n == "macro") return parse_macro();
    if (n == "call") return parse_call();
    if (n == "filter") return parse_filter_block();
    if (n == "with") return parse_with();
    if (n == "do") {
      auto s = make_stmt(stmt::kind::do_, next());
      s->value = parse_tuple(false, true);
      expect_end();
      return s;
    }
    if (n == "break" || n == "continue") {
      if (loop_depth_ == 0) fail(t, "'" + n + "' outside of a loop");
      auto s = make_stmt(n == "break" ? stmt::kind::break_ : stmt::kind::continue_, next());
      expect_end();
      return s;
    }
    if (n == "include") return parse_include();
    if (n == "import") return parse_import(stmt::kind::import_);
    if (n == "from") return parse_from();
    if (n == "extends") {
      auto s = make_stmt(stmt::kind::extends, next());
      s->value = parse_expression();
      expect_end();
      return s;
    }
    if (n == "block") return parse_block();
    if (n == "import_yaml" || n == "import_json" || n == "import_text") {
      std::string format = n.substr(7);
      auto s = parse_import(stmt::kind::import_data);
      s->format = format;
      return s;
    }
    if (n == "load_yaml" || n == "load_json" || n == "load_text") return parse_load();
    if (n == "profile") return parse_profile();
    fail_unknown_tag(t, &n, block);
  }

  stmt_ptr parse_if() {
    auto s = make_stmt(stmt::kind::if_, next());
    while (true) {
      expr_ptr cond = parse_tuple(false, false);
      expect_end();
      body b = parse_body({"elif", "else", "endif"}, "if");
      s->branches.emplace_back(std::move(cond), std::move(b));
      std::string tag = next().text;
      if (tag == "elif") continue;
      if (tag == "else") {
        expect_end();
        s->else_children = parse_body({"endif"}, "if");
        ++i_;
      }
      expect_end();
      return s;
    }
  }

  stmt_ptr parse_for() {
    auto s = make_stmt(stmt::kind::for_, next());
    s->target = parse_assign_target(true);
    expect_name("in");
    s->value = parse_tuple(false, false, {"recursive"});
    if (skip_name("if")) s->condition = parse_tuple(false, false);
    if (skip_name("recursive")) s->recursive = true;
    expect_end();
    ++loop_depth_;
    s->children = parse_body({"endfor", "else"}, "for");
    --loop_depth_;
    if (next().text == "else") {
      expect_end();
      s->else_children = parse_body({"endfor"}, "for");
      ++i_;
    }
    expect_end();
    return s;
  }

  expr_ptr parse_assign_target(bool allow_tuple) {
    const token& at = cur();
    if (cur().t == tok::name && peek().t == tok::op && peek().text == "." && allow_tuple == false) {
      auto e = make(expr::kind::getattr, at);
      auto base = make(expr::kind::name, at);
      base->name = next().text;
      ++i_;
      e->name = expect_name();
      e->args.push_back(std::move(base));
      return e;
    }
    auto one = [&]() {
      if (skip_op("(")) {
        auto inner = parse_assign_target(true);
        expect_op(")");
        return inner;
      }
      auto e = make(expr::kind::name, cur());
      e->name = expect_name();
      return e;
    };
    // Jinja parses a tuple target as a tuple: nothing before the end of the
    // tag is its "Expected an expression".
    if (allow_tuple && (cur().t == tok::block_end || cur().t == tok::eof)) {
      fail(cur(), "Expected an expression, got '" + describe(cur()) + "'");
    }
    auto first = one();
    if (!allow_tuple || !is_op(",")) return first;
    auto tup = make(expr::kind::tuple, at);
    tup->args.push_back(std::move(first));
    while (skip_op(",")) {
      if (cur().t != tok::name && !is_op("(")) break;
      tup->args.push_back(one());
    }
    return tup;
  }

  stmt_ptr parse_set() {
    const token& at = next();
    bool ns_target = cur().t == tok::name && peek().t == tok::op && peek().text == ".";
    expr_ptr target = parse_assign_target(!ns_target);
    if (skip_op("=")) {
      auto s = make_stmt(stmt::kind::set, at);
      s->target = std::move(target);
      s->value = parse_tuple(false, true);
      expect_end();
      return s;
    }
    auto s = make_stmt(stmt::kind::set_block, at);
    s->target = std::move(target);
    if (is_op("|")) s->value = parse_filter_chain(nullptr);
    expect_end();
    s->children = parse_body({"endset"}, "set");
    ++i_;
    expect_end();
    return s;
  }

  void parse_signature(std::vector<macro_param>& params) {
    expect_op("(");
    while (!is_op(")")) {
      if (!params.empty()) expect_op(",");
      if (is_op(")")) break;
      macro_param p;
      p.name = expect_name();
      if (skip_op("=")) {
        p.default_value = parse_expression();
      } else if (!params.empty() && params.back().default_value) {
        fail(cur(), "non-default argument follows default argument");
      }
      params.push_back(std::move(p));
    }
    ++i_;
  }

  stmt_ptr parse_macro() {
    auto s = make_stmt(stmt::kind::macro, next());
    s->name = expect_name();
    parse_signature(s->params);
    expect_end();
    int saved = loop_depth_;
    loop_depth_ = 0;
    s->children = parse_body({"endmacro"}, "macro");
    loop_depth_ = saved;
    ++i_;
    if (cur().t == tok::name && cur().text == s->name) ++i_;
    expect_end();
    note_special_names(*s);
    return s;
  }

  stmt_ptr parse_call() {
    auto s = make_stmt(stmt::kind::call_block, next());
    if (is_op("(")) parse_signature(s->params);
    const token& ct = cur();
    s->value = parse_expression();
    if (s->value->k != expr::kind::call) fail(ct, "expected a call after 'call'");
    expect_end();
    int saved = loop_depth_;
    loop_depth_ = 0;
    s->children = parse_body({"endcall"}, "call");
    loop_depth_ = saved;
    ++i_;
    expect_end();
    note_special_names(*s);
    return s;
  }

  // `with context` or `without context`, when it comes next.
  bool parse_context(stmt& s) {
    if ((is_name("with") || is_name("without")) && peek().t == tok::name &&
        peek().text == "context") {
      s.with_context = next().text == "with";
      ++i_;
      return true;
    }
    return false;
  }

  stmt_ptr parse_include() {
    auto s = make_stmt(stmt::kind::include, next());
    s->value = parse_expression();
    s->with_context = true;
    if (is_name("ignore") && peek().t == tok::name && peek().text == "missing") {
      i_ += 2;
      s->ignore_missing = true;
    }
    parse_context(*s);
    expect_end();
    return s;
  }

  stmt_ptr parse_import(stmt::kind k) {
    auto s = make_stmt(k, next());
    s->value = parse_expression();
    expect_name("as");
    s->name = expect_name();
    parse_context(*s);
    expect_end();
    return s;
  }

  stmt_ptr parse_from() {
    auto s = make_stmt(stmt::kind::from_import, next());
    s->value = parse_expression();
    expect_name("import");
    while (true) {
      if (!s->imports.empty()) expect_op(",");
      if (cur().t != tok::name) expected("name");
      if (parse_context(*s)) break;
      const token& at = cur();
      std::string name = expect_name();
      if (name.starts_with("_")) fail(at, "names starting with an underline can not be imported");
      std::string alias = name;
      if (skip_name("as")) alias = expect_name();
      s->imports.emplace_back(name, alias);
      if (parse_context(*s) || !is_op(",")) break;
    }
    expect_end();
    return s;
  }

  stmt_ptr parse_block() {
    const token& at = next();
    auto s = make_stmt(stmt::kind::block, at);
    s->name = expect_name();
    if (!block_names_.insert(s->name).second) fail(at, "block '" + s->name + "' defined twice");
    if (skip_name("scoped")) s->scoped = true;
    if (skip_name("required")) s->required = true;
    expect_end();
    int saved = loop_depth_;
    loop_depth_ = 0;
    s->children = parse_body({"endblock"}, "block");
    loop_depth_ = saved;
    ++i_;
    if (cur().t == tok::name && cur().text == s->name) ++i_;
    expect_end();
    if (s->required) {
      for (const auto& c : s->children) {
        if (c->k != stmt::kind::text ||
            !std::all_of(c->text.begin(), c->text.end(), [](char ch) { return is_space(ch); }))
          fail(at, "Required blocks can only contain comments or whitespace");
      }
    }
    return s;
  }

  // Salt's {% load_yaml as x %}...{% endload %}.
  stmt_ptr parse_load() {
    auto s = make_stmt(stmt::kind::load, cur());
    s->format = next().text.substr(5);
    expect_name("as");
    s->target = parse_assign_target(true);
    expect_end();
    s->children = parse_body({"endload"}, "load_" + s->format);
    ++i_;
    expect_end();
    return s;
  }

  // Salt's {% profile as 'label' %}...{% endprofile %}.
  stmt_ptr parse_profile() {
    auto s = make_stmt(stmt::kind::profile, next());
    expect_name("as");
    s->value = parse_expression();
    expect_end();
    s->children = parse_body({"endprofile"}, "profile");
    ++i_;
    expect_end();
    return s;
  }

  stmt_ptr parse_filter_block() {
    auto s = make_stmt(stmt::kind::filter_block, next());
    s->value = parse_filter_chain(nullptr, true);
    expect_end();
    s->children = parse_body({"endfilter"}, "filter");
    ++i_;
    expect_end();
    return s;
  }

  stmt_ptr parse_with() {
    auto s = make_stmt(stmt::kind::with, next());
    while (cur().t != tok::block_end) {
      if (!s->assigns.empty()) expect_op(",");
      auto target = parse_assign_target(false);
      expect_op("=");
      s->assigns.emplace_back(std::move(target), parse_expression());
    }
    expect_end();
    s->children = parse_body({"endwith"}, "with");
    ++i_;
    expect_end();
    return s;
  }

  // Expressions, by Jinja's precedence.
  expr_ptr parse_tuple(bool simplified, bool with_condexpr,
                       const std::set<std::string>& extra_end = {}, bool explicit_parens = false) {
    const token& at = cur();
    std::vector<expr_ptr> items;
    bool is_tuple = false;
    auto ends = [&] {
      if (cur().t == tok::var_end || cur().t == tok::block_end || cur().t == tok::eof) return true;
      if (is_op(")") || is_op("]")) return true;
      return cur().t == tok::name && extra_end.count(cur().text) != 0;
    };
    while (true) {
      if (!items.empty()) {
        if (!skip_op(",")) break;
        is_tuple = true;
        if (ends()) break;
      } else if (ends()) {
        break;  // Jinja's is_tuple_end before the first item too
      }
      if (simplified) {
        items.push_back(parse_primary());
      } else if (with_condexpr) {
        items.push_back(parse_expression());
      } else {
        items.push_back(parse_or());
      }
      if (!is_op(",")) break;
    }
    if (!is_tuple) {
      if (items.empty()) {
        if (!explicit_parens) fail(cur(), "Expected an expression, got '" + describe(cur()) + "'");
      } else {
        return std::move(items[0]);
      }
    }
    auto e = make(expr::kind::tuple, at);
    e->args = std::move(items);
    return e;
  }

  expr_ptr parse_expression() { return parse_condexpr(); }

  expr_ptr parse_condexpr() {
    expr_ptr e = parse_or();
    while (is_name("if")) {
      auto c = make(expr::kind::cond, next());
      auto cond = parse_or();
      expr_ptr other;
      if (skip_name("else")) other = parse_condexpr();
      c->args.push_back(std::move(e));
      c->args.push_back(std::move(cond));
      c->args.push_back(std::move(other));
      e = std::move(c);
    }
    return e;
  }

  expr_ptr parse_or() {
    expr_ptr e = parse_and();
    while (is_name("or")) {
      auto o = make(expr::kind::logic_or, next());
      o->args.push_back(std::move(e));
      o->args.push_back(parse_and());
      e = std::move(o);
    }
    return e;
  }

  expr_ptr parse_and() {
    expr_ptr e = parse_not();
    while (is_name("and")) {
      auto o = make(expr::kind::logic_and, next());
      o->args.push_back(std::move(e));
      o->args.push_back(parse_not());
      e = std::move(o);
    }
    return e;
  }

  // Nesting is bounded so that deep input is an error, not a stack overflow.
  struct nesting {
    parser& p;
    explicit nesting(parser& pp) : p(pp) {
      if (++p.depth_ > k_max_nesting) p.fail(p.cur(), "too deeply nested");
    }
    ~nesting() { --p.depth_; }
    nesting(const nesting&) = delete;
    nesting& operator=(const nesting&) = delete;
  };

  expr_ptr parse_not() {
    nesting guard(*this);
    if (is_name("not")) {
      auto n = make(expr::kind::logic_not, next());
      n->args.push_back(parse_not());
      return n;
    }
    return parse_compare();
  }

  expr_ptr parse_compare() {
    const token& at = cur();
    expr_ptr first = parse_math1();
    auto c = make(expr::kind::compare, at);
    c->args.push_back(std::move(first));
    while (true) {
      if (cur().t == tok::op && (cur().text == "==" || cur().text == "!=" || cur().text == "<" ||
                                 cur().text == ">" || cur().text == "<=" || cur().text == ">=")) {
        c->ops.push_back(next().text);
      } else if (is_name("in")) {
        ++i_;
        c->ops.push_back("in");
      } else if (is_name("not") && peek().t == tok::name && peek().text == "in") {
        i_ += 2;
        c->ops.push_back("notin");
      } else {
        break;
      }
      c->args.push_back(parse_math1());
    }
    if (c->ops.empty()) return std::move(c->args[0]);
    return c;
  }

  expr_ptr binary(const std::string& op, expr_ptr l, expr_ptr r, const token& at) {
    auto b = make(expr::kind::binary, at);
    b->name = op;
    b->args.push_back(std::move(l));
    b->args.push_back(std::move(r));
    return b;
  }

  expr_ptr parse_math1() {
    expr_ptr e = parse_concat();
    while (is_op("+") || is_op("-")) {
      const token& at = cur();
      std::string op = next().text;
      e = binary(op, std::move(e), parse_concat(), at);
    }
    return e;
  }

  expr_ptr parse_concat() {
    const token& at = cur();
    std::vector<expr_ptr> parts;
    parts.push_back(parse_math2());
    while (skip_op("~")) parts.push_back(parse_math2());
    if (parts.size() == 1) return std::move(parts[0]);
    auto c = make(expr::kind::concat, at);
    c->args = std::move(parts);
    return c;
  }

  expr_ptr parse_math2() {
    expr_ptr e = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const token& at = cur();
      std::string op = next().text;
      e = binary(op, std::move(e), parse_pow(), at);
    }
    return e;
  }

  expr_ptr parse_pow() {
    expr_ptr e = parse_unary();
    while (is_op("**")) {
      const token& at = cur();
      ++i_;
      e = binary("**", std::move(e), parse_unary(), at);
    }
    return e;
  }

  expr_ptr parse_unary(bool with_filter = true) {
    nesting guard(*this);
    expr_ptr e;
    if (is_op("-") || is_op("+")) {
      auto u = make(expr::kind::unary, cur());
      u->name = next().text;
      u->args.push_back(parse_unary(false));
      e = std::move(u);
    } else {
      e = parse_postfix(parse_primary());
    }
    if (with_filter) e = parse_filter_expr(std::move(e));
    return e;
  }

  expr_ptr parse_primary() {
    const token& t = cur();
    switch (t.t) {
      case tok::name: {
        ++i_;
        auto e = make(expr::kind::literal, t);
        if (t.text == "true" || t.text == "True") {
          e->literal = true;
        } else if (t.text == "false" || t.text == "False") {
          e->literal = false;
        } else if (t.text == "none" || t.text == "None") {
          e->literal = nullptr;
        } else {
          e->k = expr::kind::name;
          e->name = t.text;
        }
        return e;
      }
      case tok::string: {
        auto e = make(expr::kind::literal, t);
        std::string s;
        while (cur().t == tok::string) s += next().literal.as_string();
        e->literal = s;
        return e;
      }
      case tok::integer:
      case tok::floating: {
        auto e = make(expr::kind::literal, t);
        e->literal = next().literal;
        return e;
      }
      case tok::op:
        if (t.text == "(") {
          ++i_;
          auto e = parse_tuple(false, true, {}, true);
          expect_op(")");
          return e;
        }
        if (t.text == "[") {
          auto e = make(expr::kind::list, next());
          while (!is_op("]")) {
            if (!e->args.empty()) expect_op(",");
            if (is_op("]")) break;
            e->args.push_back(parse_expression());
          }
          ++i_;
          return e;
        }
        if (t.text == "{") {
          auto e = make(expr::kind::dict, next());
          while (!is_op("}")) {
            if (!e->args.empty()) expect_op(",");
            if (is_op("}")) break;
            e->args.push_back(parse_expression());
            expect_op(":");
            e->args.push_back(parse_expression());
          }
          ++i_;
          return e;
        }
        break;
      default:
        break;
    }
    unexpected(t);
  }

  expr_ptr parse_postfix(expr_ptr e) {
    while (true) {
      const token& at = cur();
      if (is_op(".")) {
        ++i_;
        if (cur().t == tok::name) {
          auto g = make(expr::kind::getattr, at);
          g->line = e->line;
          g->column = e->column;
          g->name = next().text;
          g->args.push_back(std::move(e));
          e = std::move(g);
        } else if (cur().t == tok::integer) {
          auto g = make(expr::kind::getitem, at);
          g->args.push_back(std::move(e));
          auto lit = make(expr::kind::literal, cur());
          lit->literal = next().literal;
          g->args.push_back(std::move(lit));
          e = std::move(g);
        } else {
          fail(cur(), "expected name or number");
        }
      } else if (is_op("[")) {
        ++i_;
        int line = e->line;
        int column = e->column;
        e = parse_subscript(std::move(e), at);
        e->line = line;
        e->column = column;
        expect_op("]");
      } else if (is_op("(")) {
        e = parse_call_expr(std::move(e));
      } else {
        return e;
      }
    }
  }

  expr_ptr parse_subscript(expr_ptr obj, const token& at) {
    expr_ptr parts[3];
    bool is_slice = false;
    int idx = 0;
    while (true) {
      if (is_op(":")) {
        ++i_;
        is_slice = true;
        if (++idx > 2) fail(cur(), "too many ':' in slice");
        continue;
      }
      if (is_op("]")) break;
      if (parts[idx]) expected("]");
      parts[idx] = parse_expression();
    }
    if (!is_slice) {
      auto g = make(expr::kind::getitem, at);
      g->args.push_back(std::move(obj));
      if (!parts[0]) fail(cur(), "Expected an expression, got '" + describe(cur()) + "'");
      g->args.push_back(std::move(parts[0]));
      return g;
    }
    auto s = make(expr::kind::slice, at);
    s->args.push_back(std::move(obj));
    for (auto& p : parts) s->args.push_back(std::move(p));
    return s;
  }

  void parse_call_args(expr& call) {
    expect_op("(");
    bool first = true;
    while (!is_op(")")) {
      if (!first) expect_op(",");
      first = false;
      if (is_op(")")) break;
      if (skip_op("**")) {
        if (call.dyn_kwargs) fail(cur(), "only one **argument is allowed");
        call.dyn_kwargs = parse_expression();
      } else if (skip_op("*")) {
        if (call.dyn_args || call.dyn_kwargs) fail(cur(), "invalid *argument");
        call.dyn_args = parse_expression();
      } else if (call.dyn_kwargs) {
        fail(cur(), "arguments follow **argument");
      } else if (cur().t == tok::name && peek().t == tok::op && peek().text == "=") {
        std::string key = next().text;
        ++i_;
        call.kwargs.emplace_back(key, parse_expression());
      } else {
        if (!call.kwargs.empty() || call.dyn_args)
          fail(cur(), "positional argument follows keyword argument");
        call.args.push_back(parse_expression());
      }
    }
    ++i_;
  }

  expr_ptr parse_call_expr(expr_ptr callee) {
    auto c = make(expr::kind::call, cur());
    c->line = callee->line;
    c->column = callee->column;
    c->args.push_back(std::move(callee));
    parse_call_args(*c);
    return c;
  }

  expr_ptr parse_filter_chain(expr_ptr input, bool first_without_bar = false) {
    bool need_bar = !first_without_bar;
    while (true) {
      if (need_bar && !skip_op("|")) return input;
      need_bar = true;
      auto f = make(expr::kind::filter, cur());
      f->name = expect_name();
      while (skip_op(".")) f->name += "." + expect_name();
      f->args.push_back(std::move(input));
      if (is_op("(")) parse_call_args(*f);
      input = std::move(f);
    }
  }

  expr_ptr parse_filter_expr(expr_ptr e) {
    while (true) {
      if (is_op("|")) {
        ++i_;
        auto f = make(expr::kind::filter, cur());
        f->name = expect_name();
        while (skip_op(".")) f->name += "." + expect_name();
        f->args.push_back(std::move(e));
        if (is_op("(")) parse_call_args(*f);
        e = std::move(f);
      } else if (is_name("is")) {
        auto tst = make(expr::kind::test, next());
        if (skip_name("not")) tst->negated = true;
        tst->name = expect_name();
        while (skip_op(".")) tst->name += "." + expect_name();
        tst->args.push_back(std::move(e));
        const token& c = cur();
        if (is_op("(")) {
          parse_call_args(*tst);
        } else if ((c.t == tok::name || c.t == tok::string || c.t == tok::integer ||
                    c.t == tok::floating || is_op("[") || is_op("{")) &&
                   !(c.t == tok::name && (c.text == "else" || c.text == "or" || c.text == "and"))) {
          if (c.t == tok::name && c.text == "is")
            fail(c, "you cannot chain multiple tests with is");
          tst->args.push_back(parse_postfix(parse_primary()));
        }
        e = std::move(tst);
      } else if (is_op("(")) {
        e = parse_call_expr(std::move(e));
      } else {
        return e;
      }
    }
  }

  std::vector<token> t_;
  std::size_t i_ = 0;
  // The end tags each open block waits for, outermost first.
  std::vector<const std::vector<std::string>*> open_ends_;
  const lexer& lx_;
  const std::string& src_;
  int loop_depth_ = 0;
  int depth_ = 0;
  std::set<std::string> block_names_;
};

void collect_blocks(const body& b, std::map<std::string, const stmt*>& blocks) {
  for (const auto& s : b) {
    if (s->k == stmt::kind::block) blocks.emplace(s->name, s.get());
    for (const auto& [c, branch] : s->branches) collect_blocks(branch, blocks);
    collect_blocks(s->children, blocks);
    collect_blocks(s->else_children, blocks);
  }
}

}  // namespace

body parse(const std::string& source, const std::string& name, const parse_options& opts) {
  // Jinja normalises line endings to \n and drops one trailing newline.
  std::string src;
  src.reserve(source.size());
  for (std::size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      src += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      src += source[i];
    }
  }
  if (!opts.keep_trailing_newline && !src.empty() && src.back() == '\n') src.pop_back();
  lexer lx(src, name, opts);
  auto toks = lx.run();
  parser p(std::move(toks), lx, src);
  return p.parse_template();
}

std::shared_ptr<const template_tree> parse_template(const std::string& source,
                                                   const std::string& name,
                                                   const parse_options& opts) {
  auto t = std::make_shared<template_tree>();
  t->name = name;
  t->root = parse(source, name, opts);
  collect_blocks(t->root, t->blocks);
  return t;
}

}  // namespace brine::render::detail
