#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <string_view>

// Packed documents: JSON data (a minion's grains, its pillar) laid out in one
// contiguous block, immutable, read in place. The master keeps one per
// minion for targeting: 100k minions' grains as nlohmann trees are 100k
// scattered std::maps of about 30 KiB each; packed they are about 4 KiB each
// in one allocation, and looking a grain up touches a few cache lines.
namespace brine::packed {

namespace detail {

// The layout (see packed.cc): one tag byte a value.
enum tag : uint8_t {
  t_null,
  t_false,
  t_true,
  t_int,
  t_uint,
  t_float,
  t_short_string,
  t_long_string,
  t_array,
  t_object
};
constexpr size_t k_header = 9;  // tag, count, body size of a container
constexpr uint8_t k_long_key = 255;

inline uint32_t read_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// A key at p: its text, and where the value after it starts.
inline std::string_view read_key(const uint8_t* p, const uint8_t** value) {
  size_t n = p[0];
  const uint8_t* text = p + 1;
  if (n == k_long_key) {
    n = read_u32(p + 1);
    text = p + 5;
  }
  *value = text + n;
  return {reinterpret_cast<const char*>(text), n};
}

}  // namespace detail

enum class kind : uint8_t {
  null,
  boolean,
  integer,           // int64
  unsigned_integer,  // uint64 (nlohmann keeps positive numbers from a parser so)
  floating,
  string,
  array,
  object
};

// A view of one value inside a document; valid while the document lives. A
// default-constructed value is "absent" (false in a boolean context), which
// is what find() and the like return for nothing.
// The hash find() searches by (32-bit FNV-1a).
inline uint32_t key_hash(std::string_view k) {
  uint32_t h = 2166136261u;
  for (char c : k) {
    h ^= static_cast<uint8_t>(c);
    h *= 16777619u;
  }
  return h;
}

class value {
 public:
  value() = default;

  explicit operator bool() const { return p_ != nullptr; }
  kind type() const;
  bool is_null() const { return type() == kind::null; }
  bool is_boolean() const { return type() == kind::boolean; }
  bool is_number() const;
  bool is_string() const { return type() == kind::string; }
  bool is_array() const { return type() == kind::array; }
  bool is_object() const { return type() == kind::object; }

  bool boolean() const;
  int64_t integer() const;
  uint64_t unsigned_integer() const;
  double floating() const;
  std::string_view string() const;

  // Elements of an array, entries of an object; 0 for anything else.
  size_t size() const;
  bool empty() const { return size() == 0; }
  // The entry of an object under `key` (a search of its key hashes), or absent.
  value find(std::string_view key) const { return find(key, key_hash(key)); }
  // The same with key_hash(key) computed once by the caller (a matcher
  // looks the same key up in thousands of documents).
  value find(std::string_view key, uint32_t hash) const;
  bool contains(std::string_view key) const { return static_cast<bool>(find(key)); }
  // The i-th element of an array (a walk: arrays are short), or absent.
  value at(size_t i) const;

  // Elements of an array, or the values of an object's entries (with their
  // keys), in order (object keys sorted bytewise, as nlohmann::json keeps them).
  class iterator {
   public:
    iterator(const uint8_t* p, bool keyed) : p_(p), keyed_(keyed) {}
    std::string_view key() const;
    value operator*() const;
    iterator& operator++();
    bool operator!=(const iterator& o) const { return p_ != o.p_; }
    bool operator==(const iterator& o) const { return p_ == o.p_; }

   private:
    const uint8_t* value_start() const;
    const uint8_t* p_;
    bool keyed_;
  };
  // Empty ranges for anything but an array or an object.
  iterator begin() const;
  iterator end() const;

  nlohmann::json to_json() const;

  // Bytes the value takes, its contents included.
  size_t bytes() const;

 private:
  friend class document;
  friend class iterator;
  explicit value(const uint8_t* p) : p_(p) {}
  const uint8_t* p_ = nullptr;
};

// An immutable packed document. Copies share the block (a reader may keep
// one while the cache replaces it). A default-constructed document is empty:
// its root() is absent.
class document {
 public:
  document() = default;
  explicit document(const nlohmann::json& data);

  value root() const { return value(bytes_.get()); }
  explicit operator bool() const { return bytes_ != nullptr; }
  size_t bytes() const { return size_; }
  nlohmann::json to_json() const { return root() ? root().to_json() : nlohmann::json(); }

 private:
  std::shared_ptr<const uint8_t[]> bytes_;
  size_t size_ = 0;
};

// Inline: targeting reads millions of values a second.

inline kind value::type() const {
  switch (p_[0]) {
    case detail::t_null:
      return kind::null;
    case detail::t_false:
    case detail::t_true:
      return kind::boolean;
    case detail::t_int:
      return kind::integer;
    case detail::t_uint:
      return kind::unsigned_integer;
    case detail::t_float:
      return kind::floating;
    case detail::t_short_string:
    case detail::t_long_string:
      return kind::string;
    case detail::t_array:
      return kind::array;
    default:
      return kind::object;
  }
}

inline bool value::is_number() const {
  return p_[0] == detail::t_int || p_[0] == detail::t_uint || p_[0] == detail::t_float;
}
inline bool value::boolean() const { return p_[0] == detail::t_true; }
inline int64_t value::integer() const {
  int64_t v;
  std::memcpy(&v, p_ + 1, sizeof v);
  return v;
}
inline uint64_t value::unsigned_integer() const {
  uint64_t v;
  std::memcpy(&v, p_ + 1, sizeof v);
  return v;
}
inline double value::floating() const {
  double v;
  std::memcpy(&v, p_ + 1, sizeof v);
  return v;
}

inline std::string_view value::string() const {
  if (p_[0] == detail::t_short_string) return {reinterpret_cast<const char*>(p_ + 2), p_[1]};
  if (p_[0] == detail::t_long_string) {
    return {reinterpret_cast<const char*>(p_ + 5), detail::read_u32(p_ + 1)};
  }
  return {};
}

inline size_t value::size() const {
  return p_[0] == detail::t_array || p_[0] == detail::t_object ? detail::read_u32(p_ + 1) : 0;
}

inline size_t value::bytes() const {
  switch (p_[0]) {
    case detail::t_null:
    case detail::t_false:
    case detail::t_true:
      return 1;
    case detail::t_int:
    case detail::t_uint:
    case detail::t_float:
      return 9;
    case detail::t_short_string:
      return 2 + p_[1];
    case detail::t_long_string:
      return 5 + detail::read_u32(p_ + 1);
    default:
      return detail::k_header + detail::read_u32(p_ + 5);
  }
}

inline value::iterator value::begin() const {
  if (p_ && p_[0] == detail::t_array) return {p_ + detail::k_header, false};
  if (p_ && p_[0] == detail::t_object) {
    return {p_ + detail::k_header + 8 * size_t{detail::read_u32(p_ + 1)}, true};
  }
  return end();
}

inline value::iterator value::end() const {
  if (p_ && (p_[0] == detail::t_array || p_[0] == detail::t_object)) {
    return {p_ + detail::k_header + detail::read_u32(p_ + 5), false};
  }
  return {nullptr, false};
}

inline const uint8_t* value::iterator::value_start() const {
  if (!keyed_) return p_;
  const uint8_t* v;
  detail::read_key(p_, &v);
  return v;
}

inline std::string_view value::iterator::key() const {
  if (!keyed_) return {};
  const uint8_t* v;
  return detail::read_key(p_, &v);
}

inline value value::iterator::operator*() const { return value(value_start()); }

inline value::iterator& value::iterator::operator++() {
  const uint8_t* v = value_start();
  p_ = v + value(v).bytes();
  return *this;
}

}  // namespace brine::packed
