// The seam between the shim and nvproxy-image-transfer: an operator's push and pull words, read
// the same way by the shim's `image` command and by the program, and the program's answers.
#include "checkpoint/image/transfer_wire.h"

#include <gtest/gtest.h>

using namespace nvproxy;
using namespace nvproxy::checkpoint;

using Paths = std::vector<std::string>;

TEST(TransferWords, PullCtrTakesTheReferenceFromTheOption) {
  auto w = transfer_words("pull", {}, std::string("reg/ckpt:v1"), "");
  ASSERT_TRUE(w);
  EXPECT_TRUE(w->ctr);
  EXPECT_EQ(w->ctr_name, "");
  EXPECT_EQ(w->paths, Paths{"reg/ckpt:v1"});
  EXPECT_TRUE(is_push_or_pull(*w));
}

TEST(TransferWords, PushCtrNamesTheCheckpointImage) {
  auto w = transfer_words("push", {"reg/ckpt:v1"}, std::string("ckpt1"), "");
  ASSERT_TRUE(w);
  EXPECT_EQ(w->ctr_name, "ckpt1");
  EXPECT_TRUE(is_push_or_pull(*w));
  EXPECT_FALSE(is_push_or_pull(*transfer_words("push", {"reg/ckpt:v1"}, std::string(""), ""))) << "push --ctr without a name";
}

TEST(TransferWords, KubeIsAPushOfOneArchiveToOneReference) {
  auto w = transfer_words("push", {"reg/ckpt:v1"}, std::nullopt, "/var/lib/kubelet/checkpoints/c.tar");
  ASSERT_TRUE(w);
  EXPECT_EQ(w->paths, (Paths{"/var/lib/kubelet/checkpoints/c.tar", "reg/ckpt:v1"}));
  EXPECT_EQ(w->kube_archive, "/var/lib/kubelet/checkpoints/c.tar");
  EXPECT_TRUE(is_push_or_pull(*w));
  EXPECT_FALSE(transfer_words("pull", {"reg/ckpt:v1"}, std::nullopt, "a.tar"));
  EXPECT_FALSE(transfer_words("push", {"reg/ckpt:v1"}, std::string("n"), "a.tar"));
  EXPECT_FALSE(transfer_words("push", {"a", "b"}, std::nullopt, "a.tar"));
}

TEST(TransferWords, PlainPushAndPullShapes) {
  EXPECT_TRUE(is_push_or_pull(*transfer_words("push", {"dir", "reg/x:1"}, std::nullopt, "")));
  EXPECT_FALSE(is_push_or_pull(*transfer_words("push", {"dir"}, std::nullopt, "")));
  EXPECT_TRUE(is_push_or_pull(*transfer_words("pull", {"reg/x:1"}, std::nullopt, "")));
  EXPECT_TRUE(is_push_or_pull(*transfer_words("pull", {"reg/x:1", "out"}, std::nullopt, "")));
  EXPECT_FALSE(is_push_or_pull(*transfer_words("pull", {}, std::nullopt, "")));
  EXPECT_FALSE(is_push_or_pull(*transfer_words("pack", {"a", "b"}, std::nullopt, "")));
}

TEST(TransferAnswer, CarriesAValueOrTheErrorsCodeAndWords) {
  EXPECT_EQ(read_transfer_answer("progress\n" + transfer_answer({{"entry", "/s/registry/x"}}))->at("entry"), "/s/registry/x");
  try {
    read_transfer_answer(transfer_failure(Code::NotFound, "reg/x:1: manifest unknown"));
    FAIL() << "an error answer did not throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::NotFound);
    EXPECT_STREQ(e.what(), "reg/x:1: manifest unknown");
  }
  EXPECT_FALSE(read_transfer_answer("killed\n"));
}
