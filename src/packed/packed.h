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
  value find(std::string_view key) const;
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

}  // namespace brine::packed
