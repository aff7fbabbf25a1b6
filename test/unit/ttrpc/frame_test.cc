#include "common/ttrpc/frame.h"

#include <gtest/gtest.h>

#include "common/error.h"

namespace nvproxy::ttrpc {
namespace {

std::vector<FrameParser::Event> feed_all(FrameParser& p, std::string_view data, std::size_t chunk) {
  std::vector<FrameParser::Event> out;
  for (std::size_t i = 0; i < data.size(); i += chunk) p.feed(data.substr(i, chunk), out);
  return out;
}

TEST(Frame, HeaderIsBigEndian) {
  auto b = encode_header({.length = 0x01020304, .stream_id = 0x0a0b0c0d, .type = 2, .flags = 7});
  const std::array<std::uint8_t, kHeaderSize> want{1, 2, 3, 4, 0x0a, 0x0b, 0x0c, 0x0d, 2, 7};
  EXPECT_EQ(b, want);
  auto h = decode_header(b.data());
  EXPECT_EQ(h.length, 0x01020304u);
  EXPECT_EQ(h.stream_id, 0x0a0b0c0du);
  EXPECT_EQ(h.type, 2);
  EXPECT_EQ(h.flags, 7);
}

TEST(Frame, RoundTripAnyChunking) {
  std::string wire = encode_frame(1, FrameType::Request, "hello") + encode_frame(3, FrameType::Response, "") +
                     encode_frame(5, FrameType::Data, std::string(70000, 'x'), 0x2);
  for (std::size_t chunk : {std::size_t{1}, std::size_t{3}, std::size_t{10}, std::size_t{4096}, wire.size()}) {
    FrameParser p;
    auto ev = feed_all(p, wire, chunk);
    ASSERT_EQ(ev.size(), 3u) << "chunk " << chunk;
    EXPECT_TRUE(p.idle());
    EXPECT_EQ(ev[0].kind, FrameParser::Event::Kind::Frame);
    EXPECT_EQ(ev[0].header.stream_id, 1u);
    EXPECT_EQ(ev[0].header.type, 1);
    EXPECT_EQ(ev[0].payload, "hello");
    EXPECT_EQ(ev[1].header.stream_id, 3u);
    EXPECT_EQ(ev[1].payload, "");
    EXPECT_EQ(ev[2].header.type, 3);
    EXPECT_EQ(ev[2].header.flags, 2);
    EXPECT_EQ(ev[2].payload, std::string(70000, 'x'));
  }
}

TEST(Frame, TruncatedHeaderIsNotIdle) {
  FrameParser p;
  std::vector<FrameParser::Event> ev;
  EXPECT_TRUE(p.idle());
  p.feed(encode_frame(1, FrameType::Request, "abc").substr(0, 6), ev);
  EXPECT_TRUE(ev.empty());
  EXPECT_FALSE(p.idle());
}

TEST(Frame, TruncatedPayloadIsNotIdle) {
  FrameParser p;
  std::vector<FrameParser::Event> ev;
  std::string f = encode_frame(1, FrameType::Request, std::string(100, 'a'));
  p.feed(f.substr(0, kHeaderSize + 50), ev);
  EXPECT_TRUE(ev.empty());
  EXPECT_FALSE(p.idle());
  p.feed(f.substr(kHeaderSize + 50), ev);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_TRUE(p.idle());
}

TEST(Frame, OversizedIsDiscardedWithoutBuffering) {
  FrameParser p;
  std::vector<FrameParser::Event> ev;
  const std::uint32_t len = kMaxMessageSize + 1;
  auto h = encode_header({.length = len, .stream_id = 7, .type = 1});
  p.feed({reinterpret_cast<const char*>(h.data()), h.size()}, ev);
  EXPECT_LT(p.buffered(), 64u);  // at most the empty string's inline buffer
  std::string chunk(64 * 1024, 'z');
  std::uint32_t left = len;
  while (left > 0) {
    std::uint32_t n = std::min<std::uint32_t>(left, chunk.size());
    p.feed({chunk.data(), n}, ev);
    left -= n;
    EXPECT_LT(p.buffered(), 64u);  // at most the empty string's inline buffer
    if (left > 0) {
      EXPECT_TRUE(ev.empty());
    }
  }
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, FrameParser::Event::Kind::Oversized);
  EXPECT_EQ(ev[0].header.stream_id, 7u);
  EXPECT_EQ(ev[0].header.length, len);
  EXPECT_TRUE(ev[0].payload.empty());
  // The stream stays in sync: the next frame parses.
  p.feed(encode_frame(9, FrameType::Request, "ok"), ev);
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[1].payload, "ok");
}

TEST(Frame, HugeLengthDoesNotAllocate) {
  FrameParser p;
  std::vector<FrameParser::Event> ev;
  auto h = encode_header({.length = 0xffffffffu, .stream_id = 1, .type = 1});
  p.feed({reinterpret_cast<const char*>(h.data()), h.size()}, ev);
  p.feed(std::string(1000, 'a'), ev);
  EXPECT_LT(p.buffered(), 64u);  // at most the empty string's inline buffer
  EXPECT_TRUE(ev.empty());
  EXPECT_FALSE(p.idle());
}

TEST(Frame, ALargeAnnouncedFrameReservesOnlyWhatArrives) {
  // reliability F9: a header alone announcing just under 4 MiB must not reserve 4 MiB.
  FrameParser p;
  std::vector<FrameParser::Event> ev;
  std::string payload(kMaxMessageSize - 1, 'x');
  std::string frame = encode_frame(3, FrameType::Request, payload);
  p.feed(std::string_view(frame).substr(0, kHeaderSize), ev);
  EXPECT_LE(p.buffered(), kInitialPayloadReserve);
  p.feed(std::string_view(frame).substr(kHeaderSize, 100), ev);
  EXPECT_LE(p.buffered(), kInitialPayloadReserve);
  p.feed(std::string_view(frame).substr(kHeaderSize + 100), ev);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].payload, payload) << "the payload still arrives whole";
}

TEST(Frame, ExactlyMaxIsAccepted) {
  FrameParser p;
  std::vector<FrameParser::Event> ev;
  p.feed(encode_frame(1, FrameType::Request, std::string(kMaxMessageSize, 'm')), ev);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, FrameParser::Event::Kind::Frame);
  EXPECT_EQ(ev[0].payload.size(), kMaxMessageSize);
}

TEST(Frame, UnknownTypePassesThroughRaw) {
  FrameParser p;
  std::vector<FrameParser::Event> ev;
  auto h = encode_header({.length = 2, .stream_id = 1, .type = 0x42, .flags = 0xff});
  std::string wire(reinterpret_cast<const char*>(h.data()), h.size());
  wire += "hi";
  p.feed(wire, ev);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].header.type, 0x42);
  EXPECT_EQ(ev[0].header.flags, 0xff);
  EXPECT_EQ(ev[0].payload, "hi");
}

TEST(Frame, EncodeRefusesOversizedPayload) {
  try {
    encode_frame(1, FrameType::Request, std::string(kMaxMessageSize + 1, 'a'));
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::ResourceExhausted);
    EXPECT_NE(std::string(e.what()).find("stream 1"), std::string::npos);
  }
}

TEST(Frame, SmallMaxSizeOption) {
  FrameParser p(4);
  std::vector<FrameParser::Event> ev;
  p.feed(encode_frame(1, FrameType::Request, "12345") + encode_frame(3, FrameType::Request, "1234"), ev);
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].kind, FrameParser::Event::Kind::Oversized);
  EXPECT_EQ(ev[1].kind, FrameParser::Event::Kind::Frame);
  EXPECT_EQ(ev[1].payload, "1234");
}

}  // namespace
}  // namespace nvproxy::ttrpc
