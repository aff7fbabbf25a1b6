#include "common/validate.h"

#include <gtest/gtest.h>

#include "common/error.h"

using namespace nvproxy;

TEST(Validate, Ids) {
  EXPECT_NO_THROW(validate_id("container id", "abc-1.2_x"));
  EXPECT_THROW(validate_id("container id", ""), Error);
  EXPECT_THROW(validate_id("container id", "a/b"), Error);
  EXPECT_THROW(validate_id("container id", ".."), Error);
  EXPECT_THROW(validate_id("container id", std::string(77, 'a')), Error);
  EXPECT_THROW(validate_id("exec id", "a\nb"), Error);
}
