#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"

// MessagePack written and read value by value, without a tree: for answers
// of tens of thousands of values (the inventory's rows), where building an
// nlohmann::json per value costs more than the values. Frames themselves are
// decoded by frame.h into trees.
namespace brine::proto::msgpack {

// Appends values to `out` in the smallest encoding each takes.
class writer {
 public:
  explicit writer(std::vector<uint8_t>& out) : out_(out) {}
  void nil();
  void boolean(bool v);
  void integer(int64_t v);
  void unsigned_integer(uint64_t v);
  void floating(double v);
  void string(std::string_view v);
  // The header of an array of `n` values (written next), or of a map of `n`
  // key-value pairs.
  void array(uint32_t n);
  void map(uint32_t n);

 private:
  void big_endian(uint64_t v, int bytes);
  std::vector<uint8_t>& out_;
};

// A value's kind as read; ext types are skipped as opaque.
enum class kind {
  nil,
  boolean,
  integer,
  unsigned_integer,
  floating,
  string,
  binary,
  array,
  map,
  ext
};

struct item {
  kind type = kind::nil;
  bool boolean = false;
  int64_t integer = 0;
  uint64_t unsigned_integer = 0;
  double floating = 0;
  std::string_view bytes;  // string, binary, ext: the payload
  uint32_t count = 0;      // array: elements; map: pairs (they follow)
};

// Reads values one at a time from bytes that outlive it. Throws base::error
// on truncated or malformed input: the bytes came over a socket.
class reader {
 public:
  explicit reader(std::span<const uint8_t> bytes) : p_(bytes.data()), end_(p_ + bytes.size()) {}
  // The next value's header (an array's or map's elements are read next).
  item next();
  // Skips the next value with everything inside it; returns its bytes.
  std::span<const uint8_t> skip();
  bool done() const { return p_ == end_; }

 private:
  const uint8_t* take(size_t n);
  uint64_t big_endian(int bytes);
  const uint8_t* p_;
  const uint8_t* end_;
};

}  // namespace brine::proto::msgpack
