// --tty auto|always|never and CXXRUN_TTY.
#include "options_fixture.h"

using cxxrun::agent::Tty;

namespace {

Tty tty_of(std::vector<std::string> args, const Env& env = base_env()) {
  args.push_back(kProg);
  return run(args, env).config.tty;
}

}  // namespace

TEST_CASE("tty option: auto unless told otherwise") {
  CHECK(tty_of({}) == Tty::auto_);
  CHECK(tty_of({"--tty=auto"}) == Tty::auto_);
  CHECK(tty_of({"--tty=always"}) == Tty::always);
  CHECK(tty_of({"--tty", "never"}) == Tty::never);
  CHECK(tty_of({"--tty=always", "--tty=never"}) == Tty::never);  // the last one wins
}

TEST_CASE("tty option: CXXRUN_TTY stands in for --tty, which wins") {
  CHECK(tty_of({}, with("CXXRUN_TTY", "always")) == Tty::always);
  CHECK(tty_of({}, with("CXXRUN_TTY", "never")) == Tty::never);
  CHECK(tty_of({"--tty=auto"}, with("CXXRUN_TTY", "never")) == Tty::auto_);
  // cxxrun's own option: torchrun's PET_ names do not reach it.
  CHECK(tty_of({}, with("PET_TTY", "never")) == Tty::auto_);
}

TEST_CASE("tty option: a bad value is refused by name, with the choices") {
  CHECK_THAT(refusal({"--tty=sometimes"}),
             Contains("--tty=sometimes: invalid choice (choose from auto, always, never)"));
  CHECK_THAT(refusal({"--tty="}), Contains("--tty=: invalid choice"));
  CHECK_THAT(refusal({"--tty=ALWAYS"}), Contains("--tty=ALWAYS: invalid choice"));
  CHECK_THAT(refusal({}, with("CXXRUN_TTY", "yes")),
             Contains("CXXRUN_TTY=yes: invalid choice (choose from auto, always, never)"));
}

TEST_CASE("tty option: in --help") {
  std::string help = help_text();
  CHECK_THAT(help, Contains("--tty {auto,always,never}"));
  CHECK_THAT(help, Contains("CXXRUN_TTY"));
}
