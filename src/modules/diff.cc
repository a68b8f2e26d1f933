#include "modules/diff.h"

#include <algorithm>
#include <tuple>
#include <unordered_map>

namespace brine::modules {
namespace {

struct match {
  std::size_t i, j, size;
};

// difflib.SequenceMatcher with isjunk=None and autojunk=True: b2j holds, per
// line of b, where it occurs, less the "popular" lines of a long b.
class sequence_matcher {
 public:
  sequence_matcher(const std::vector<std::string>& a, const std::vector<std::string>& b)
      : a_(a), b_(b) {
    for (std::size_t j = 0; j < b.size(); ++j) b2j_[b[j]].push_back(j);
    if (b.size() >= 200) {
      std::size_t ntest = b.size() / 100 + 1;
      for (auto it = b2j_.begin(); it != b2j_.end();) {
        it = it->second.size() > ntest ? b2j_.erase(it) : std::next(it);
      }
    }
  }

  // find_longest_match: the longest equal block of a[alo:ahi] and b[blo:bhi],
  // the earliest in a, then in b, among the longest. With no junk lines the
  // extension over popular lines is difflib's "not isbjunk" pass alone.
  match find_longest_match(std::size_t alo, std::size_t ahi, std::size_t blo,
                           std::size_t bhi) const {
    std::size_t besti = alo, bestj = blo, bestsize = 0;
    std::unordered_map<std::size_t, std::size_t> j2len, newj2len;
    for (std::size_t i = alo; i < ahi; ++i) {
      newj2len.clear();
      auto found = b2j_.find(a_[i]);
      if (found != b2j_.end()) {
        for (std::size_t j : found->second) {
          if (j < blo) continue;
          if (j >= bhi) break;
          std::size_t prev = 0;
          if (j > 0) {
            auto p = j2len.find(j - 1);
            if (p != j2len.end()) prev = p->second;
          }
          std::size_t k = newj2len[j] = prev + 1;
          if (k > bestsize) {
            besti = i - k + 1;
            bestj = j - k + 1;
            bestsize = k;
          }
        }
      }
      std::swap(j2len, newj2len);
    }
    while (besti > alo && bestj > blo && a_[besti - 1] == b_[bestj - 1]) {
      --besti;
      --bestj;
      ++bestsize;
    }
    while (besti + bestsize < ahi && bestj + bestsize < bhi &&
           a_[besti + bestsize] == b_[bestj + bestsize]) {
      ++bestsize;
    }
    return {besti, bestj, bestsize};
  }

  std::vector<match> matching_blocks() const {
    std::vector<std::tuple<std::size_t, std::size_t, std::size_t, std::size_t>> queue{
        {0, a_.size(), 0, b_.size()}};
    std::vector<match> blocks;
    while (!queue.empty()) {
      auto [alo, ahi, blo, bhi] = queue.back();
      queue.pop_back();
      match m = find_longest_match(alo, ahi, blo, bhi);
      if (m.size == 0) continue;
      blocks.push_back(m);
      if (alo < m.i && blo < m.j) queue.emplace_back(alo, m.i, blo, m.j);
      if (m.i + m.size < ahi && m.j + m.size < bhi) {
        queue.emplace_back(m.i + m.size, ahi, m.j + m.size, bhi);
      }
    }
    std::sort(blocks.begin(), blocks.end(), [](const match& x, const match& y) {
      return std::tie(x.i, x.j, x.size) < std::tie(y.i, y.j, y.size);
    });
    std::vector<match> out;
    std::size_t i1 = 0, j1 = 0, k1 = 0;
    for (const match& m : blocks) {
      if (i1 + k1 == m.i && j1 + k1 == m.j) {
        k1 += m.size;
      } else {
        if (k1 != 0) out.push_back({i1, j1, k1});
        i1 = m.i;
        j1 = m.j;
        k1 = m.size;
      }
    }
    if (k1 != 0) out.push_back({i1, j1, k1});
    out.push_back({a_.size(), b_.size(), 0});
    return out;
  }

 private:
  const std::vector<std::string>& a_;
  const std::vector<std::string>& b_;
  std::unordered_map<std::string_view, std::vector<std::size_t>> b2j_;
};

// _format_range_unified.
std::string format_range(std::size_t start, std::size_t stop) {
  std::size_t beginning = start + 1, length = stop - start;
  if (length == 1) return std::to_string(beginning);
  if (length == 0) --beginning;
  return std::to_string(beginning) + "," + std::to_string(length);
}

// get_grouped_opcodes(n).
std::vector<std::vector<diff_opcode>> grouped_opcodes(std::vector<diff_opcode> codes,
                                                      std::size_t n) {
  if (codes.empty()) codes.push_back({diff_opcode::equal, 0, 1, 0, 1});
  if (codes.front().tag == diff_opcode::equal) {
    auto& c = codes.front();
    c.i1 = std::max(c.i1, c.i2 < n ? 0 : c.i2 - n);
    c.j1 = std::max(c.j1, c.j2 < n ? 0 : c.j2 - n);
  }
  if (codes.back().tag == diff_opcode::equal) {
    auto& c = codes.back();
    c.i2 = std::min(c.i2, c.i1 + n);
    c.j2 = std::min(c.j2, c.j1 + n);
  }
  std::vector<std::vector<diff_opcode>> groups;
  std::vector<diff_opcode> group;
  for (diff_opcode c : codes) {
    if (c.tag == diff_opcode::equal && c.i2 - c.i1 > 2 * n) {
      group.push_back(
          {diff_opcode::equal, c.i1, std::min(c.i2, c.i1 + n), c.j1, std::min(c.j2, c.j1 + n)});
      groups.push_back(std::move(group));
      group.clear();
      c.i1 = std::max(c.i1, c.i2 < n ? 0 : c.i2 - n);
      c.j1 = std::max(c.j1, c.j2 < n ? 0 : c.j2 - n);
    }
    group.push_back(c);
  }
  if (!group.empty() && !(group.size() == 1 && group[0].tag == diff_opcode::equal)) {
    groups.push_back(std::move(group));
  }
  return groups;
}

}  // namespace

std::vector<diff_opcode> diff_opcodes(const std::vector<std::string>& a,
                                      const std::vector<std::string>& b) {
  std::vector<diff_opcode> out;
  std::size_t i = 0, j = 0;
  for (const match& m : sequence_matcher(a, b).matching_blocks()) {
    if (i < m.i && j < m.j) {
      out.push_back({diff_opcode::replace, i, m.i, j, m.j});
    } else if (i < m.i) {
      out.push_back({diff_opcode::remove, i, m.i, j, m.j});
    } else if (j < m.j) {
      out.push_back({diff_opcode::insert, i, m.i, j, m.j});
    }
    i = m.i + m.size;
    j = m.j + m.size;
    if (m.size != 0) out.push_back({diff_opcode::equal, m.i, i, m.j, j});
  }
  return out;
}

std::vector<std::string> unified_diff(const std::vector<std::string>& a,
                                      const std::vector<std::string>& b,
                                      const diff_options& options) {
  std::vector<std::string> out;
  for (const auto& group : grouped_opcodes(diff_opcodes(a, b), options.n)) {
    if (out.empty()) {
      std::string fromdate = options.fromfiledate.empty() ? "" : "\t" + options.fromfiledate;
      std::string todate = options.tofiledate.empty() ? "" : "\t" + options.tofiledate;
      out.push_back("--- " + options.fromfile + fromdate + options.lineterm);
      out.push_back("+++ " + options.tofile + todate + options.lineterm);
    }
    out.push_back("@@ -" + format_range(group.front().i1, group.back().i2) + " +" +
                  format_range(group.front().j1, group.back().j2) + " @@" + options.lineterm);
    for (const auto& c : group) {
      if (c.tag == diff_opcode::equal) {
        for (std::size_t k = c.i1; k < c.i2; ++k) out.push_back(" " + a[k]);
        continue;
      }
      if (c.tag == diff_opcode::replace || c.tag == diff_opcode::remove) {
        for (std::size_t k = c.i1; k < c.i2; ++k) out.push_back("-" + a[k]);
      }
      if (c.tag == diff_opcode::replace || c.tag == diff_opcode::insert) {
        for (std::size_t k = c.j1; k < c.j2; ++k) out.push_back("+" + b[k]);
      }
    }
  }
  return out;
}

std::string get_diff(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  std::string out;
  for (const auto& line : unified_diff(a, b)) out += line;
  return out;
}

std::vector<std::string> read_lines(std::string_view text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t nl = text.find('\n', start);
    std::size_t end = nl == std::string_view::npos ? text.size() : nl + 1;
    lines.emplace_back(text.substr(start, end - start));
    start = end;
  }
  return lines;
}

std::vector<std::string> split_lines(std::string_view text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\n' && text[i] != '\r') continue;
    if (text[i] == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
    lines.emplace_back(text.substr(start, i + 1 - start));
    start = i + 1;
  }
  if (start < text.size()) lines.emplace_back(text.substr(start));
  return lines;
}

}  // namespace brine::modules
