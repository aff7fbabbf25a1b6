// What nvproxy-image-transfer answers the shim (image_puller.h): one JSON object on its standard
// output, {"ok": VALUE} or {"error": {"code": GRPC_CODE, "message": TEXT}}, so that the shim
// rebuilds the same Error (its code and its words) the registry client raised in the program.
// Progress goes to its standard error, a line at a time. The verbs and options are the program's
// usage (checkpoint/registry/transfer_cmd.h).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/error.h"

namespace nvproxy::checkpoint {

inline constexpr const char* kImageTransferProgram = "nvproxy-image-transfer";

std::string transfer_answer(const nlohmann::json& value);
std::string transfer_failure(Code code, const std::string& message);

// The VALUE of an {"ok": VALUE} answer (the last line of `out`); throws the Error of an
// {"error": ...} one. nullopt when `out` holds no answer (the program died, or is not the shim's).
std::optional<nlohmann::json> read_transfer_answer(const std::string& out);

// The words of an operator's push or pull, as the shim's `image` command (which hands them on)
// and the program (which acts on them) both read them.
struct TransferWords {
  std::string verb;
  std::vector<std::string> paths;  // with --kube, its archive first
  bool ctr = false;                // --ctr was given
  std::string ctr_name;            // push --ctr NAME
  std::string kube_archive;        // push --kube ARCHIVE
};
// `ctr`: --ctr's value, nullopt without it; `pull --ctr REFERENCE` (the option took the reference)
// becomes that reference. nullopt: --kube other than `push --kube ARCHIVE REFERENCE`.
std::optional<TransferWords> transfer_words(std::string verb, std::vector<std::string> paths,
                                            const std::optional<std::string>& ctr, std::string kube_archive);
// Whether they are one of the usage's push and pull lines.
bool is_push_or_pull(const TransferWords& w);

}  // namespace nvproxy::checkpoint
