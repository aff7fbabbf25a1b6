#include "checkpoint/image/transfer_wire.h"

namespace nvproxy::checkpoint {

using json = nlohmann::json;

std::string transfer_answer(const json& value) {
  return json{{"ok", value}}.dump() + "\n";
}

std::string transfer_failure(Code code, const std::string& message) {
  return json{{"error", {{"code", static_cast<int>(code)}, {"message", message}}}}.dump() + "\n";
}

std::optional<json> read_transfer_answer(const std::string& out) {
  // The answer is the last line: anything the program's own children wrote comes before it.
  std::string line = out;
  while (!line.empty() && line.back() == '\n') line.pop_back();
  if (auto nl = line.rfind('\n'); nl != std::string::npos) line.erase(0, nl + 1);
  const json j = json::parse(line, nullptr, false);
  if (j.is_object() && j.contains("ok")) return j["ok"];
  if (j.is_object() && j.contains("error") && j["error"].is_object()) {
    const json& e = j["error"];
    const int code = e.contains("code") && e["code"].is_number_integer() ? e["code"].get<int>() : 0;
    const bool known = code > 0 && code <= static_cast<int>(Code::Unauthenticated);
    const bool said = e.contains("message") && e["message"].is_string();
    throw Error(known ? static_cast<Code>(code) : Code::Unknown,
                said ? e["message"].get<std::string>() : std::string(kImageTransferProgram) + " failed saying nothing");
  }
  return std::nullopt;
}

std::optional<TransferWords> transfer_words(std::string verb, std::vector<std::string> paths,
                                            const std::optional<std::string>& ctr, std::string kube_archive) {
  TransferWords w{.verb = std::move(verb),
                  .paths = std::move(paths),
                  .ctr = ctr.has_value(),
                  .ctr_name = ctr.value_or(""),
                  .kube_archive = {}};
  if (w.verb == "pull" && !w.ctr_name.empty()) {  // `pull --ctr REFERENCE`: the option took the reference
    w.paths.insert(w.paths.begin(), w.ctr_name);
    w.ctr_name.clear();
  }
  if (!kube_archive.empty() && (w.verb != "push" || w.ctr || w.paths.size() != 1)) return std::nullopt;
  if (!kube_archive.empty()) w.paths.insert(w.paths.begin(), kube_archive);
  w.kube_archive = std::move(kube_archive);
  return w;
}

bool is_push_or_pull(const TransferWords& w) {
  const auto n = w.paths.size();
  return (w.verb == "push" && !w.ctr && n == 2) || (w.verb == "push" && w.ctr && !w.ctr_name.empty() && n == 1) ||
         (w.verb == "pull" && !w.ctr && (n == 1 || n == 2)) || (w.verb == "pull" && w.ctr && w.ctr_name.empty() && n == 1);
}

}  // namespace nvproxy::checkpoint
