#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "agent/workers/filtered_log.h"
#include "agent/hostname.h"
#include "agent/workers/output.h"

using cxxrun::agent::FilteredLog;
using cxxrun::agent::line_prefix;
using cxxrun::agent::StreamSink;
using cxxrun::agent::this_hostname;

namespace {

struct OutputDir {
  std::filesystem::path path;
  OutputDir() {
    std::string t = (std::filesystem::temp_directory_path() / "cxxrun_output_XXXXXX").string();
    REQUIRE(mkdtemp(t.data()) != nullptr);
    path = t;
  }
  ~OutputDir() { std::filesystem::remove_all(path); }
};

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Captures what a sink writes to its console fd.
struct PipeCapture {
  int fds[2];
  PipeCapture() { REQUIRE(pipe2(fds, O_NONBLOCK) == 0); }
  ~PipeCapture() { close(fds[0]), close(fds[1]); }
  std::string read_all() {
    std::string out;
    char buf[4096];
    ssize_t n;
    while ((n = read(fds[0], buf, sizeof buf)) > 0) out.append(buf, n);
    return out;
  }
};

}  // namespace

TEST_CASE("line prefix follows torchrun's default and template") {
  CHECK(line_prefix("", {"default", 3, 7, 100, "h"}) == "[default3]:");
  CHECK(line_prefix("${role_name}/${rank}/${local_rank}: ", {"trainer", 1, 9, 100, "h"}) == "trainer/9/1: ");
}

TEST_CASE("line prefix names the pid and the host") {
  CHECK(line_prefix("${hostname}:${pid}|${rank}> ", {"default", 0, 5, 4242, "node-a"}) == "node-a:4242|5> ");
  CHECK(line_prefix("[${hostname}]", {"default", 0, 0, 1, this_hostname()}) == "[" + this_hostname() + "]");
}

TEST_CASE("filtered copies take whole matching lines of every sink, prefixed") {
  OutputDir dir;
  const std::string path = (dir.path / "filtered_stdout.log").string();
  {
    FilteredLog log({"loss", "a,b"}, path);
    StreamSink r0("[r0]:", -1, "", 0), r1("[r1]:", -1, "", 0);
    r0.duplicate_to(&log);
    r1.duplicate_to(&log);
    r0.write("step 1 lo");
    r1.write("loss=2\nnothing here\n");
    r0.write("ss=3\nx a,b y\nplain");
    r0.write(" loss at the end");
    r0.finish();
    r1.finish();
  }
  CHECK(read_file(path) == "[r1]:loss=2\n[r0]:step 1 loss=3\n[r0]:x a,b y\n[r0]:plain loss at the end\n");
}

TEST_CASE("sink prefixes whole lines and joins partial writes") {
  PipeCapture cap;
  StreamSink sink("[r0]:", cap.fds[1], "", 0);
  sink.write("hel");
  sink.write("lo\nwor");
  CHECK(cap.read_all() == "[r0]:hello\n");
  sink.write("ld\n\nlast");
  CHECK(cap.read_all() == "[r0]:world\n[r0]:\n");
  sink.finish();
  CHECK(cap.read_all() == "[r0]:last\n");
}

TEST_CASE("sink shows a progress bar's redraws at once, each with the prefix") {
  PipeCapture cap;
  StreamSink sink("[r0]:", cap.fds[1], "", 0);
  sink.write("step 1/3\r");
  CHECK(cap.read_all() == "[r0]:step 1/3\r");
  sink.write("step 2/3\rstep 3/3\rdone\n");
  CHECK(cap.read_all() == "[r0]:step 2/3\r[r0]:step 3/3\r[r0]:done\n");
}

TEST_CASE("sink shows a fragment when told the worker went quiet, and ends its line once") {
  PipeCapture cap;
  StreamSink sink("[r0]:", cap.fds[1], "", 3);
  sink.write("Password: ");
  CHECK(sink.has_pending());
  sink.flush_pending();
  CHECK(cap.read_all() == "[r0]:Password: ");
  CHECK_FALSE(sink.has_pending());
  sink.write("ok\nnext");
  CHECK(cap.read_all() == "ok\n");  // the line had its prefix already
  sink.flush_pending();
  sink.write(" more");
  sink.finish();
  CHECK(cap.read_all() == "[r0]:next more\n");
  // The failure summary's tail still gets whole lines.
  REQUIRE(sink.tail().size() == 2);
  CHECK(sink.tail()[0] == "Password: ok");
  CHECK(sink.tail()[1] == "next more");
}

TEST_CASE("sinks on one console keep their lines apart: a fragment is ended before another rank's line") {
  PipeCapture cap;
  StreamSink a("[r0]:", cap.fds[1], "", 0), b("[r1]:", cap.fds[1], "", 0);
  a.write("frag-A");
  a.flush_pending();  // quiet for a while
  b.write("line-B\n");
  a.write("-rest-of-A\n");
  // A redraw holds its line too: the other rank's text does not land on it.
  b.write("50%\r");
  a.write("x\n");
  b.write("100%\r");
  b.write("done\n");
  // A fragment left by a sink that is gone is ended as well.
  {
    StreamSink c("[r2]:", cap.fds[1], "", 0);
    c.write("prompt? ");
    c.flush_pending();
  }
  a.write("last\n");
  CHECK(cap.read_all() ==
        "[r0]:frag-A\n[r1]:line-B\n[r0]:-rest-of-A\n"
        "[r1]:50%\r\n[r0]:x\n[r1]:100%\r[r1]:done\n"
        "[r2]:prompt? \n[r0]:last\n");
  a.finish(), b.finish();
}

TEST_CASE("an observer gets every line without the prefix, a redraw's too, and the last fragment at the end") {
  StreamSink sink("[r0]:", -1, "", 0);
  std::vector<std::string> seen;
  sink.observe_lines([&seen](std::string_view line) { seen.emplace_back(line); });
  sink.write("step 1\nst");
  sink.write("ep 2\n10%\r20%\r");
  sink.write("done");
  CHECK(seen == std::vector<std::string>{"step 1", "step 2", "10%", "20%"});
  sink.finish();
  CHECK(seen.back() == "done");
}

TEST_CASE("sink keeps only the last N lines as its tail") {
  StreamSink sink("", -1, "", 2);
  sink.write("a\nb\nc\nd");
  sink.finish();
  REQUIRE(sink.tail().size() == 2);
  CHECK(sink.tail()[0] == "c");
  CHECK(sink.tail()[1] == "d");
}

TEST_CASE("sink writes raw bytes to its file without prefixes") {
  char tmpl[] = "/tmp/cxxrun_sink_XXXXXX";
  int fd = mkstemp(tmpl);
  REQUIRE(fd >= 0);
  close(fd);
  {
    StreamSink sink("[x]:", -1, tmpl, 0);
    sink.write("one\ntwo");
    sink.finish();
  }
  FILE* f = fopen(tmpl, "r");
  char buf[64] = {};
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  unlink(tmpl);
  CHECK(std::string(buf, n) == "one\ntwo");
}

TEST_CASE("sink counts what a full disk did not take, and goes on with the console and the tail") {
  // /dev/full: every write fails with ENOSPC, as on a full log disk.
  StreamSink sink("[r0]:", -1, "/dev/full", 2);
  sink.write("first line\n");
  sink.write("second line\n");
  CHECK(sink.lost_bytes() == std::string("first line\nsecond line\n").size());
  REQUIRE(sink.tail().size() == 2);
  CHECK(sink.tail().back() == "second line");
  sink.finish();
}
