#include "common/json_integer.h"

#include <gtest/gtest.h>

#include <sys/types.h>

#include <string>

namespace nvproxy {
namespace {

using nlohmann::json;

std::string refusal(const json& v) {
  try {
    (void)json_integer<int>(v, "n");
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::InvalidArgument);
    return e.what();
  }
  ADD_FAILURE() << "accepted " << v.dump();
  return "";
}

TEST(JsonInteger, ReadsIntegersThatFit) {
  EXPECT_EQ(json_integer<int>(json(-7), "n"), -7);
  EXPECT_EQ(json_integer<pid_t>(json(2147483647), "n"), 2147483647);
  EXPECT_EQ(json_integer<std::uint64_t>(json::parse("18446744073709551615"), "n"), 18446744073709551615ULL);
  EXPECT_EQ(json_integer<unsigned>(json(0), "n"), 0U);
}

TEST(JsonInteger, RefusesFloatsStringsAndWhatDoesNotFitNamingTheField) {
  EXPECT_NE(refusal(json::parse("1e300")).find("\"n\" is not an integer"), std::string::npos);
  EXPECT_NE(refusal(json::parse("2111111111111111111111111111111")).find("is not an integer"), std::string::npos);
  EXPECT_NE(refusal(json(2.5)).find("is not an integer"), std::string::npos);
  EXPECT_NE(refusal(json("3")).find("is not an integer"), std::string::npos);
  EXPECT_NE(refusal(json(4294967296LL)).find("\"n\" is out of range"), std::string::npos);
  EXPECT_NE(refusal(json::parse("18446744073709551615")).find("is out of range"), std::string::npos);
  EXPECT_THROW((void)json_integer<unsigned>(json(-1), "n"), Error);
}

TEST(JsonInteger, AbsentIsTheFallback) {
  json o{{"a", 3}};
  EXPECT_EQ(json_integer_or(o, "a", 0), 3);
  EXPECT_EQ(json_integer_or(o, "b", 9), 9);
  EXPECT_THROW((void)json_integer_or(json{{"a", "x"}}, "a", 0), Error);
}

}  // namespace
}  // namespace nvproxy
