// What leaves the shim is valid UTF-8 and quotes values short; numbers are read by one checked helper.
#include "common/text.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <new>
#include <stdexcept>
#include <system_error>

#include "common/error.h"
#include "common/number.h"

using namespace nvproxy;

TEST(Utf8, ValidTextIsKeptAndInvalidBytesAreEscaped) {
  EXPECT_TRUE(is_valid_utf8("plain ascii"));
  EXPECT_TRUE(is_valid_utf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));
  EXPECT_EQ(valid_utf8("caf\xc3\xa9"), "caf\xc3\xa9");
  EXPECT_FALSE(is_valid_utf8("caf\xe9"));  // Latin-1
  EXPECT_EQ(valid_utf8("caf\xe9!"), "caf\\xe9!");
  EXPECT_EQ(valid_utf8("\xc0\xaf"), "\\xc0\\xaf");                    // overlong
  EXPECT_EQ(valid_utf8("\xed\xa0\x80"), "\\xed\\xa0\\x80");           // a surrogate
  EXPECT_EQ(valid_utf8("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");  // above U+10FFFF
  EXPECT_EQ(valid_utf8("ab\xe2\x82"), "ab\\xe2\\x82");                // cut short at the end
  EXPECT_TRUE(is_valid_utf8(valid_utf8(std::string("\xff\xfe\x80 x \xc3", 7))));
}

TEST(Utf8, ALargeInvalidInputIsEscapedWhole) {
  // One pass over the bytes; how fast is bench/request_parse's question, not a unit test's.
  const std::string big(4 << 20, '\xe9');
  const std::string out = valid_utf8(big);
  EXPECT_EQ(out.size(), big.size() * 4);
  EXPECT_TRUE(is_valid_utf8(out));
}

TEST(QuoteValue, ShortValuesWholeLongOnesCutWithTheirLength) {
  EXPECT_EQ(quote_value("abc"), "\"abc\"");
  const std::string big(65536, 'x');
  const std::string q = quote_value(big);
  EXPECT_EQ(q, "\"" + std::string(kQuotedPrefix, 'x') + "...\" (65536 bytes)");
  // A cut never splits a UTF-8 sequence: 63 x's then a 2-byte character across the cut.
  std::string mixed(63, 'x');
  mixed += "\xc3\xa9";
  mixed += std::string(100, 'y');
  const std::string m = quote_value(mixed);
  EXPECT_TRUE(is_valid_utf8(m)) << m;
  EXPECT_EQ(m, "\"" + std::string(63, 'x') + "...\" (165 bytes)");
  EXPECT_EQ(quote_value("a\xff"), "\"a\\xff\"");
}

TEST(CheckBound, NamesTheFieldTheSizeAndTheBound) {
  EXPECT_NO_THROW(check_bound("f", 10, 10));
  try {
    check_bound("env NVIDIA_VISIBLE_DEVICES", 1048576, 65536);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::InvalidArgument);
    EXPECT_STREQ(e.what(), "env NVIDIA_VISIBLE_DEVICES: 1048576 bytes exceeds the bound of 65536");
  }
}

TEST(ParseNumber, AllOfTheTextInRangeOrNothing) {
  EXPECT_EQ(parse_number<unsigned>("42"), 42u);
  EXPECT_EQ(parse_number<unsigned>("ff", 16), 255u);
  EXPECT_EQ(parse_number<int>("-3"), -3);
  EXPECT_FALSE(parse_number<unsigned>(""));
  EXPECT_FALSE(parse_number<unsigned>("-1"));
  EXPECT_FALSE(parse_number<unsigned>(" 1"));
  EXPECT_FALSE(parse_number<unsigned>("1\n"));
  EXPECT_FALSE(parse_number<unsigned>("12x"));
  EXPECT_FALSE(parse_number<std::uint64_t>("123456789012345678901234567890"));  // 30 digits
  EXPECT_EQ(parse_leading_number<int>("3-abc"), 3);
  EXPECT_FALSE(parse_leading_number<int>("x3"));
}

TEST(ParseNumber, OrThrowSaysWhichInputAndWhy) {
  try {
    parse_number_or_throw<std::size_t>("123456789012345678901234567890", "GPU index");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::InvalidArgument);
    EXPECT_STREQ(e.what(), "GPU index: \"123456789012345678901234567890\" is out of range");
  }
  try {
    parse_number_or_throw<int>("12\xff", "pid");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "pid: \"12\\xff\" is not a number");
  }
}

namespace {
template <class Ex, class... A>
Error mapped(A&&... a) {
  try {
    throw Ex(std::forward<A>(a)...);
  } catch (...) {
    return error_from_current_exception("Task.Create of container \"c\"");
  }
}
}  // namespace

TEST(ErrorFromException, StandardExceptionsGetACodeAndTheOperationNeverUnknown) {
  Error e = mapped<std::out_of_range>("stoul");
  EXPECT_EQ(e.code(), Code::InvalidArgument);
  EXPECT_STREQ(e.what(), "Task.Create of container \"c\": value out of range: stoul");
  EXPECT_EQ(mapped<std::invalid_argument>("stoi").code(), Code::InvalidArgument);
  EXPECT_EQ(mapped<std::bad_alloc>().code(), Code::ResourceExhausted);
  e = mapped<std::filesystem::filesystem_error>("x", std::filesystem::path("/gone"),
                                                std::make_error_code(std::errc::no_such_file_or_directory));
  EXPECT_EQ(e.code(), Code::NotFound);
  EXPECT_NE(std::string(e.what()).find("/gone"), std::string::npos) << e.what();
  EXPECT_EQ(mapped<std::runtime_error>("odd").code(), Code::Internal);
  e = mapped<Error>(Code::NotFound, "kept");
  EXPECT_EQ(e.code(), Code::NotFound);
  EXPECT_STREQ(e.what(), "kept");
}
