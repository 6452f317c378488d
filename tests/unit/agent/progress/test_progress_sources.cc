// What counts as progress and which step it names: a --progress-pattern
// match (agent/progress/progress_pattern.h) and a --checkpoint-dir entry
// (agent/progress/checkpoint_dir.h).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "agent/progress/checkpoint_dir.h"
#include "agent/progress/progress_pattern.h"
#include "temp_tree.h"

using namespace cxxrun::agent;

TEST_CASE("a pattern's first capture group is the step when it is a number", "[progress]") {
  ProgressPattern p(R"(step (\d+))");
  auto m = p.match("epoch 1 step 30 loss 0.5");
  REQUIRE(m);
  CHECK(m->step == 30u);
  CHECK_FALSE(p.match("loss 0.5"));
  CHECK_FALSE(p.match(""));
}

TEST_CASE("a match without a numeric capture is progress with no step", "[progress]") {
  CHECK(ProgressPattern("saved").match("checkpoint saved")->step == std::nullopt);
  CHECK(ProgressPattern(R"(step (\w+))").match("step thirty")->step == std::nullopt);
  // An optional group that did not take part names nothing.
  CHECK(ProgressPattern(R"(done(?: (\d+))?)").match("done")->step == std::nullopt);
  CHECK(ProgressPattern(R"(iter=(\d+))").match("iter=99999999999999999999999")->step == std::nullopt);
}

TEST_CASE("a step is a plain decimal number that fits in 64 bits", "[progress]") {
  CHECK(step_of_capture("0") == 0u);
  CHECK(step_of_capture("000300") == 300u);
  CHECK(step_of_capture("18446744073709551615") == 18446744073709551615ull);
  CHECK_FALSE(step_of_capture("18446744073709551616"));
  CHECK_FALSE(step_of_capture("-3"));
  CHECK_FALSE(step_of_capture("3.5"));
  CHECK_FALSE(step_of_capture(""));
}

TEST_CASE("an invalid pattern is refused with the reason", "[progress]") {
  CHECK_FALSE(check_progress_pattern(R"(step (\d+))"));
  const auto why = check_progress_pattern("step (");
  REQUIRE(why);
  CHECK_THAT(*why, Catch::Contains("not a valid regular expression"));
  CHECK(check_progress_pattern(""));
  CHECK_THROWS_AS(ProgressPattern("step ("), std::invalid_argument);
}

TEST_CASE("a checkpoint's step is the last number of its name, not its extension's", "[progress]") {
  CHECK(step_of_checkpoint_name("ckpt-000300.pt") == 300u);
  CHECK(step_of_checkpoint_name("step_30") == 30u);
  CHECK(step_of_checkpoint_name("model-300.h5") == 300u);
  CHECK(step_of_checkpoint_name("epoch3-step100.ckpt") == 100u);
  CHECK(step_of_checkpoint_name("checkpoint.300") == 300u);
  CHECK(step_of_checkpoint_name("global_step7") == 7u);
  CHECK_FALSE(step_of_checkpoint_name("model.pt"));
  CHECK_FALSE(step_of_checkpoint_name("latest"));
}

TEST_CASE("a checkpoint is an entry that appeared since the attempt began", "[progress]") {
  TempDir tmp;
  const std::string dir = tmp.path + "/ckpt";
  CheckpointDir watch(dir);
  watch.reset();  // the directory is not there yet: the job makes it
  CHECK(watch.poll().empty());
  std::filesystem::create_directories(dir + "/old");
  watch.reset();  // what was there at the start is not new
  std::ofstream(dir + "/ckpt-20.pt") << "x";
  std::filesystem::create_directories(dir + "/step_30");
  std::ofstream(dir + "/.ckpt-40.pt.tmp") << "x";  // not yet renamed into place
  auto found = watch.poll();
  REQUIRE(found.size() == 2);
  CHECK(found[0].name == "ckpt-20.pt");
  CHECK(found[0].step == 20u);
  CHECK(found[1].name == "step_30");
  CHECK(found[1].step == 30u);
  CHECK(watch.poll().empty());  // each is new once
}

TEST_CASE("a checkpoint's time is when it was written, not when a poll saw it", "[progress]") {
  TempDir tmp;
  CheckpointDir watch(tmp.path);
  watch.reset();
  const std::string file = tmp.path + "/ckpt-20.pt";
  std::ofstream(file) << "x";
  // Written 5 s before the poll that finds it (a crash came before the
  // next poll, say).
  const auto five_ago = std::filesystem::file_time_type::clock::now() - std::chrono::seconds(5);
  std::filesystem::last_write_time(file, five_ago);
  const auto found = watch.poll();
  REQUIRE(found.size() == 1);
  REQUIRE(found[0].written);
  const auto age = std::chrono::system_clock::now() - *found[0].written;
  CHECK(age > std::chrono::seconds(4));
  CHECK(age < std::chrono::seconds(60));
}
