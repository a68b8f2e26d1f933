#include "proto/frame.h"

#include <gtest/gtest.h>

namespace brine::proto {
namespace {

message sample() {
  message m;
  m.type = msg_type::publish;
  m.id = 42;
  m.body = {{"jid", "20261121180000123456"}, {"fun", "test.ping"}, {"args", {1, "two"}}};
  return m;
}

TEST(frame, round_trip) {
  auto bytes = encode_frame(sample());
  frame_decoder d(1 << 20);
  d.feed(bytes);
  message out;
  ASSERT_EQ(d.next(out), frame_decoder::status::ready);
  EXPECT_EQ(out.type, msg_type::publish);
  EXPECT_EQ(out.id, 42u);
  EXPECT_EQ(out.body, sample().body);
  EXPECT_EQ(d.next(out), frame_decoder::status::need_more);
}

// The envelope is written by hand; every width of MessagePack unsigned
// integer must come back as the same id, and the map must be the one a
// generic MessagePack reader sees.
TEST(frame, envelope_ids_of_every_width_round_trip) {
  for (uint64_t id : {uint64_t{0}, uint64_t{127}, uint64_t{128}, uint64_t{255}, uint64_t{256},
                      uint64_t{65535}, uint64_t{65536}, uint64_t{0xffffffff},
                      uint64_t{0x100000000}, ~uint64_t{0}}) {
    SCOPED_TRACE(id);
    message m = sample();
    m.id = id;
    auto bytes = encode_frame(m);
    auto envelope = nlohmann::json::from_msgpack(bytes.begin() + 4, bytes.end());
    EXPECT_EQ(envelope, (nlohmann::json{{"t", 4}, {"id", id}, {"b", sample().body}}));
    message out;
    std::string detail;
    ASSERT_EQ(decode_body({bytes.data() + 4, bytes.size() - 4}, out, detail), base::errc::ok)
        << detail;
    EXPECT_EQ(out.id, id);
    EXPECT_EQ(out.body, sample().body);
  }
}

TEST(frame, pre_encoded_body_gives_the_same_frame) {
  message m = sample();
  std::vector<uint8_t> body = nlohmann::json::to_msgpack(m.body);
  EXPECT_EQ(encode_frame(m.type, m.id, body), encode_frame(m));
}

// The pillar travels as MessagePack bytes so that its keys keep their
// order (a body map decodes sorted).
TEST(frame, pillar_body_keeps_key_order_through_a_frame) {
  auto pillar = nlohmann::ordered_json::parse(R"({"zeta": {"b": 1, "a": [2, {"y": 0, "x": 1}]}, "alpha": null})");
  auto bytes = encode_frame({msg_type::pillar, 0, pillar_body(pillar)});
  frame_decoder d(1 << 20);
  d.feed(bytes);
  message out;
  ASSERT_EQ(d.next(out), frame_decoder::status::ready);
  std::string why;
  auto back = read_pillar(out.body, why);
  ASSERT_TRUE(back) << why;
  EXPECT_EQ(back->dump(), pillar.dump());
}

TEST(frame, pillar_body_without_pillar_bytes_says_why) {
  std::string why;
  EXPECT_FALSE(read_pillar({{"pillar", {{"a", 1}}}}, why));
  EXPECT_NE(why.find("MessagePack bytes"), std::string::npos) << why;
  why.clear();
  EXPECT_FALSE(read_pillar({{"pillar", nlohmann::json::binary({0x93, 1, 2, 3})}}, why));
  EXPECT_NE(why.find("not a MessagePack map"), std::string::npos) << why;
  why.clear();
  EXPECT_FALSE(read_pillar({{"pillar", nlohmann::json::binary({0xc1})}}, why));
  EXPECT_NE(why.find("not a MessagePack map"), std::string::npos) << why;
}

TEST(frame, header_is_big_endian_length) {
  auto bytes = encode_frame(sample());
  uint32_t len = (uint32_t{bytes[0]} << 24) | (uint32_t{bytes[1]} << 16) |
                 (uint32_t{bytes[2]} << 8) | bytes[3];
  EXPECT_EQ(len, bytes.size() - 4);
}

TEST(frame, byte_at_a_time_and_many_per_feed) {
  auto one = encode_frame(sample());
  std::vector<uint8_t> three;
  for (int i = 0; i < 3; ++i) three.insert(three.end(), one.begin(), one.end());
  frame_decoder d(1 << 20);
  message out;
  int got = 0;
  for (uint8_t b : three) {
    d.feed({&b, 1});
    while (d.next(out) == frame_decoder::status::ready) ++got;
  }
  EXPECT_EQ(got, 3);
  EXPECT_EQ(d.buffered(), 0u);
}

TEST(frame, too_large_is_refused_from_header_alone) {
  frame_decoder d(1024);
  uint8_t header[4] = {0x7f, 0xff, 0xff, 0xff};
  d.feed(header);
  message out;
  EXPECT_EQ(d.next(out), frame_decoder::status::error);
  EXPECT_EQ(d.error(), base::errc::frame_too_large);
  EXPECT_NE(d.error_detail().find("max_frame_bytes 1024"), std::string::npos);
  EXPECT_EQ(d.buffered(), 0u);
}

TEST(frame, garbage_body_is_malformed) {
  frame_decoder d(1024);
  std::vector<uint8_t> bytes = {0, 0, 0, 3, 0xc1, 0xc1, 0xc1};
  d.feed(bytes);
  message out;
  EXPECT_EQ(d.next(out), frame_decoder::status::error);
  EXPECT_EQ(d.error(), base::errc::frame_malformed);
}

TEST(frame, non_map_body_is_malformed) {
  std::vector<uint8_t> body;
  nlohmann::json::to_msgpack(nlohmann::json::array({1, 2}), body);
  message out;
  std::string detail;
  EXPECT_EQ(decode_body(body, out, detail), base::errc::frame_malformed);
}

TEST(frame, missing_type_is_malformed) {
  std::vector<uint8_t> body;
  nlohmann::json::to_msgpack(nlohmann::json{{"id", 1}}, body);
  message out;
  std::string detail;
  EXPECT_EQ(decode_body(body, out, detail), base::errc::frame_malformed);
}

TEST(frame, unknown_type_is_reported) {
  std::vector<uint8_t> body;
  nlohmann::json::to_msgpack(nlohmann::json{{"t", 9999}, {"id", 1}}, body);
  message out;
  std::string detail;
  EXPECT_EQ(decode_body(body, out, detail), base::errc::unknown_message);
  EXPECT_NE(detail.find("9999"), std::string::npos);
}

TEST(frame, empty_frame_is_malformed) {
  frame_decoder d(1024);
  uint8_t header[4] = {0, 0, 0, 0};
  d.feed(header);
  message out;
  EXPECT_EQ(d.next(out), frame_decoder::status::error);
  EXPECT_EQ(d.error(), base::errc::frame_malformed);
}

TEST(frame, body_must_be_a_map_when_present) {
  std::vector<uint8_t> body;
  nlohmann::json::to_msgpack(nlohmann::json{{"t", 8}, {"id", 0}, {"b", "x"}}, body);
  message out;
  std::string detail;
  EXPECT_EQ(decode_body(body, out, detail), base::errc::frame_malformed);
}

}  // namespace
}  // namespace brine::proto
