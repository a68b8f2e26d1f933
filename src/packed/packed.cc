#include "packed/packed.h"

#include <algorithm>
#include <stdexcept>
#include <utility>
#include <vector>

// The layout, one tag byte a value, numbers in host byte order (a document
// never leaves the process that packed it):
//   null, false, true          tag
//   integer, unsigned, float   tag, 8 bytes
//   short string (< 255 bytes) tag, 1-byte length, bytes
//   long string                tag, 4-byte length, bytes
//   array                      tag, 4-byte count, 4-byte body size, elements
//   object                     tag, 4-byte count, 4-byte body size, then the
//                              body: a lookup table, then the entries in key
//                              order, each a key (1-byte length, or 255 and a
//                              4-byte length; bytes) and a value.
// The lookup table holds, for each entry, the 4-byte FNV-1a hash of its key
// and its 4-byte offset from the body's start, sorted by hash: find() reads
// a few neighbouring cache lines of it and then one entry, where a binary
// search over the keys themselves would touch a line a probe (the master
// looks up one grain in each of 100k documents: memory latency is the cost).
namespace brine::packed {

using namespace detail;

namespace {

size_t string_size(size_t n) { return n < 255 ? 2 + n : 5 + n; }
size_t key_size(size_t n) { return n < k_long_key ? 1 + n : 5 + n; }


size_t packed_size(const nlohmann::json& j) {
  using vt = nlohmann::json::value_t;
  switch (j.type()) {
    case vt::null:
    case vt::discarded:
    case vt::boolean:
      return 1;
    case vt::number_integer:
    case vt::number_unsigned:
    case vt::number_float:
      return 9;
    case vt::string:
      return string_size(j.get_ref<const std::string&>().size());
    case vt::binary:
      return string_size(j.get_binary().size());
    case vt::array: {
      size_t n = k_header;
      for (const auto& e : j) n += packed_size(e);
      return n;
    }
    case vt::object: {
      size_t n = k_header + 8 * j.size();
      for (const auto& [k, v] : j.items()) n += key_size(k.size()) + packed_size(v);
      return n;
    }
  }
  return 1;
}

class writer {
 public:
  explicit writer(uint8_t* out) : p_(out) {}

  void put(const nlohmann::json& j) {
    using vt = nlohmann::json::value_t;
    switch (j.type()) {
      case vt::null:
      case vt::discarded:
        byte(t_null);
        return;
      case vt::boolean:
        byte(j.get<bool>() ? t_true : t_false);
        return;
      case vt::number_integer:
        byte(t_int);
        raw(j.get<int64_t>());
        return;
      case vt::number_unsigned:
        byte(t_uint);
        raw(j.get<uint64_t>());
        return;
      case vt::number_float:
        byte(t_float);
        raw(j.get<double>());
        return;
      case vt::string:
        string(j.get_ref<const std::string&>());
        return;
      case vt::binary: {
        const auto& b = j.get_binary();
        string(std::string_view(reinterpret_cast<const char*>(b.data()), b.size()));
        return;
      }
      case vt::array: {
        uint8_t* start = p_;
        header(t_array, j.size());
        for (const auto& e : j) put(e);
        body_size(start);
        return;
      }
      case vt::object: {
        uint8_t* start = p_;
        header(t_object, j.size());
        uint8_t* table = p_;
        p_ += 8 * j.size();
        std::vector<std::pair<uint32_t, uint32_t>> lookup;
        lookup.reserve(j.size());
        // nlohmann::json keeps object keys sorted (a std::map): iteration
        // gives them in that order.
        for (const auto& [k, v] : j.items()) {
          lookup.emplace_back(key_hash(k), static_cast<uint32_t>(p_ - (start + k_header)));
          key(k);
          put(v);
        }
        std::sort(lookup.begin(), lookup.end());
        for (const auto& [hash, offset] : lookup) {
          std::memcpy(table, &hash, 4);
          std::memcpy(table + 4, &offset, 4);
          table += 8;
        }
        body_size(start);
        return;
      }
    }
  }

  uint8_t* end() const { return p_; }

 private:
  void byte(uint8_t b) { *p_++ = b; }
  template <class T>
  void raw(T v) {
    std::memcpy(p_, &v, sizeof v);
    p_ += sizeof v;
  }
  void string(std::string_view s) {
    if (s.size() < 255) {
      byte(t_short_string);
      byte(static_cast<uint8_t>(s.size()));
    } else {
      byte(t_long_string);
      raw(static_cast<uint32_t>(s.size()));
    }
    std::memcpy(p_, s.data(), s.size());
    p_ += s.size();
  }
  void key(std::string_view k) {
    if (k.size() < k_long_key) {
      byte(static_cast<uint8_t>(k.size()));
    } else {
      byte(k_long_key);
      raw(static_cast<uint32_t>(k.size()));
    }
    std::memcpy(p_, k.data(), k.size());
    p_ += k.size();
  }
  void header(uint8_t t, size_t count) {
    byte(t);
    raw(static_cast<uint32_t>(count));
    raw(uint32_t{0});  // the body size, once known
  }
  void body_size(uint8_t* start) {
    auto n = static_cast<uint32_t>(p_ - (start + k_header));
    std::memcpy(start + 5, &n, 4);
  }

  uint8_t* p_;
};

}  // namespace

// --- document

document::document(const nlohmann::json& data) {
  size_t n = packed_size(data);
  if (n > UINT32_MAX) throw std::length_error("packed document above 4 GiB");
  auto block = std::make_shared_for_overwrite<uint8_t[]>(n);
  writer w(block.get());
  w.put(data);
  size_ = static_cast<size_t>(w.end() - block.get());
  bytes_ = std::move(block);
}

// --- value



value value::find(std::string_view key, uint32_t h) const {
  if (!p_ || p_[0] != t_object) return {};
  const uint8_t* body = p_ + k_header;
  const size_t n = read_u32(p_ + 1);
  size_t lo = 0, hi = n;
  while (lo < hi) {  // the first record of hash h
    size_t mid = (lo + hi) / 2;
    if (read_u32(body + 8 * mid) < h) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  for (; lo < n && read_u32(body + 8 * lo) == h; ++lo) {
    const uint8_t* v;
    if (read_key(body + read_u32(body + 8 * lo + 4), &v) == key) return value(v);
  }
  return {};
}

value value::at(size_t i) const {
  if (!p_ || p_[0] != t_array || i >= size()) return {};
  const uint8_t* e = p_ + k_header;
  while (i-- > 0) e += value(e).bytes();
  return value(e);
}

nlohmann::json value::to_json() const {
  if (!p_) return nullptr;
  switch (p_[0]) {
    case t_null:
      return nullptr;
    case t_false:
      return false;
    case t_true:
      return true;
    case t_int:
      return integer();
    case t_uint:
      return unsigned_integer();
    case t_float:
      return floating();
    case t_short_string:
    case t_long_string:
      return std::string(string());
    case t_array: {
      auto out = nlohmann::json::array();
      for (auto e : *this) out.push_back(e.to_json());
      return out;
    }
    default: {
      auto out = nlohmann::json::object();
      for (auto it = begin(); it != end(); ++it) out.emplace(std::string(it.key()), (*it).to_json());
      return out;
    }
  }
}

}  // namespace brine::packed
