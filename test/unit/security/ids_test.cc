// Container, exec and namespace ids end up in paths (bundle, state dirs, the runtime's root) and on
// runtime command lines: anything that could climb out of a directory, start an option, or smuggle
// a control character must be refused by validate_id, the one gate every entry point uses.
#include <unistd.h>

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/error.h"
#include "common/log.h"
#include "common/validate.h"

namespace nvproxy {
namespace {

Code code_of(std::string_view id) {
  try {
    validate_id("container id", id);
  } catch (const Error& e) {
    return e.code();
  }
  return Code::Ok;
}

TEST(HostileIds, PathSeparatorsAndDotsAreRefused) {
  for (const std::string& id : std::vector<std::string>{"..", ".", "../x", "a/b", "/abs", "a/../../b", "./a", "..a", ".hidden",
                                                        "a\\b", "a/", "/", "x/..", "%2e%2e", "a%2fb"}) {
    EXPECT_EQ(code_of(id), Code::InvalidArgument) << id;
  }
}

TEST(HostileIds, OptionLikeAndShellMetacharactersAreRefused) {
  // A leading '-' would become a runtime option (runc kill -all ...).
  for (const std::string& id :
       std::vector<std::string>{"-rf", "--root=/", "-",    "a b", "a;b", "$(id)", "`id`",  "a|b", "a&b", "a>b", "a*",
                                "a?",  "a'b",      "a\"b", "a=b", "a:b", "a@b",   "~root", "a,b", "{a}", "[a]"}) {
    EXPECT_EQ(code_of(id), Code::InvalidArgument) << id;
  }
}

TEST(HostileIds, ControlCharactersAndNonAsciiAreRefused) {
  for (int c = 0; c < 0x20; ++c) {
    std::string id = "a";
    id += static_cast<char>(c);
    id += "b";
    EXPECT_EQ(code_of(id), Code::InvalidArgument) << "char " << c;
  }
  EXPECT_EQ(code_of(std::string("a\x7f")), Code::InvalidArgument);
  EXPECT_EQ(code_of(std::string_view("a\0b", 3)), Code::InvalidArgument) << "embedded NUL";
  EXPECT_EQ(code_of("caf\xc3\xa9"), Code::InvalidArgument) << "UTF-8";
  EXPECT_EQ(code_of("a\xff"), Code::InvalidArgument);
  EXPECT_EQ(code_of("\xe2\x80\xae"
                    "abc"),
            Code::InvalidArgument)
      << "right-to-left override";
}

TEST(HostileIds, LengthIsBounded) {
  EXPECT_EQ(code_of(""), Code::InvalidArgument);
  EXPECT_EQ(code_of(std::string(76, 'a')), Code::Ok);
  EXPECT_EQ(code_of(std::string(77, 'a')), Code::InvalidArgument);
  EXPECT_EQ(code_of(std::string(1 << 20, 'a')), Code::InvalidArgument);
}

TEST(HostileIds, ErrorMessageIsBoundedAndNamesTheField) {
  std::string huge(1 << 20, 'x');
  huge += "/..";
  try {
    validate_id("exec id", huge);
    FAIL();
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_LT(msg.size(), 400u) << "a megabyte id must not be echoed back whole";
    EXPECT_NE(msg.find("exec id"), std::string::npos) << msg;
  }
}

// What the shim logs when it refuses an id: the logger's quoting must keep it one record.
std::string logged_refusal(std::string_view id) {
  int p[2];
  EXPECT_EQ(::pipe(p), 0);
  {
    Logger log(p[1]);
    try {
      validate_id("container id", id);
    } catch (const Error& e) {
      log.error(e.what());
    }
  }
  ::close(p[1]);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(p[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  ::close(p[0]);
  return out;
}

TEST(HostileIds, ALoggedHostileIdCannotForgeALogRecord) {
  std::string out = logged_refusal("a\nlevel=error msg=\"forged\"");
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out.find('\n'), out.size() - 1) << "exactly one line: " << out;
  EXPECT_EQ(out.find("msg=\"forged\""), std::string::npos) << "quotes are escaped: " << out;
}

// Pending a one-line fix in common/log.cc quote() (docs/reliability.md, "findings"): carriage
// returns and terminal escapes pass through raw and can hide a record on a terminal.
TEST(HostileIds, ALoggedHostileIdCarriesNoRawControlCharacters) {
  std::string out = logged_refusal("a\r\x1b[2Jb\tc");
  out.pop_back();  // the record's own newline
  for (char c : out) EXPECT_FALSE(static_cast<unsigned char>(c) < 0x20 || c == 0x7f) << "raw control char " << int(c);
}

TEST(HostileIds, OrdinaryIdsPass) {
  for (const std::string& id :
       std::vector<std::string>{"c1", "a.b-c_d", "_x", "0", std::string(64, 'f'), "k8s_POD_nginx_default_1",
                                "3f9a2c8e1b7d4a6f9e0c5b2a8d7f6e4c3b2a1d0e9f8c7b6a5d4e3f2a1b0c9d8e"}) {
    EXPECT_EQ(code_of(id), Code::Ok) << id;
  }
}

}  // namespace
}  // namespace nvproxy
