#include "oci/runtime.h"

#include <linux/magic.h>
#include <sys/vfs.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>

#include "cgroup/paths.h"
#include "common/criu_release.h"
#include "common/error.h"
#include "common/fs.h"
#include "common/log.h"
#include "common/page_cache.h"
#include "oci/criu_resumed_watch.h"
#include "oci/replica_cgroup.h"
#include "oci/spec.h"

namespace nvproxy::oci {

using nlohmann::json;

Runtime::Runtime(RuntimeConfig cfg, ProcessRunner& runner, Logger& log, std::filesystem::path log_file, RuntimeProbe* probe)
    : cfg_(std::move(cfg)),
      kind_(runtime_kind_from_binary(cfg_.binary)),
      runner_(runner),
      log_(log),
      log_file_(std::move(log_file)),
      own_probe_(probe ? nullptr : std::make_unique<RuntimeProbe>(runner, log)),
      probe_(probe ? probe : own_probe_.get()) {}

RuntimeFeatures Runtime::features() {
  return probe_->runtime(cfg_.binary);
}

std::optional<CriuInfo> Runtime::criu() {
  if (kind_ == RuntimeKind::Runsc) return std::nullopt;
  return probe_->criu(cfg_.criu_path);
}

bool Runtime::criu_skips_zero_pages() {
  auto c = criu();
  return c && c->skip_zero_pages;
}

bool Runtime::criu_has_page_io() {
  auto c = criu();
  return c && c->page_io;
}

bool Runtime::criu_has_page_readers() {
  auto c = criu();
  return c && c->page_readers;
}

bool Runtime::criu_has_write_gate() {
  auto c = criu();
  return c && c->write_gate;
}

bool Runtime::criu_has_resumed_fifo() {
  auto c = criu();
  return c && c->resumed_fifo;
}

namespace {

// CRIU's decisive lines of `log` and what to do about them, appended to a runtime's error.
Error with_criu_log(const Error& e, const std::filesystem::path& log) {
  std::string criu = criu_errors(log);
  if (criu.empty()) return e;
  std::string hint = criu_option_hint(criu);
  return Error(e.code(), std::string(e.what()) + "\nCRIU (" + log.string() + "):\n" + criu + (hint.empty() ? "" : "\n" + hint));
}

}  // namespace

void Runtime::hand_over_criu(const std::string& id, const std::string& what, const std::filesystem::path& work,
                             std::vector<std::string>& argv, std::vector<std::string>& env) {
  if (cfg_.criu_path.empty() || kind_ == RuntimeKind::Runsc) return;
  RuntimeFeatures f = features();
  if (f.criu_flag) {
    argv.push_back("--criu=" + cfg_.criu_path);  // a global flag: runc 1.1 rejects it after the command
    return;
  }
  // PATH finds it: a private directory whose only entry is `criu` (a link to criu_path) comes
  // first, so nothing else the runtime looks up in PATH changes.
  std::filesystem::path dir;
  if (!work.empty()) {
    dir = work / "nvproxy-criu-bin";
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    std::filesystem::remove(dir / "criu", ec);
    std::filesystem::create_symlink(cfg_.criu_path, dir / "criu", ec);
    if (ec)
      throw Error(Code::Internal, std::string(runtime_kind_name(kind_)) + " " + what + " of container \"" + id +
                                      "\": cannot link " + (dir / "criu").string() + " to runtime.criu_path " + cfg_.criu_path +
                                      ": " + ec.message());
  } else {
    dir = std::filesystem::path(cfg_.criu_path).parent_path();
    if (std::filesystem::path(cfg_.criu_path).filename() != "criu")
      log_.warn(what + " of \"" + id + "\": no work directory for a link named criu, and runtime.criu_path " + cfg_.criu_path +
                " is not named criu: " + runtime_kind_name(kind_) + " will not find it in PATH");
  }
  const char* path = std::getenv("PATH");
  env.push_back("PATH=" + dir.string() + ":" +
                (path && *path ? path : "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"));
  log_.debug(what + " of \"" + id + "\": " + runtime_kind_name(kind_) + " " + f.version + " finds CRIU " + cfg_.criu_path +
             " through PATH (" + dir.string() + " first)");
}

std::vector<std::string> Runtime::base_args(const std::vector<std::string>& extra_global) const {
  std::vector<std::string> a{cfg_.binary};
  if (!cfg_.root.empty()) a.push_back("--root=" + cfg_.root);
  if (!log_file_.empty()) {
    a.push_back("--log=" + log_file_.string());
    if (supports_json_log(kind_)) a.push_back("--log-format=json");
  }
  if (cfg_.systemd_cgroup && kind_ != RuntimeKind::Runsc) a.push_back("--systemd-cgroup");
  a.insert(a.end(), cfg_.extra_args.begin(), cfg_.extra_args.end());
  a.insert(a.end(), extra_global.begin(), extra_global.end());
  return a;
}

std::vector<std::string> Runtime::wait_argv(const std::string& id) const {
  auto a = base_args();
  a.insert(a.end(), {"wait", id});
  return a;
}

std::string Runtime::last_log_error() const {
  // runc/crun write JSON lines {"level":"error","msg":...}; runsc writes text. Take the last error.
  std::ifstream in(log_file_);
  std::string line, last;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (line.front() == '{') {
      auto j = json::parse(line, nullptr, false);
      if (!j.is_discarded() && j.value("level", "") == "error") last = j.value("msg", line);
    } else if (line.find("rror") != std::string::npos || line.find("fatal") != std::string::npos) {
      last = line;
    }
  }
  return last;
}

RunResult Runtime::run_checked(const std::string& id, const std::string& what, Command cmd,
                               const std::function<std::string()>& on_timeout) {
  if (cmd.timeout.count() <= 0) cmd.timeout = cfg_.command_timeout;
  cmd.new_process_group = true;  // a timeout kills the runtime with whatever it started (CRIU)
  log_.debug("runtime: " + [&] {
    std::string s;
    for (auto& a : cmd.argv) s += a + " ";
    return s;
  }());
  RunResult r;
  try {
    r = runner_.run(cmd);
  } catch (const Error& e) {
    // Not NotFound: that answer means "no such container", and containerd would then take a
    // container the runtime could not even be asked about for gone (a Delete would leave it running).
    throw Error(Code::FailedPrecondition, std::string(runtime_kind_name(kind_)) + " " + what + " of container \"" + id +
                                              "\": cannot run the runtime: " + e.what());
  }
  if (r.timed_out) {
    std::string name = runtime_kind_name(kind_);
    bool criu = kind_ != RuntimeKind::Runsc && (what == "checkpoint" || what == "restore");
    std::string killed =
        "killed " + name + (criu ? " and CRIU" : "") +
        (r.killed_pgid > 0 ? " (pgid " + std::to_string(r.killed_pgid) + ")" : " (pid " + std::to_string(r.pid) + ")");
    log_.warn(name + " " + what + " of container \"" + id + "\" ran out of its " + std::to_string(cmd.timeout.count()) +
              " ms: " + killed);
    DeadlineError e(name + " " + what, "container \"" + id + "\"", cmd.timeout, r.killed_pgid, killed);
    if (on_timeout) e = e.with(on_timeout());
    throw e;
  }
  if (!r.ok()) {
    std::string detail = last_log_error();
    if (detail.empty()) detail = r.describe();
    // Only a container or process that is gone is NotFound (as containerd's runc shim classifies
    // runtime errors); anything else, a missing program inside the container included, is Unknown.
    auto has = [&](const char* s) { return detail.find(s) != std::string::npos; };
    Code code = Code::Unknown;
    if (has("does not exist") || has("container not running") || has("no such process") || has("process already finished") ||
        (has("not found") && has("container")))
      code = Code::NotFound;
    throw Error(code, std::string(runtime_kind_name(kind_)) + " " + what + " of container \"" + id + "\" failed: " + detail);
  }
  return r;
}

void Runtime::create(const std::string& id, const CreateOptions& o) {
  auto a = base_args(o.extra_global);
  a.insert(a.end(), {"create", "--bundle", o.bundle.string(), "--pid-file", o.pid_file.string()});
  if (!o.console_socket.empty()) a.insert(a.end(), {"--console-socket", o.console_socket});
  if (o.no_pivot) a.push_back("--no-pivot");
  if (o.no_new_keyring) a.push_back("--no-new-keyring");
  a.push_back(id);
  run_checked(id, "create",
              {.argv = a, .cwd = o.bundle.string(), .stdin_fd = o.stdio.in, .stdout_fd = o.stdio.out, .stderr_fd = o.stdio.err});
}

RunResult Runtime::simple_verb(const std::string& id, const char* verb) {
  auto a = base_args();
  a.insert(a.end(), {verb, id});
  return run_checked(id, verb, {.argv = a});
}

void Runtime::start(const std::string& id) {
  simple_verb(id, "start");
}

RuntimeState Runtime::state(const std::string& id) {
  RunResult r = simple_verb(id, "state");
  auto j = json::parse(r.out, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    throw Error(Code::Internal, std::string(runtime_kind_name(kind_)) + " state of \"" + id + "\": unparsable output");
  return {j.value("status", ""), j.value("pid", 0), j.value("bundle", "")};
}

std::vector<int> Runtime::ps(const std::string& id) {
  auto a = base_args();
  a.insert(a.end(), {"ps", "--format", "json", id});
  RunResult r = run_checked(id, "ps", {.argv = a});
  auto j = json::parse(r.out, nullptr, false);
  std::vector<int> pids;
  if (j.is_array()) {
    for (const auto& p : j) {
      if (p.is_number_integer())
        pids.push_back(p.get<int>());
      else if (p.is_object() && p.contains("pid"))
        pids.push_back(p["pid"].get<int>());  // runsc's format
    }
  } else if (!j.is_null()) {
    throw Error(Code::Internal, std::string(runtime_kind_name(kind_)) + " ps of \"" + id + "\": unparsable output");
  }
  return pids;
}

void Runtime::kill(const std::string& id, int signal, bool all) {
  auto a = base_args();
  a.push_back("kill");
  if (all) a.push_back("--all");
  a.insert(a.end(), {id, std::to_string(signal)});
  run_checked(id, "kill", {.argv = a});
}

void Runtime::remove(const std::string& id, bool force) {
  auto a = base_args();
  a.push_back("delete");
  if (force) a.push_back("--force");
  a.push_back(id);
  run_checked(id, "delete", {.argv = a});
}

void Runtime::pause(const std::string& id) {
  simple_verb(id, "pause");
}

void Runtime::resume(const std::string& id) {
  simple_verb(id, "resume");
}

void Runtime::update(const std::string& id, const json& resources) {
  if (!has_update(kind_))
    throw Error(Code::Unimplemented, std::string("update of container \"") + id + "\": " + runtime_kind_name(kind_) +
                                         " cannot change the resources of a running container");
  auto a = base_args();
  a.insert(a.end(), {"update", "--resources", "-", id});
  run_checked(id, "update", {.argv = a, .stdin_data = resources.dump()});
}

void Runtime::exec(const std::string& id, const ExecOptions& o) {
  auto a = base_args();
  a.insert(a.end(), {"exec", "--detach", "--process", o.process_json.string(), "--pid-file", o.pid_file.string()});
  if (!o.console_socket.empty()) a.insert(a.end(), {"--console-socket", o.console_socket});
  a.push_back(id);
  run_checked(id, "exec", {.argv = a, .stdin_fd = o.stdio.in, .stdout_fd = o.stdio.out, .stderr_fd = o.stdio.err});
}

std::vector<std::string> Runtime::criu_env(const std::string& id, const std::string& what, const std::filesystem::path& work,
                                           const std::string& plugin_dir, const std::vector<std::string>& extra) {
  if (kind_ == RuntimeKind::Runsc || (cfg_.criu_options.empty() && plugin_dir.empty() && extra.empty())) return {};
  if (work.empty()) {
    log_.warn(std::string(runtime_kind_name(kind_)) + " " + what + " of container \"" + id +
              "\": no CRIU work directory, so checkpoint.criu_options are not passed");
    return {};
  }
  auto file = work / "nvproxy-criu.conf";
  std::string text;
  try {
    std::vector<std::string> lines = cfg_.criu_options;
    if (!plugin_dir.empty()) lines.push_back("libdir " + plugin_dir);
    lines.insert(lines.end(), extra.begin(), extra.end());
    text = criu_config_text(lines);
    std::filesystem::create_directories(work);
    write_file_atomic(file, text);
  } catch (const std::exception& e) {
    throw Error(Code::Internal, std::string(runtime_kind_name(kind_)) + " " + what + " of container \"" + id +
                                    "\": cannot write the CRIU options to " + file.string() + ": " + e.what());
  }
  std::string shown = text;
  for (auto& ch : shown)
    if (ch == '\n') ch = ' ';
  log_.debug(what + " of \"" + id + "\": CRIU options " + shown + "(CRIU_CONFIG_FILE=" + file.string() + ")");
  return {"CRIU_CONFIG_FILE=" + file.string()};
}

// runc and crun send CRIU each of these switches in their request, false unless their flag is
// given, and the request overrides CRIU's configuration file: an operator's "tcp-established" in
// checkpoint.criu_options reached CRIU as false (measured with runc 1.1 and CRIU 4.2.1). So the
// options that have a flag become the flag.
CheckpointFlags Runtime::with_option_switches(CheckpointFlags f) const {
  for (std::string o : cfg_.criu_options) {
    if (o.rfind("--", 0) == 0) o.erase(0, 2);
    if (o == "tcp-established") f.open_tcp = true;
    if (o == "ext-unix-sk") f.external_unix_sockets = true;
    if (o == "file-locks") f.file_locks = true;
  }
  return f;
}

void Runtime::checkpoint(const std::string& id, const CheckpointFlags& f) {
  std::vector<std::string> dropped;
  auto a = base_args();
  if (!f.release_devices.empty() && (kind_ == RuntimeKind::Runsc || f.work_path.empty() || cfg_.criu_plugin_dir.empty()))
    throw Error(Code::FailedPrecondition, "checkpoint of container \"" + id +
                                              "\": inherited GPU device files cannot be released " +
                                              (kind_ == RuntimeKind::Runsc ? std::string("by runsc")
                                               : f.work_path.empty()       ? std::string("without a CRIU work directory")
                                                                           : std::string("without the shim's CRIU plugin")));
  std::vector<std::string> extra;
  const bool skip_zero = f.exclude_zero_pages && kind_ != RuntimeKind::Runsc && criu_skips_zero_pages();
  if (skip_zero) extra.emplace_back("skip-zero-pages");
  if (!f.post_dump_script.empty() && kind_ != RuntimeKind::Runsc) extra.push_back("action-script " + f.post_dump_script);
  const bool writers = cfg_.page_writers > 0 && criu_has_page_io();
  if (writers) extra.push_back("page-writers " + std::to_string(cfg_.page_writers));
  // The shim resumes CUDA as soon as CRIU runs the processes again, while CRIU still writes pages.
  std::optional<CriuResumedWatch> resumed;
  if (writers && f.leave_running && f.on_resumed && !f.work_path.empty() && cfg_.resume_before_write && criu_has_resumed_fifo()) {
    std::filesystem::create_directories(f.work_path);
    const bool gate = cfg_.write_after_cuda_resume && criu_has_write_gate();
    resumed.emplace(std::filesystem::path(f.work_path) / "nvproxy-resumed.fifo",
                    gate ? std::filesystem::path(f.work_path) / "nvproxy-write-gate.fifo" : std::filesystem::path(),
                    // `gate` by value: the watch outlives this block (it is told on its own thread)
                    [&, gate] {
                      log_.info("checkpoint of \"" + id + "\": CRIU runs the processes again; their pages are still " +
                                (gate ? "to be written (once CUDA is back)" : "being written"));
                      f.on_resumed();
                    });
    extra.push_back("resumed-fifo " + resumed->path().string());
    if (gate) extra.push_back("write-gate " + resumed->gate_path().string());
  }
  std::vector<std::string> env =
      criu_env(id, "checkpoint", f.work_path, f.release_devices.empty() ? "" : cfg_.criu_plugin_dir, extra);
  if (!f.release_devices.empty()) {
    env.push_back(std::string(NVPROXY_RELEASE_ENV) + "=" + f.release_devices);
    log_.info("checkpoint of \"" + id + "\": CRIU leaves the inherited device files of forked children out of the image " +
              "(devices " + f.release_devices + ", plugin in " + cfg_.criu_plugin_dir + ")");
  }
  hand_over_criu(id, "checkpoint", f.work_path, a, env);
  a.push_back("checkpoint");
  auto ca = checkpoint_args(kind_, with_option_switches(f), dropped);
  a.insert(a.end(), ca.begin(), ca.end());
  // A runc that has --link-remap tells CRIU link_remap=false without it, over the CRIU
  // configuration's "link-remap" line (measured: runc 1.4.3 failed on mp.Queue's semaphores).
  if (kind_ == RuntimeKind::Runc &&
      std::find(cfg_.criu_options.begin(), cfg_.criu_options.end(), "link-remap") != cfg_.criu_options.end() &&
      features().link_remap_flag)
    a.push_back("--link-remap");
  a.push_back(id);
  for (const auto& d : dropped)
    log_.info("checkpoint of \"" + id + "\": " + runtime_kind_name(kind_) + " does not take " + d + ", dropped");
  try {
    run_checked(id, "checkpoint", {.argv = a, .env_add = env, .timeout = cfg_.checkpoint_timeout});
  } catch (const Error& e) {
    // runc only says "criu failed ... log file: dump.log": the cause is in CRIU's own log.
    if (f.work_path.empty() || e.code() == Code::DeadlineExceeded || kind_ == RuntimeKind::Runsc) throw;
    throw with_criu_log(e, std::filesystem::path(f.work_path) / "dump.log");
  }
  if (!skip_zero || f.work_path.empty()) return;
  if (auto bytes = criu_zero_pages_left_out(std::filesystem::path(f.work_path) / "dump.log"))
    log_.info("checkpoint of \"" + id + "\": CRIU left " + std::to_string(*bytes >> 20) +
              " MiB of zero pages out of the image (--skip-zero-pages)");
  else
    log_.warn("checkpoint of \"" + id + "\": CRIU was told --skip-zero-pages but its log (" + f.work_path +
              "/dump.log) counts no zero pages");
}

nlohmann::json Runtime::stats(const std::string& id) {
  if (!has_events_stats(kind_))
    throw Error(Code::Unimplemented, std::string("statistics of container \"") + id + "\": " + runtime_kind_name(kind_) +
                                         " has no events command; they are read from the container's cgroup instead");
  auto a = base_args();
  a.insert(a.end(), {"events", "--stats", id});
  RunResult r = run_checked(id, "events --stats", {.argv = a});
  auto j = json::parse(r.out, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("data"))
    throw Error(Code::Internal, std::string(runtime_kind_name(kind_)) + " events --stats of \"" + id + "\": unparsable output");
  return j["data"];
}

std::optional<std::string> Runtime::criu_cgroup_root(const std::filesystem::path& bundle) {
  if (kind_ != RuntimeKind::Runc) return std::nullopt;
  struct statfs fs {};
  const bool v2 = ::statfs("/sys/fs/cgroup", &fs) == 0 && fs.f_type == CGROUP2_SUPER_MAGIC;
  if (!v2) return std::nullopt;
  try {
    return criu_cgroup_root_line(Spec::load(bundle).cgroups_path(), true, features().criu_flag);
  } catch (const std::exception&) {
    return std::nullopt;  // the runtime reports a spec it cannot read
  }
}

void Runtime::restore(const std::string& id, const RestoreOptions& o) {
  auto a = base_args(o.extra_global);
  // An image whose forked children's device files were released needs the plugin again, to give
  // them back as /dev/null and empty reservations.
  std::string plugin_dir;
  std::error_code exists_ec;
  if (kind_ != RuntimeKind::Runsc && std::filesystem::exists(o.image_path / NVPROXY_RELEASED_RECORD_FILE, exists_ec)) {
    if (cfg_.criu_plugin_dir.empty())
      throw Error(Code::FailedPrecondition, "restore of container \"" + id + "\": its image (" + o.image_path.string() +
                                                ") left forked children's GPU device files out, and the shim's CRIU plugin "
                                                "that gives them back is not installed here (checkpoint.criu_plugin_dir)");
    plugin_dir = cfg_.criu_plugin_dir;
  }
  const bool leave_stopped = o.leave_stopped && kind_ != RuntimeKind::Runsc;
  if (leave_stopped && o.work_path.empty())
    throw Error(Code::FailedPrecondition, "restore of container \"" + id +
                                              "\": its processes cannot be left stopped for their CUDA restore without a CRIU "
                                              "work directory");
  std::vector<std::string> criu_lines;
  if (leave_stopped) criu_lines.emplace_back("leave-stopped");
  if (auto root = criu_cgroup_root(o.bundle)) criu_lines.push_back(*root);
  if (cfg_.restore_huge_pages && criu_has_page_io()) criu_lines.emplace_back("restore-huge-pages");
  if (cfg_.page_readers > 1 && criu_has_page_readers()) criu_lines.push_back("page-readers " + std::to_string(cfg_.page_readers));
  std::vector<std::string> env = criu_env(id, "restore", o.work_path, plugin_dir, criu_lines);
  hand_over_criu(id, "restore", o.work_path, a, env);
  a.insert(a.end(), {"restore", "--detach", "--bundle", o.bundle.string(), "--image-path", o.image_path.string(), "--pid-file",
                     o.pid_file.string()});
  if (kind_ != RuntimeKind::Runsc) {
    if (!o.work_path.empty()) a.insert(a.end(), {"--work-path", o.work_path.string()});
    if (o.no_pivot) a.push_back("--no-pivot");
    // What the image was dumped with, it must be restored with (CRIU refuses a connected TCP socket
    // in the image otherwise).
    CheckpointFlags sw = with_option_switches({});
    if (sw.open_tcp) a.push_back("--tcp-established");
    if (sw.external_unix_sockets) a.push_back("--ext-unix-sk");
    if (sw.file_locks) a.push_back("--file-locks");
  }
  if (kind_ == RuntimeKind::Runsc && cfg_.runsc_direct_restore) {
    // From a warm cache O_DIRECT would read the disk again (bench/runsc_direct.sh).
    const auto pages = o.image_path / "pages.img";
    if (auto share = page_cache_share(pages); share && *share < 0.5) {
      a.push_back("--direct");
      log_.info("restore of \"" + id + "\": " + std::to_string(static_cast<int>(*share * 100)) + "% of " + pages.string() +
                " is in the page cache: runsc reads it with O_DIRECT");
    }
  }
  if (!o.console_socket.empty()) a.insert(a.end(), {"--console-socket", o.console_socket});
  a.push_back(id);
  // A restore killed midway leaves a half-restored container (state, cgroup, processes CRIU had
  // created): it is removed, so that nothing of it keeps running behind containerd's back.
  auto remove_half_restored = [&]() -> std::string {
    std::string del = std::string(runtime_kind_name(kind_)) + " delete --force";
    try {
      remove(id, true);
      return "removed the half-restored container (" + del + ")";
    } catch (const std::exception& e) {
      return "could not remove the half-restored container (" + del + "): " + e.what();
    }
  };
  // A stale restore.log (an earlier attempt's) must not be quoted for this one.
  std::error_code ec;
  if (!o.work_path.empty()) std::filesystem::remove(o.work_path / "restore.log", ec);
  try {
    run_checked(id, "restore",
                {.argv = a,
                 .env_add = env,
                 .cwd = o.bundle.string(),
                 .stdin_fd = o.stdio.in,
                 .stdout_fd = o.stdio.out,
                 .stderr_fd = o.stdio.err,
                 .timeout = cfg_.restore_timeout},
                remove_half_restored);
  } catch (const Error& e) {
    // runc only says "criu failed: type RESTORE errno 0": the cause is in CRIU's restore.log.
    if (o.work_path.empty() || e.code() == Code::DeadlineExceeded || kind_ == RuntimeKind::Runsc) throw;
    throw with_criu_log(e, o.work_path / "restore.log");
  }
}

}  // namespace nvproxy::oci
