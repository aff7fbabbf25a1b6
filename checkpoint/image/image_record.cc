#include "checkpoint/image/image_record.h"

#include <algorithm>

#include "common/error.h"
#include "common/fs.h"
#include "common/json_integer.h"

namespace nvproxy::checkpoint {

using nlohmann::json;

namespace {

json processes_json(const std::vector<ImageProcess>& ps) {
  json a = json::array();
  for (const auto& p : ps) a.push_back({{"pid", p.pid}, {"name", p.name}});
  return a;
}

std::vector<ImageProcess> processes_from(const json& j, const char* key) {
  std::vector<ImageProcess> out;
  if (!j.contains(key)) return out;
  const json& a = j.at(key);
  if (!a.is_array()) throw Error(Code::InvalidArgument, std::string("\"") + key + "\" is not a list");
  for (const auto& p : a) {
    if (!p.is_object() || !p.contains("pid"))
      throw Error(Code::InvalidArgument, std::string("an entry of \"") + key + "\" has no pid: " + p.dump());
    out.push_back({.pid = json_integer<pid_t>(p.at("pid"), std::string(key) + ".pid"), .name = p.value("name", std::string())});
  }
  return out;
}

}  // namespace

json to_json(const ImageRecord& r) {
  json j{{"version", r.released.empty() ? std::min(r.version, ImageRecord::kVersionWithoutReleased) : ImageRecord::kVersion},
         {"container", r.container},
         {"cuda_processes", r.cuda_processes},
         {"cuda_pids", processes_json(r.cuda_pids)}};
  if (!r.sandbox.empty()) j["sandbox"] = r.sandbox;
  if (!r.cuda_not_restored.empty()) j["cuda_not_restored"] = processes_json(r.cuda_not_restored);
  if (r.gpu) j["gpu"] = to_json(*r.gpu);
  if (!r.gpu_error.empty()) j["gpu_error"] = r.gpu_error;
  if (r.sandbox_device_bytes > 0) j["sandbox_device_bytes"] = r.sandbox_device_bytes;
  if (r.sandbox_memory_bytes > 0) j["sandbox_memory_bytes"] = r.sandbox_memory_bytes;
  if (!r.runtime.empty()) j["runtime"] = {{"name", r.runtime}, {"version", r.runtime_version}};
  if (!r.criu_version.empty()) j["criu_version"] = r.criu_version;
  if (!r.checkpoint_phases.empty()) {
    json ph = json::array();
    for (const auto& [name, ms] : r.checkpoint_phases) ph.push_back({{"name", name}, {"ms", ms}});
    j["checkpoint_phases"] = ph;
  }
  if (r.stopped_ms > 0) j["stopped_ms"] = r.stopped_ms;
  if (r.pod) j["pod"] = to_json(*r.pod);
  if (r.host_files_listed) {
    json a = json::array();
    for (const auto& f : r.host_files) a.push_back(to_json(f));
    j["host_files"] = a;
  }
  if (!r.released.empty()) {
    json a = json::array();
    for (const auto& p : r.released) a.push_back({{"pid", p.pid}, {"name", p.name}, {"from", p.from}, {"fds", p.fds}});
    j["released"] = a;
  }
  return j;
}

ImageRecord image_record_from_json(const json& j) {
  if (!j.is_object()) throw Error(Code::InvalidArgument, "the record is not a JSON object");
  ImageRecord r;
  try {
    r.version = json_integer_or(j, "version", 0);
    if (r.version > ImageRecord::kVersion)
      throw Error(Code::InvalidArgument, "record version " + std::to_string(r.version) + " is newer than this shim's (" +
                                             std::to_string(ImageRecord::kVersion) + "): restore with a newer shim");
    r.container = j.value("container", std::string());
    r.sandbox = j.value("sandbox", std::string());
    r.cuda_processes = json_integer_or(j, "cuda_processes", 0);
    r.cuda_pids = processes_from(j, "cuda_pids");
    r.cuda_not_restored = processes_from(j, "cuda_not_restored");
    if (j.contains("gpu")) r.gpu = gpu_record_from_json(j.at("gpu"));
    if (j.contains("gpu_error"))
      r.gpu_error = j.at("gpu_error").is_string() ? j.at("gpu_error").get<std::string>() : j.at("gpu_error").dump();
    r.sandbox_device_bytes = json_integer_or<std::uint64_t>(j, "sandbox_device_bytes", 0);
    r.sandbox_memory_bytes = json_integer_or<std::uint64_t>(j, "sandbox_memory_bytes", 0);
    if (j.contains("runtime")) {
      const json& rt = j.at("runtime");
      if (!rt.is_object()) throw Error(Code::InvalidArgument, "\"runtime\" is not an object");
      r.runtime = rt.value("name", std::string());
      r.runtime_version = rt.value("version", std::string());
    }
    r.criu_version = j.value("criu_version", std::string());
    if (j.contains("checkpoint_phases")) {
      if (!j.at("checkpoint_phases").is_array()) throw Error(Code::InvalidArgument, "\"checkpoint_phases\" is not a list");
      for (const auto& ph : j.at("checkpoint_phases"))
        r.checkpoint_phases.emplace_back(ph.at("name").get<std::string>(), ph.at("ms").get<double>());
    }
    r.stopped_ms = j.value("stopped_ms", 0.0);
    if (j.contains("pod")) r.pod = pod_record_from_json(j.at("pod"));
    if (j.contains("host_files")) {
      if (!j.at("host_files").is_array()) throw Error(Code::InvalidArgument, "\"host_files\" is not a list");
      r.host_files_listed = true;
      for (const auto& f : j.at("host_files"))
        r.host_files.push_back(host_file_from_json(f, "host_files[" + std::to_string(r.host_files.size()) + "]"));
    }
    if (j.contains("released")) {
      if (!j.at("released").is_array()) throw Error(Code::InvalidArgument, "\"released\" is not a list");
      for (const auto& p : j.at("released")) {
        ImageReleased out{.pid = json_integer<pid_t>(p.at("pid"), "released.pid"),
                          .name = p.value("name", std::string()),
                          .from = json_integer_or(p, "from", pid_t{0})};
        if (p.contains("fds")) {
          if (!p.at("fds").is_array()) throw Error(Code::InvalidArgument, "\"released.fds\" is not a list");
          for (const auto& fd : p.at("fds")) out.fds.push_back(json_integer<int>(fd, "released.fds"));
        }
        r.released.push_back(std::move(out));
      }
    }
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(Code::InvalidArgument, std::string("malformed field: ") + e.what());
  }
  if (r.cuda_processes < 0) throw Error(Code::InvalidArgument, "\"cuda_processes\" is negative");
  return r;
}

std::optional<ImageRecord> read_image_record(const std::filesystem::path& image_dir) {
  auto path = image_dir / ImageRecord::kFileName;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::nullopt;
  try {
    auto j = json::parse(read_file(path), nullptr, false);
    if (j.is_discarded()) throw Error(Code::InvalidArgument, "not JSON");
    return image_record_from_json(j);
  } catch (const std::exception& e) {
    throw Error(Code::InvalidArgument, "checkpoint record " + path.string() + " cannot be read: " + e.what());
  }
}

void write_image_record(const std::filesystem::path& image_dir, const ImageRecord& r) {
  auto path = image_dir / ImageRecord::kFileName;
  try {
    write_file_atomic(path, to_json(r).dump());
  } catch (const std::exception& e) {
    throw Error(Code::Internal, "cannot write the checkpoint record " + path.string() + ": " + e.what());
  }
}

}  // namespace nvproxy::checkpoint
