// A gVisor pod's checkpoint: one runsc image of the whole sandbox (every container of the pod lives
// in the one sentry, and `runsc checkpoint` of any of them saves all), so the image's record names
// the pod it was taken from (IMAGE/nvproxy-cuda.json's "pod"): the sandbox and each container by
// its name in the pod, which is how runsc matches the containers of the pod it restores into (by
// CRI's container name, not by id), with what a restore must find again (the image it ran, the
// GPUs it asked for). The matching is plain logic, here, so that a restore refuses a pod that is
// not the image's before runsc runs.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace nvproxy::checkpoint {

struct PodMember {
  std::string name;      // io.kubernetes.cri.container-name; the sandbox container's is empty
  std::string id;        // the container's id where it was checkpointed
  bool sandbox = false;  // the pod's sandbox (pause) container, runsc's root container
  std::string image;     // io.kubernetes.cri.image-name, when CRI said
  int gpus = 0;          // how many GPUs it asked for (kAllGpus: every GPU of the host)
  bool operator==(const PodMember&) const = default;
};

inline constexpr int kAllGpus = -1;

// IMAGE/<this>/<container name>/nvproxy-cuda.json: the record of each GPU container of the pod but
// the one whose record is the image's own (a pod of several GPU containers).
inline constexpr const char* kPodCudaDir = "pod-cuda";

struct PodRecord {
  std::string sandbox_id;             // io.kubernetes.cri.sandbox-id where it was checkpointed
  std::string sandbox_name;           // io.kubernetes.cri.sandbox-name (the pod's name), when CRI said
  std::vector<PodMember> containers;  // the sandbox container first, then the others by name
  bool operator==(const PodRecord&) const = default;

  // The member named `name` (not the sandbox container), or nullptr.
  [[nodiscard]] const PodMember* container(const std::string& name) const;
  [[nodiscard]] const PodMember* by_id(const std::string& id) const;
  // The containers' names (the sandbox container's left out), sorted.
  [[nodiscard]] std::vector<std::string> names() const;
};

nlohmann::json to_json(const PodRecord& r);
// Throws Error(InvalidArgument) naming the malformed field.
PodRecord pod_record_from_json(const nlohmann::json& j);

// "2 GPUs", "1 GPU", "no GPU", "every GPU".
std::string gpus_text(int gpus);

// What keeps a pod whose containers are `names` from being restored from the image, one sentence
// each: a container of the image the pod lacks (runsc would wait for it forever), a container of
// the pod the image does not hold (it cannot start fresh inside a restored sandbox). Empty: they
// match.
std::vector<std::string> pod_name_mismatches(const PodRecord& image, const std::vector<std::string>& names);

// What keeps container `name` asking for `gpus` from being restored as the image's container of
// that name: not in the image, or another GPU count. Empty: it may be.
std::optional<std::string> pod_member_mismatch(const PodRecord& image, const std::string& name, int gpus);

}  // namespace nvproxy::checkpoint
