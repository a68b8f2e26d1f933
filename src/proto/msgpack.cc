#include "proto/msgpack.h"

#include <cstring>

namespace brine::proto::msgpack {

void writer::big_endian(uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) out_.push_back(static_cast<uint8_t>((v >> (8 * i)) & 0xff));
}

void writer::nil() { out_.push_back(static_cast<uint8_t>(0xc0)); }

void writer::boolean(bool v) { out_.push_back(static_cast<uint8_t>(v ? 0xc3 : 0xc2)); }

void writer::integer(int64_t v) {
  if (v >= 0) return unsigned_integer(static_cast<uint64_t>(v));
  if (v >= -32) {
    out_.push_back(static_cast<uint8_t>(v));  // negative fixint
  } else if (v >= INT8_MIN) {
    out_.push_back(static_cast<uint8_t>(0xd0));
    big_endian(static_cast<uint64_t>(v), 1);
  } else if (v >= INT16_MIN) {
    out_.push_back(static_cast<uint8_t>(0xd1));
    big_endian(static_cast<uint64_t>(v), 2);
  } else if (v >= INT32_MIN) {
    out_.push_back(static_cast<uint8_t>(0xd2));
    big_endian(static_cast<uint64_t>(v), 4);
  } else {
    out_.push_back(static_cast<uint8_t>(0xd3));
    big_endian(static_cast<uint64_t>(v), 8);
  }
}

void writer::unsigned_integer(uint64_t v) {
  if (v < 0x80) {
    out_.push_back(static_cast<uint8_t>(v));  // positive fixint
  } else if (v <= UINT8_MAX) {
    out_.push_back(static_cast<uint8_t>(0xcc));
    big_endian(v, 1);
  } else if (v <= UINT16_MAX) {
    out_.push_back(static_cast<uint8_t>(0xcd));
    big_endian(v, 2);
  } else if (v <= UINT32_MAX) {
    out_.push_back(static_cast<uint8_t>(0xce));
    big_endian(v, 4);
  } else {
    out_.push_back(static_cast<uint8_t>(0xcf));
    big_endian(v, 8);
  }
}

void writer::floating(double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  out_.push_back(static_cast<uint8_t>(0xcb));
  big_endian(bits, 8);
}

void writer::string(std::string_view v) {
  if (v.size() < 32) {
    out_.push_back(static_cast<uint8_t>(0xa0 | v.size()));
  } else if (v.size() <= UINT8_MAX) {
    out_.push_back(static_cast<uint8_t>(0xd9));
    big_endian(v.size(), 1);
  } else if (v.size() <= UINT16_MAX) {
    out_.push_back(static_cast<uint8_t>(0xda));
    big_endian(v.size(), 2);
  } else {
    out_.push_back(static_cast<uint8_t>(0xdb));
    big_endian(v.size(), 4);
  }
  out_.insert(out_.end(), v.begin(), v.end());
}

void writer::array(uint32_t n) {
  if (n < 16) {
    out_.push_back(static_cast<uint8_t>(0x90 | n));
  } else if (n <= UINT16_MAX) {
    out_.push_back(static_cast<uint8_t>(0xdc));
    big_endian(n, 2);
  } else {
    out_.push_back(static_cast<uint8_t>(0xdd));
    big_endian(n, 4);
  }
}

void writer::map(uint32_t n) {
  if (n < 16) {
    out_.push_back(static_cast<uint8_t>(0x80 | n));
  } else if (n <= UINT16_MAX) {
    out_.push_back(static_cast<uint8_t>(0xde));
    big_endian(n, 2);
  } else {
    out_.push_back(static_cast<uint8_t>(0xdf));
    big_endian(n, 4);
  }
}

const uint8_t* reader::take(size_t n) {
  if (static_cast<size_t>(end_ - p_) < n) {
    throw base::error("MessagePack ends inside a value (" + std::to_string(n) + " bytes wanted, " +
                      std::to_string(end_ - p_) + " left)");
  }
  const uint8_t* at = p_;
  p_ += n;
  return at;
}

uint64_t reader::big_endian(int bytes) {
  const uint8_t* b = take(static_cast<size_t>(bytes));
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v = (v << 8) | b[i];
  return v;
}

item reader::next() {
  const uint8_t t = *take(1);
  item it;
  auto payload = [&](kind k, size_t n) {
    it.type = k;
    it.bytes = {reinterpret_cast<const char*>(take(n)), n};
  };
  auto signed_of = [&](int bytes) {
    uint64_t raw = big_endian(bytes);
    int shift = 64 - 8 * bytes;
    it.type = kind::integer;
    it.integer = static_cast<int64_t>(raw << shift) >> shift;  // sign-extended
  };
  if (t < 0x80) {
    it.type = kind::unsigned_integer;
    it.unsigned_integer = t;
  } else if (t >= 0xe0) {
    it.type = kind::integer;
    it.integer = static_cast<int8_t>(t);
  } else if ((t & 0xf0) == 0x80) {
    it.type = kind::map;
    it.count = t & 0x0f;
  } else if ((t & 0xf0) == 0x90) {
    it.type = kind::array;
    it.count = t & 0x0f;
  } else if ((t & 0xe0) == 0xa0) {
    payload(kind::string, t & 0x1f);
  } else {
    switch (t) {
      case 0xc0:
        it.type = kind::nil;
        break;
      case 0xc2:
      case 0xc3:
        it.type = kind::boolean;
        it.boolean = t == 0xc3;
        break;
      case 0xc4:
      case 0xc5:
      case 0xc6:
        payload(kind::binary, big_endian(1 << (t - 0xc4)));
        break;
      case 0xc7:
      case 0xc8:
      case 0xc9: {
        size_t n = big_endian(1 << (t - 0xc7));
        take(1);  // the ext type
        payload(kind::ext, n);
        break;
      }
      case 0xca: {
        auto bits = static_cast<uint32_t>(big_endian(4));
        float f;
        std::memcpy(&f, &bits, sizeof f);
        it.type = kind::floating;
        it.floating = f;
        break;
      }
      case 0xcb: {
        uint64_t bits = big_endian(8);
        std::memcpy(&it.floating, &bits, sizeof bits);
        it.type = kind::floating;
        break;
      }
      case 0xcc:
      case 0xcd:
      case 0xce:
      case 0xcf:
        it.type = kind::unsigned_integer;
        it.unsigned_integer = big_endian(1 << (t - 0xcc));
        break;
      case 0xd0:
      case 0xd1:
      case 0xd2:
      case 0xd3:
        signed_of(1 << (t - 0xd0));
        break;
      case 0xd4:
      case 0xd5:
      case 0xd6:
      case 0xd7:
      case 0xd8:
        take(1);  // the ext type
        payload(kind::ext, size_t{1} << (t - 0xd4));
        break;
      case 0xd9:
      case 0xda:
      case 0xdb:
        payload(kind::string, big_endian(1 << (t - 0xd9)));
        break;
      case 0xdc:
      case 0xdd:
        it.type = kind::array;
        it.count = static_cast<uint32_t>(big_endian(t == 0xdc ? 2 : 4));
        break;
      case 0xde:
      case 0xdf:
        it.type = kind::map;
        it.count = static_cast<uint32_t>(big_endian(t == 0xde ? 2 : 4));
        break;
      default:  // 0xc1: never used
        throw base::error("MessagePack byte 0xc1 is not a value");
    }
  }
  return it;
}

std::span<const uint8_t> reader::skip() {
  const uint8_t* start = p_;
  uint64_t pending = 1;  // values still to skip: no recursion, however deep
  while (pending > 0) {
    item it = next();
    --pending;
    if (it.type == kind::array) pending += it.count;
    if (it.type == kind::map) pending += uint64_t{2} * it.count;
  }
  return {start, static_cast<size_t>(p_ - start)};
}

}  // namespace brine::proto::msgpack
