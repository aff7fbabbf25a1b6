// The driver against a scripted stand-in runtime that records its argv and answers like runc.
#include "oci/runtime.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "common/error.h"
#include "common/fs.h"
#include "common/log.h"
#include "common/page_cache.h"

using namespace nvproxy;
using namespace nvproxy::oci;

namespace {
class RuntimeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("nvproxy-rt-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    script_ = dir_ / "fake-runc";
    std::ofstream(script_)
        << "#!/bin/sh\n"
           "case $1 in --version) cat "
        << (dir_ / "version").string()
        << " 2>/dev/null; exit 0;; features) exit 1;; esac\n"
           "echo \"$@\" >> "
        << (dir_ / "argv").string()
        << "\n"
           "for a in \"$@\"; do case $a in --log=*) log=${a#--log=};; esac; done\n"
           "case \" $* \" in\n"
           "  *\" state \"*) echo '{\"status\":\"running\",\"pid\":42,\"bundle\":\"/b\"}';;\n"
           "  *\" ps \"*) echo '[1,2,3]';;\n"
           "  *\" start \"*) echo '{\"level\":\"error\",\"msg\":\"container does not exist\"}' >> $log; exit 1;;\n"
           "esac\n";
    ::chmod(script_.c_str(), 0755);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string argv() { return read_file(dir_ / "argv"); }

  std::filesystem::path dir_, script_;
  DirectWaiter waiter_;
  ProcessRunner runner_{waiter_};
  Logger log_{-1};
};
}  // namespace

TEST_F(RuntimeTest, GlobalFlagsAndState) {
  Runtime rt({.binary = script_.string(), .root = "/run/r", .extra_args = {"--debug"}}, runner_, log_, dir_ / "log.json");
  auto st = rt.state("c1");
  EXPECT_EQ(st.status, "running");
  EXPECT_EQ(st.pid, 42);
  EXPECT_EQ(argv(), "--root=/run/r --log=" + (dir_ / "log.json").string() + " --log-format=json --debug state c1\n");
  EXPECT_EQ(rt.ps("c1"), (std::vector<int>{1, 2, 3}));
}

TEST_F(RuntimeTest, FailureCarriesRuntimeLogAndContainer) {
  Runtime rt({.binary = script_.string()}, runner_, log_, dir_ / "log.json");
  try {
    rt.start("c9");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::NotFound);
    EXPECT_NE(std::string(e.what()).find("start of container \"c9\" failed: container does not exist"), std::string::npos)
        << e.what();
  }
}

// runc 1.1 takes --criu only as a global flag: `runc checkpoint --criu=...` fails with "flag provided
// but not defined" (seen on the GPU machine with runc 1.1.15 and here with 1.1.5).
TEST_F(RuntimeTest, CriuPathIsAGlobalFlag) {
  std::ofstream(dir_ / "version") << "runc version 1.1.5+ds1\ncommit: 1.1.5+ds1-1+deb12u1\n";
  Runtime rt({.binary = script_.string(), .criu_path = "/opt/kit/bin/criu"}, runner_, log_, dir_ / "log.json");
  rt.checkpoint("c1", {.leave_running = true, .image_path = "/img", .work_path = (dir_ / "work").string()});
  std::string a = argv();
  EXPECT_LT(a.find("--criu=/opt/kit/bin/criu"), a.find(" checkpoint ")) << a;
  std::filesystem::remove(dir_ / "argv");
  rt.restore("c1", {.bundle = dir_, .image_path = "/img", .pid_file = dir_ / "pid"});
  a = argv();
  EXPECT_LT(a.find("--criu=/opt/kit/bin/criu"), a.find(" restore ")) << a;
}

// runc >= 1.2 has no working --criu (1.4 rejects it): criu_path reaches it through PATH, as a
// private directory's `criu` link to it, first in PATH; so does an unknown version's.
TEST_F(RuntimeTest, CriuPathThroughPathWhereTheFlagIsGone) {
  auto kit = dir_ / "kit";
  std::filesystem::create_directories(kit);
  std::ofstream(kit / "criu-4.2") << "#!/bin/sh\necho kit-criu\n";
  ::chmod((kit / "criu-4.2").c_str(), 0755);
  auto probe = dir_ / "probe-runc";
  std::ofstream(probe)
      << "#!/bin/sh\ncase $1 in --version) echo 'runc version 1.4.3'; exit 0;; features) exit 0;; esac\n"
         "[ \"$1 $2\" = 'checkpoint --help' ] && { echo '   --link-remap   allow one to link unlinked files'; exit 0; }\n"
         "echo \"$@\" >> "
      << (dir_ / "argv").string() << "\ncriu >> " << (dir_ / "found").string() << "\n";
  ::chmod(probe.c_str(), 0755);
  auto work = dir_ / "w";
  RuntimeProbe shared(runner_, log_);
  Runtime rt({.binary = probe.string(), .criu_path = (kit / "criu-4.2").string()}, runner_, log_, dir_ / "log.json", &shared);
  EXPECT_FALSE(rt.features().criu_flag);
  rt.checkpoint("c1", {.leave_running = true, .image_path = "/img", .work_path = work.string()});
  EXPECT_EQ(argv().find("--criu"), std::string::npos) << argv();
  EXPECT_NE(argv().find("--link-remap"), std::string::npos) << "this runc overrides the config's link-remap: " << argv();
  EXPECT_EQ(read_file(dir_ / "found"), "kit-criu\n") << "the runtime's PATH finds criu_path as `criu`";
  EXPECT_EQ(std::filesystem::read_symlink(work / "nvproxy-criu-bin" / "criu"), kit / "criu-4.2");
  std::filesystem::remove(dir_ / "found");
  rt.restore("c1", {.bundle = dir_, .image_path = "/img", .work_path = work, .pid_file = dir_ / "pid"});
  EXPECT_EQ(read_file(dir_ / "found"), "kit-criu\n");

  // The script answers as an unknown runc: PATH too.
  std::filesystem::remove(dir_ / "argv");
  std::filesystem::remove(dir_ / "found");
  Runtime unknown({.binary = script_.string(), .criu_path = (kit / "criu-4.2").string()}, runner_, log_, dir_ / "log.json");
  EXPECT_NE(unknown.features().error, "");
  unknown.checkpoint("c1", {.image_path = "/img", .work_path = work.string()});
  EXPECT_EQ(argv().find("--criu"), std::string::npos) << argv();
}

// The shim's probe asks each binary once.
TEST_F(RuntimeTest, ProbedOncePerBinary) {
  auto counted = dir_ / "counted-runc";
  std::ofstream(counted) << "#!/bin/sh\necho \"$1\" >> " << (dir_ / "probes").string()
                         << "\ncase $1 in --version) echo 'runc version 1.1.15+ds1'; exit 0;; esac\necho '{}'\n";
  ::chmod(counted.c_str(), 0755);
  RuntimeProbe shared(runner_, log_);
  Runtime a({.binary = counted.string()}, runner_, log_, "", &shared);
  Runtime b({.binary = counted.string()}, runner_, log_, "", &shared);
  EXPECT_TRUE(a.features().criu_flag);
  EXPECT_TRUE(b.features().criu_flag);
  EXPECT_EQ(read_file(dir_ / "probes"), "--version\nfeatures\ncheckpoint\n");
}

// A probe that does not answer in time is cut off; the version is unknown.
TEST_F(RuntimeTest, ProbeHasADeadline) {
  auto hung = dir_ / "hung-runc";
  std::ofstream(hung) << "#!/bin/sh\nexec sleep 30\n";
  ::chmod(hung.c_str(), 0755);
  RuntimeProbe quick(runner_, log_, std::chrono::milliseconds(200));
  auto t0 = std::chrono::steady_clock::now();
  auto f = quick.runtime(hung.string());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  EXPECT_NE(f.error.find("did not answer within 200 ms"), std::string::npos) << f.error;
  auto c = quick.criu(hung.string());
  EXPECT_NE(c.error.find("did not answer within 200 ms"), std::string::npos) << c.error;
}

// runc's request to CRIU overrides its configuration file for the switches that have a flag: those
// options become the flag, at checkpoint and restore alike; leave-stopped goes to the file.
TEST_F(RuntimeTest, CriuOptionsWithAFlagBecomeTheFlag) {
  auto script = dir_ / "args-runc";
  std::ofstream(script) << "#!/bin/sh\ncase \"$1 $2\" in \"--version \"|\"features \"|\"checkpoint --help\") exit 0;; esac\n"
                        << "echo \"$*\" >> " << (dir_ / "args").string() << "\n";
  ::chmod(script.c_str(), 0755);
  auto work = dir_ / "cw";
  // Page I/O off: what this test reads must not depend on the CRIU installed here (see PageIoOptions).
  Runtime rt({.binary = script.string(),
              .criu_options = {"link-remap", "tcp-established", "--file-locks"},
              .page_writers = 0,
              .restore_huge_pages = false,
              .page_readers = 0},
             runner_, log_, dir_ / "log.json");
  rt.checkpoint("c1", {.image_path = "/img", .work_path = work.string()});
  rt.restore("c1", {.bundle = dir_, .image_path = "/img", .work_path = work, .pid_file = dir_ / "pid", .leave_stopped = true});
  std::string args = read_file(dir_ / "args");
  auto restore_at = args.find(" restore ");
  ASSERT_NE(restore_at, std::string::npos) << args;
  std::string ckpt = args.substr(0, restore_at), rest = args.substr(restore_at);
  EXPECT_NE(ckpt.find("--tcp-established"), std::string::npos) << ckpt;
  EXPECT_NE(ckpt.find("--file-locks"), std::string::npos) << ckpt;
  EXPECT_NE(rest.find("--tcp-established"), std::string::npos) << rest;
  EXPECT_NE(rest.find("--file-locks"), std::string::npos) << rest;
  EXPECT_EQ(read_file(work / "nvproxy-criu.conf"), "link-remap\ntcp-established\nfile-locks\nleave-stopped\n");
}

// A CRIU with the project's page I/O patch (its --help lists the options) gets "page-writers N" at
// checkpoint and "restore-huge-pages" and "page-readers N" at restore, each unless turned off; the
// patch's first version (no --page-readers) no readers; one without it none.
TEST_F(RuntimeTest, PageIoOptions) {
  auto runc = dir_ / "pio-runc";
  std::ofstream(runc)
      << "#!/bin/sh\ncase \"$1 $2\" in \"--version \"|\"features \"|\"checkpoint --help\") exit 0;; esac\nexit 0\n";
  ::chmod(runc.c_str(), 0755);
  auto fake_criu = [&](const std::string& name, bool page_io, bool readers = true) {
    auto p = dir_ / name;
    std::ofstream(p) << "#!/bin/sh\ncase $1 in --version) echo 'Version: 4.2.1';; --help) echo '  --skip-zero-pages     x'"
                     << (page_io ? "; echo '  --page-writers N      x'; echo '  --restore-huge-pages  x'" : "")
                     << (page_io && readers ? "; echo '  --page-readers N      x'" : "") << ";; esac\n";
    ::chmod(p.c_str(), 0755);
    return p.string();
  };
  const std::string with = fake_criu("criu-page-io", true), without = fake_criu("criu-zero-pages", false),
                    first = fake_criu("criu-page-io-0.7", true, false);
  auto conf = [&](const RuntimeConfig& cfg) {
    Runtime rt(cfg, runner_, log_, dir_ / "log.json");
    std::filesystem::remove_all(dir_ / "pw");
    rt.checkpoint("c1", {.image_path = "/img", .work_path = (dir_ / "pw").string()});
    std::string ck = read_file(dir_ / "pw" / "nvproxy-criu.conf");
    std::filesystem::remove_all(dir_ / "pw");
    rt.restore("c1", {.bundle = dir_, .image_path = "/img", .work_path = dir_ / "pw", .pid_file = dir_ / "pid"});
    return std::pair{ck, read_file(dir_ / "pw" / "nvproxy-criu.conf")};
  };
  auto [ck, rs] = conf({.binary = runc.string(), .criu_path = with, .criu_options = {}});
  EXPECT_EQ(ck, "page-writers 16\n");
  EXPECT_EQ(rs, "restore-huge-pages\npage-readers 8\n");
  std::tie(ck, rs) = conf({.binary = runc.string(), .criu_path = with, .criu_options = {}, .page_writers = 3, .page_readers = 4});
  EXPECT_EQ(ck, "page-writers 3\n");
  EXPECT_EQ(rs, "restore-huge-pages\npage-readers 4\n");
  std::tie(ck, rs) = conf({.binary = runc.string(), .criu_path = with, .criu_options = {}, .page_readers = 1});
  EXPECT_EQ(rs, "restore-huge-pages\n") << "page_readers: 1";
  std::tie(ck, rs) = conf({.binary = runc.string(), .criu_path = first, .criu_options = {}});
  EXPECT_EQ(rs, "restore-huge-pages\n") << "a CRIU of the patch's first version";
  std::tie(ck, rs) = conf({.binary = runc.string(),
                           .criu_path = with,
                           .criu_options = {"link-remap"},
                           .page_writers = 0,
                           .restore_huge_pages = false,
                           .page_readers = 0});
  EXPECT_EQ(ck, "link-remap\n") << "page_writers: 0";
  EXPECT_EQ(rs, "link-remap\n") << "restore_huge_pages: false";
  std::tie(ck, rs) = conf({.binary = runc.string(), .criu_path = without, .criu_options = {"link-remap"}});
  EXPECT_EQ(ck, "link-remap\n") << "a CRIU without the patch";
  EXPECT_EQ(rs, "link-remap\n") << "a CRIU without the patch";
}

// A CRIU that takes --resumed-fifo gets "resumed-fifo PATH" on a leave-running checkpoint whose
// caller asks to hear of the early resume; the byte CRIU writes there calls on_resumed before the
// runtime's checkpoint returns. Not on an exit checkpoint, nor with resume_before_write: false.
TEST_F(RuntimeTest, ResumedFifoTellsTheCallerWhenCriuResumes) {
  auto runc = dir_ / "rf-runc";
  std::ofstream(runc) << "#!/bin/sh\ncase \"$1 $2\" in \"--version \"|\"features \"|\"checkpoint --help\") exit 0;; esac\n"
                      << "f=$(sed -n 's/^resumed-fifo //p' \"$CRIU_CONFIG_FILE\")\n"
                      << "[ -n \"$f\" ] && printf r > \"$f\"\nexit 0\n";
  ::chmod(runc.c_str(), 0755);
  auto criu = dir_ / "rf-criu";
  std::ofstream(criu)
      << "#!/bin/sh\ncase $1 in --version) echo 'Version: 4.2.1';; --help) echo '  --page-writers N      x'; "
         "echo '  --restore-huge-pages  x'; echo '  --page-readers N      x'; echo '  --resumed-fifo FIFO   x';; esac\n";
  ::chmod(criu.c_str(), 0755);
  auto run = [&](bool resume_before_write, bool leave_running, bool ask) {
    Runtime rt(
        {.binary = runc.string(), .criu_path = criu.string(), .criu_options = {}, .resume_before_write = resume_before_write},
        runner_, log_, dir_ / "log.json");
    std::filesystem::remove_all(dir_ / "rw");
    int calls = 0;
    CheckpointFlags f{.leave_running = leave_running, .image_path = "/img", .work_path = (dir_ / "rw").string()};
    if (ask) f.on_resumed = [&] { ++calls; };
    rt.checkpoint("c1", f);
    return std::pair{read_file(dir_ / "rw" / "nvproxy-criu.conf"), calls};
  };
  auto [conf, calls] = run(true, true, true);
  EXPECT_EQ(conf, "page-writers 16\nresumed-fifo " + (dir_ / "rw" / "nvproxy-resumed.fifo").string() + "\n");
  EXPECT_EQ(calls, 1);
  EXPECT_FALSE(std::filesystem::exists(dir_ / "rw" / "nvproxy-resumed.fifo")) << "the FIFO is removed after the call";
  std::tie(conf, calls) = run(false, true, true);
  EXPECT_EQ(conf, "page-writers 16\n") << "resume_before_write: false";
  EXPECT_EQ(calls, 0);
  std::tie(conf, calls) = run(true, false, true);
  EXPECT_EQ(conf, "page-writers 16\n") << "an exit checkpoint";
  std::tie(conf, calls) = run(true, true, false);
  EXPECT_EQ(conf, "page-writers 16\n") << "nobody asked";
}

// A CRIU that also takes --write-gate gets "write-gate PATH": the gate's byte comes only after
// on_resumed has returned (CUDA back), before the runtime's checkpoint returns. Not with
// write_after_cuda_resume: false.
TEST_F(RuntimeTest, WriteGateOpensAfterTheCallerResumed) {
  auto runc = dir_ / "wg-runc";
  // CRIU's order: the byte into resumed-fifo, then wait for the gate, then "write" (the marker).
  std::ofstream(runc) << "#!/bin/sh\ncase \"$1 $2\" in \"--version \"|\"features \"|\"checkpoint --help\") exit 0;; esac\n"
                      << "f=$(sed -n 's/^resumed-fifo //p' \"$CRIU_CONFIG_FILE\")\n"
                      << "g=$(sed -n 's/^write-gate //p' \"$CRIU_CONFIG_FILE\")\n"
                      << "d=$(dirname \"$CRIU_CONFIG_FILE\")\n"
                      << "[ -n \"$f\" ] && printf r > \"$f\"\n"
                      << "[ -n \"$g\" ] && b=$(head -c1 \"$g\") && printf %s \"$b\" > \"$d/gate-byte\"\nexit 0\n";
  ::chmod(runc.c_str(), 0755);
  auto criu = dir_ / "wg-criu";
  std::ofstream(criu) << "#!/bin/sh\ncase $1 in --version) echo 'Version: 4.2.1';; --help) echo '  --page-writers N      x'; "
                         "echo '  --restore-huge-pages  x'; echo '  --page-readers N      x'; echo '  --resumed-fifo FIFO   x'; "
                         "echo '  --write-gate FIFO     x';; esac\n";
  ::chmod(criu.c_str(), 0755);
  auto run = [&](bool gate) {
    Runtime rt({.binary = runc.string(), .criu_path = criu.string(), .criu_options = {}, .write_after_cuda_resume = gate},
               runner_, log_, dir_ / "log.json");
    std::filesystem::remove_all(dir_ / "rw");
    bool byte_before = true;
    CheckpointFlags f{.leave_running = true, .image_path = "/img", .work_path = (dir_ / "rw").string()};
    f.on_resumed = [&] { byte_before = std::filesystem::exists(dir_ / "rw" / "gate-byte"); };
    rt.checkpoint("c1", f);
    return std::tuple{
        read_file(dir_ / "rw" / "nvproxy-criu.conf"), byte_before,
        std::filesystem::exists(dir_ / "rw" / "gate-byte") ? read_file(dir_ / "rw" / "gate-byte") : std::string("none")};
  };
  auto [conf, before, byte] = run(true);
  const auto rw = dir_ / "rw";
  EXPECT_EQ(conf, "page-writers 16\nresumed-fifo " + (rw / "nvproxy-resumed.fifo").string() + "\nwrite-gate " +
                      (rw / "nvproxy-write-gate.fifo").string() + "\n");
  EXPECT_FALSE(before) << "CRIU was let write before CUDA was back";
  EXPECT_EQ(byte, "w");
  EXPECT_FALSE(std::filesystem::exists(rw / "nvproxy-write-gate.fifo")) << "the gate is removed after the call";
  std::tie(conf, before, byte) = run(false);
  EXPECT_EQ(conf, "page-writers 16\nresumed-fifo " + (rw / "nvproxy-resumed.fifo").string() + "\n")
      << "write_after_cuda_resume: false";
}

// CRIU gets checkpoint.criu_options through $CRIU_CONFIG_FILE (read by `criu swrk` as runc and
// crun start it), written into the work path, for checkpoint and restore; runsc gets none.
TEST_F(RuntimeTest, CriuOptionsReachCriuThroughItsConfigFile) {
  auto script = dir_ / "env-runc";
  std::ofstream(script) << "#!/bin/sh\ncase \"$1 $2\" in \"--version \"|\"features \"|\"checkpoint --help\") exit 0;; esac\n"
                        << "echo \"${CRIU_CONFIG_FILE:-none}\" >> " << (dir_ / "env").string() << "\n";
  ::chmod(script.c_str(), 0755);
  auto work = dir_ / "cw";
  Runtime rt({.binary = script.string(), .page_writers = 0, .restore_huge_pages = false, .page_readers = 0}, runner_, log_,
             dir_ / "log.json");
  rt.checkpoint("c1", {.leave_running = true, .image_path = "/img", .work_path = work.string()});
  EXPECT_EQ(read_file(dir_ / "env"), (work / "nvproxy-criu.conf").string() + "\n");
  EXPECT_EQ(read_file(work / "nvproxy-criu.conf"), "link-remap\nghost-limit 1G\n");
  std::filesystem::remove_all(work);
  rt.restore("c1", {.bundle = dir_, .image_path = "/img", .work_path = work, .pid_file = dir_ / "pid"});
  EXPECT_EQ(read_file(work / "nvproxy-criu.conf"), "link-remap\nghost-limit 1G\n") << "restore creates the work path";

  std::filesystem::remove(dir_ / "env");
  Runtime none({.binary = script.string(), .criu_options = {}, .page_writers = 0, .restore_huge_pages = false, .page_readers = 0},
               runner_, log_, dir_ / "log.json");
  none.checkpoint("c1", {.image_path = "/img", .work_path = (dir_ / "w2").string()});
  EXPECT_EQ(read_file(dir_ / "env"), "none\n") << "checkpoint.criu_options: [] passes none";
  EXPECT_FALSE(std::filesystem::exists(dir_ / "w2" / "nvproxy-criu.conf"));

  auto runsc = dir_ / "runsc";
  std::filesystem::copy_file(script, runsc);
  std::filesystem::remove(dir_ / "env");
  Runtime gv({.binary = runsc.string()}, runner_, log_, dir_ / "log.json");
  gv.checkpoint("c1", {.image_path = "/img", .work_path = (dir_ / "w3").string()});
  EXPECT_EQ(read_file(dir_ / "env"), "none\n") << "runsc has no CRIU";
}

// runsc restores with --direct where its pages file is mostly not in the page cache, buffered where
// it is (just written), and never with runsc_direct_restore: false.
TEST_F(RuntimeTest, RunscReadsAColdPagesFileDirect) {
  auto runsc = dir_ / "runsc";
  std::ofstream(runsc) << "#!/bin/sh\ncase \"$1 $2\" in \"--version \"|\"features \") exit 0;; esac\n"
                       << "echo \"$*\" >> " << (dir_ / "args").string() << "\n";
  ::chmod(runsc.c_str(), 0755);
  // On the disk: a tmpfs keeps its pages in the cache.
  auto img = std::filesystem::path("/var/tmp") / ("nvproxy-runsc-direct-" + std::to_string(::getpid()));
  std::filesystem::create_directories(img);
  std::ofstream(img / "pages.img") << std::string(4 << 20, 'p');
  if (!page_cache_share(img / "pages.img")) {
    std::filesystem::remove_all(img);
    GTEST_SKIP() << "this kernel has no cachestat(2)";
  }
  auto restore_args = [&](bool direct) {
    std::filesystem::remove(dir_ / "args");
    Runtime rt({.binary = runsc.string(), .runsc_direct_restore = direct}, runner_, log_, dir_ / "log.json");
    rt.restore("c1", {.bundle = dir_, .image_path = img, .pid_file = dir_ / "pid"});
    return read_file(dir_ / "args");
  };
  EXPECT_EQ(restore_args(true).find("--direct"), std::string::npos) << "a pages file just written";
  int fd = ::open((img / "pages.img").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
  EXPECT_NE(restore_args(true).find("restore --detach"), std::string::npos);
  EXPECT_NE(restore_args(true).find("--direct"), std::string::npos) << "a pages file out of the cache";
  EXPECT_EQ(restore_args(false).find("--direct"), std::string::npos) << "runsc_direct_restore: false";
  std::filesystem::remove_all(img);
}

TEST(CriuOptions, ConfigTextAndHints) {
  EXPECT_EQ(criu_config_text({"--link-remap", "ghost-limit 1G"}), "link-remap\nghost-limit 1G\n");
  EXPECT_THROW(criu_config_text({" "}), Error);
  EXPECT_THROW(criu_config_text({"a\nb"}), Error);
  EXPECT_NE(criu_option_hint("Error (criu/files-reg.c:1287): Can't create link remap for /dev/shm/sem.x. Use link-remap option.")
                .find("add \"link-remap\" to checkpoint.criu_options"),
            std::string::npos);
  EXPECT_NE(criu_option_hint("Error (criu/files-reg.c:960): Can't dump ghost file /dev/shm/x of 5242880 size, increase limit")
                .find("ghost-limit"),
            std::string::npos);
  EXPECT_EQ(criu_option_hint("Error (criu/cr-dump.c:2000): Dumping FAILED."), "");
  // The second replica of one image on the host's network: "unix: Can't bind ... Address already in use".
  EXPECT_NE(criu_option_hint("Error (criu/sk-unix.c:1806): unix: Can't bind socket (id 0x1f, name @torch-elastic): "
                             "Address already in use")
                .find("its own network namespace"),
            std::string::npos);
}

// A runtime binary that cannot be run is not "no such container": containerd would take the
// container for gone and its Delete would leave it running.
TEST_F(RuntimeTest, AMissingRuntimeBinaryIsNotNotFound) {
  Runtime rt({.binary = (dir_ / "runsc").string()}, runner_, log_, dir_ / "log.json");
  try {
    rt.kill("c1", 9, false);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Code::FailedPrecondition);
    std::string m = e.what();
    EXPECT_NE(m.find("runsc kill of container \"c1\": cannot run the runtime: program \"" + (dir_ / "runsc").string()),
              std::string::npos)
        << m;
  }
}
