#include "proto/frame.h"

#include <cstring>

namespace brine::proto {

std::optional<msg_type> to_msg_type(uint64_t raw) {
  switch (raw) {
    case 1: case 2: case 3: case 4: case 5: case 6: case 7: case 8: case 9: case 10: case 11:
    case 12: case 13: case 14: case 15: case 16: case 17: case 18: case 19: case 20:
    case 21:
    case 22:
    case 100: case 101: case 102: case 103:
      return static_cast<msg_type>(raw);
    default:
      return std::nullopt;
  }
}

std::string_view to_string(msg_type t) {
  switch (t) {
    case msg_type::error: return "error";
    case msg_type::auth: return "auth";
    case msg_type::auth_reply: return "auth_reply";
    case msg_type::publish: return "publish";
    case msg_type::job_ack: return "job_ack";
    case msg_type::job_return: return "job_return";
    case msg_type::return_ack: return "return_ack";
    case msg_type::ping: return "ping";
    case msg_type::pong: return "pong";
    case msg_type::job_refused: return "job_refused";
    case msg_type::grains: return "grains";
    case msg_type::pillar: return "pillar";
    case msg_type::pillar_request: return "pillar_request";
    case msg_type::file_request: return "file_request";
    case msg_type::file_reply: return "file_reply";
    case msg_type::peer_hello: return "peer_hello";
    case msg_type::schedule: return "schedule";
    case msg_type::schedule_periods: return "schedule_periods";
    case msg_type::run_request: return "run_request";
    case msg_type::run_reply: return "run_reply";
    case msg_type::compile_request:
      return "compile_request";
    case msg_type::compile_reply:
      return "compile_reply";
    case msg_type::reconnect: return "reconnect";
    case msg_type::api_request: return "api_request";
    case msg_type::api_reply: return "api_reply";
    case msg_type::api_event: return "api_event";
    case msg_type::api_end: return "api_end";
  }
  return "?";
}

namespace {

void put_uint(std::vector<uint8_t>& out, uint64_t v) {
  auto big_endian = [&](uint8_t tag, int bytes) {
    out.push_back(tag);
    for (int i = bytes - 1; i >= 0; --i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
  };
  if (v < 0x80) {
    out.push_back(static_cast<uint8_t>(v));  // positive fixint
  } else if (v <= 0xff) {
    big_endian(0xcc, 1);
  } else if (v <= 0xffff) {
    big_endian(0xcd, 2);
  } else if (v <= 0xffffffff) {
    big_endian(0xce, 4);
  } else {
    big_endian(0xcf, 8);
  }
}

// The frame header and the envelope up to the body's value: the map
// {"t": type, "id": id, "b": ...} written by hand, so that the body is
// encoded in place instead of being copied into an envelope first.
std::vector<uint8_t> start_frame(msg_type type, uint64_t id, size_t body_hint) {
  std::vector<uint8_t> out;
  out.reserve(k_frame_header + 20 + body_hint);
  out.resize(k_frame_header);
  out.push_back(0x83);  // fixmap, 3 entries
  out.insert(out.end(), {0xa1, 't'});
  put_uint(out, static_cast<uint64_t>(type));
  out.insert(out.end(), {0xa2, 'i', 'd'});
  put_uint(out, id);
  out.insert(out.end(), {0xa1, 'b'});
  return out;
}

void finish_frame(std::vector<uint8_t>& out) {
  size_t n = out.size() - k_frame_header;
  out[0] = static_cast<uint8_t>(n >> 24);
  out[1] = static_cast<uint8_t>(n >> 16);
  out[2] = static_cast<uint8_t>(n >> 8);
  out[3] = static_cast<uint8_t>(n);
}

}  // namespace

std::vector<uint8_t> encode_frame(const message& m) {
  std::vector<uint8_t> out = start_frame(m.type, m.id, 64);
  nlohmann::json::to_msgpack(m.body, out);
  finish_frame(out);
  return out;
}

std::vector<uint8_t> encode_frame(msg_type type, uint64_t id, std::span<const uint8_t> body) {
  std::vector<uint8_t> out = start_frame(type, id, body.size());
  out.insert(out.end(), body.begin(), body.end());
  finish_frame(out);
  return out;
}

base::errc decode_body(std::span<const uint8_t> body, message& out, std::string& detail) {
  nlohmann::json envelope = nlohmann::json::from_msgpack(body.begin(), body.end(), true, false);
  if (envelope.is_discarded()) {
    detail = "body is not valid MessagePack";
    return base::errc::frame_malformed;
  }
  if (!envelope.is_object()) {
    detail = "body is not a MessagePack map";
    return base::errc::frame_malformed;
  }
  auto t = envelope.find("t");
  auto id = envelope.find("id");
  if (t == envelope.end() || !t->is_number_unsigned() || id == envelope.end() ||
      !id->is_number_unsigned()) {
    detail = "map lacks an unsigned 't' (type) or 'id' (request id)";
    return base::errc::frame_malformed;
  }
  auto type = to_msg_type(t->get<uint64_t>());
  if (!type) {
    detail = "message type " + std::to_string(t->get<uint64_t>()) + " is not known";
    return base::errc::unknown_message;
  }
  out.type = *type;
  out.id = id->get<uint64_t>();
  auto b = envelope.find("b");
  if (b == envelope.end() || b->is_null()) {
    out.body = nlohmann::json::object();
  } else if (b->is_object()) {
    out.body = std::move(*b);
  } else {
    detail = "body 'b' is not a map";
    return base::errc::frame_malformed;
  }
  return base::errc::ok;
}

nlohmann::json ordered_bytes(const nlohmann::ordered_json& v) {
  return nlohmann::json::binary(nlohmann::ordered_json::to_msgpack(v));
}

std::optional<nlohmann::ordered_json> from_ordered_bytes(const nlohmann::json& v) {
  if (!v.is_binary()) return nlohmann::ordered_json(v);
  const auto& bytes = v.get_binary();
  auto value = nlohmann::ordered_json::from_msgpack(bytes.begin(), bytes.end(), true, false);
  if (value.is_discarded()) return std::nullopt;
  return value;
}

nlohmann::json pillar_body(const nlohmann::ordered_json& pillar, const nlohmann::json& tops) {
  nlohmann::json body = {{"pillar", ordered_bytes(pillar)}};
  if (tops.is_object() && !tops.empty()) body["tops"] = tops;
  return body;
}

nlohmann::json read_tops(const nlohmann::json& body) {
  nlohmann::json out = nlohmann::json::object();
  auto t = body.find("tops");
  if (t == body.end() || !t->is_object()) return out;
  for (const auto& [env, names] : t->items()) {
    if (!names.is_array()) continue;
    nlohmann::json kept = nlohmann::json::array();
    for (const auto& n : names) {
      if (n.is_string()) kept.push_back(n);
    }
    out[env] = std::move(kept);
  }
  return out;
}

std::optional<nlohmann::ordered_json> read_pillar(const nlohmann::json& body, std::string& detail) {
  auto p = body.find("pillar");
  if (p == body.end() || !p->is_binary()) {
    detail = "the body has no 'pillar' (MessagePack bytes of the pillar map)";
    return std::nullopt;
  }
  auto pillar = from_ordered_bytes(*p);
  if (!pillar || !pillar->is_object()) {
    detail = "its 'pillar' bytes are not a MessagePack map";
    return std::nullopt;
  }
  return pillar;
}

void frame_decoder::feed(std::span<const uint8_t> bytes) {
  if (pos_ > 0 && pos_ == buf_.size()) {
    buf_.clear();
    pos_ = 0;
  }
  buf_.insert(buf_.end(), bytes.begin(), bytes.end());
}

frame_decoder::status frame_decoder::fail(base::errc e, std::string detail) {
  error_ = e;
  detail_ = std::move(detail);
  buf_.clear();
  buf_.shrink_to_fit();
  pos_ = 0;
  return status::error;
}

frame_decoder::status frame_decoder::next(message& out) {
  if (error_ != base::errc::ok) return status::error;
  size_t avail = buf_.size() - pos_;
  if (avail < k_frame_header) return status::need_more;
  const uint8_t* p = buf_.data() + pos_;
  uint32_t len = (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
  if (len > max_) {
    return fail(base::errc::frame_too_large, "frame of " + std::to_string(len) +
                                                 " bytes exceeds max_frame_bytes " +
                                                 std::to_string(max_));
  }
  if (len == 0) return fail(base::errc::frame_malformed, "empty frame");
  if (avail < k_frame_header + len) return status::need_more;
  std::string detail;
  base::errc e = decode_body({p + k_frame_header, len}, out, detail);
  pos_ += k_frame_header + len;
  if (pos_ == buf_.size()) {
    buf_.clear();
    pos_ = 0;
    // An idle connection keeps no large buffer around after a big frame.
    if (buf_.capacity() > 64 * 1024) buf_.shrink_to_fit();
  } else if (pos_ > 64 * 1024) {
    buf_.erase(buf_.begin(), buf_.begin() + static_cast<std::ptrdiff_t>(pos_));
    pos_ = 0;
  }
  if (e != base::errc::ok) return fail(e, std::move(detail));
  return status::ready;
}

}  // namespace brine::proto
