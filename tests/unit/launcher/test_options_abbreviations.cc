// argparse's allow_abbrev: expand_abbreviations against a small table of its
// own (so each case shows the rule, not today's option list), then through
// parse() with the real one.
#include "launcher/abbreviations.h"

#include "options_fixture.h"

namespace {

using enum EnvFallback;
using enum Group;
using Args = std::vector<std::string>;

constexpr OptionSpec kTable[] = {
    {"-h,--help", "", nullptr, none, general, ""},
    {"--nproc-per-node,--nproc_per_node", "N", "1", value, workers, ""},
    {"--rdzv-backend,--rdzv_backend", "B", "static", value, rendezvous, ""},
    {"--rdzv-endpoint,--rdzv_endpoint", "E", "", value, rendezvous, ""},
    {"--standalone", "", nullptr, flag, rendezvous, ""},
    {"--role", "ROLE", "default", value, launch, ""},
    {"-m,--module", "", nullptr, flag, launch, ""},
    {"-r,--redirects", "R", "0", value, logging, ""},
    // "--log" is whole here and also a prefix of the next two.
    {"--log", "", nullptr, flag, logging, ""},
    {"--log-dir,--log_dir", "DIR", nullptr, value, logging, ""},
    {"--logs-specs,--logs_specs", "S", nullptr, none, logging, ""},
    {"--opt-value", "{a,b}", nullptr, value, extensions, "", false, "a"},
};

Args expand(const Args& args) { return expand_abbreviations(args, kTable); }

std::string refused(const Args& args) {
  try {
    expand(args);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "<accepted>";
}

}  // namespace

TEST_CASE("abbreviations: a unique prefix is spelled out, its value kept") {
  struct Case {
    Args in, out;
  };
  const Case cases[] = {
      {{"--nproc=2", "x"}, {"--nproc-per-node=2", "x"}},       // '=' form
      {{"--nproc", "2", "x"}, {"--nproc-per-node", "2", "x"}},  // separate value
      {{"--n=2", "x"}, {"--nproc-per-node=2", "x"}},
      // Both spellings: the one being written is the one written out, and the
      // two spellings of one option are one candidate, not an ambiguity.
      {{"--nproc_p=2", "x"}, {"--nproc_per_node=2", "x"}},
      {{"--nproc-p", "2", "x"}, {"--nproc-per-node", "2", "x"}},
      {{"--rdzv-b=c10d", "--rdzv_e", "h:1", "x"},
       {"--rdzv-backend=c10d", "--rdzv_endpoint", "h:1", "x"}},
      {{"--redirect=3", "x"}, {"--redirects=3", "x"}},  // PyTorch's own launcher test
      {{"--log_d=", "x"}, {"--log_dir=", "x"}},          // an empty value stays empty
      {{"--nproc=a=b", "x"}, {"--nproc-per-node=a=b", "x"}},
      // Flags take no next word; a value after '=' is left for the parser to refuse.
      {{"--stand", "--nproc=2", "x"}, {"--standalone", "--nproc-per-node=2", "x"}},
      {{"--stand=1", "x"}, {"--standalone=1", "x"}},
      {{"--mod", "x"}, {"--module", "x"}},
      {{"--he"}, {"--help"}},
      // An optional value only ever comes after '='.
      {{"--opt", "--nproc=2", "x"}, {"--opt-value", "--nproc-per-node=2", "x"}},
      {{"--opt=b", "x"}, {"--opt-value=b", "x"}},
  };
  for (const Case& c : cases) {
    CAPTURE(c.in);
    CHECK(expand(c.in) == c.out);
  }
}

TEST_CASE("abbreviations: a whole name wins over the options it is a prefix of") {
  CHECK(expand({"--log", "x"}) == Args{"--log", "x"});
  CHECK(expand({"--log=1", "x"}) == Args{"--log=1", "x"});
  CHECK(expand({"--role", "r", "x"}) == Args{"--role", "r", "x"});
  CHECK(expand({"--log-d=/l", "x"}) == Args{"--log-dir=/l", "x"});
  CHECK_THAT(refused({"--lo", "x"}),
             Contains("ambiguous option: --lo could match --log, --log-dir, --logs-specs"));
}

TEST_CASE("abbreviations: a prefix of several options is refused, naming each once") {
  CHECK(refused({"--r=1", "x"}) ==
        "ambiguous option: --r could match --rdzv-backend, --rdzv-endpoint, --role, --redirects "
        "(an abbreviation must match one option only)");
  CHECK(refused({"--rdzv", "c10d", "x"}) ==
        "ambiguous option: --rdzv could match --rdzv-backend, --rdzv-endpoint "
        "(an abbreviation must match one option only)");
  // Named as the user spells them.
  CHECK_THAT(refused({"--rdzv_", "x"}), Contains("could match --rdzv_backend, --rdzv_endpoint ("));
  CHECK_THAT(refused({"--stand", "--r", "x"}), Contains("ambiguous option: --r could"));
}

TEST_CASE("abbreviations: the program's words and option values are never touched") {
  const Args untouched[] = {
      {"x", "--nproc=2", "--r", "--stand"},  // everything after the program
      {"--nproc-per-node=2", "x", "--nproc", "3", "--r=1"},
      {"--", "--nproc=2", "x"},              // "--" ends the options
      {"-", "--nproc=2"},                    // "-" is a program name
      {"--role", "--nproc", "x"},            // a value in the next word, whatever it looks like
      {"--nproc-per-node", "--r", "x"},
      {"-r", "--nproc", "x"},                // a short option's value
      {"--foo", "x"},                        // no such option: the parser says so
      {"--nproc-per-nodes=2", "x"},          // not a prefix either
      {"--=2", "x"},
  };
  for (const Args& args : untouched) {
    CAPTURE(args);
    CHECK(expand(args) == args);
  }
  CHECK(expand({"--stand", "--", "--nproc"}) == Args{"--standalone", "--", "--nproc"});
  CHECK(expand({"--ro", "--nproc", "x"}) == Args{"--role", "--nproc", "x"});
}

TEST_CASE("abbreviations: short options may be bundled, as CLI11 and argparse read them") {
  CHECK(expand({"-mr", "3", "--nproc=2", "x"}) == Args{"-mr", "3", "--nproc-per-node=2", "x"});
  CHECK(expand({"-r3", "--nproc=2", "x"}) == Args{"-r3", "--nproc-per-node=2", "x"});
  CHECK(expand({"-r=3", "--nproc=2", "x"}) == Args{"-r=3", "--nproc-per-node=2", "x"});
  CHECK(expand({"-m", "--nproc=2", "x"}) == Args{"-m", "--nproc-per-node=2", "x"});
  CHECK(expand({"-rm", "--nproc", "x"}) == Args{"-rm", "--nproc-per-node", "x"});
}

TEST_CASE("abbreviations: every spelling of the real table names its own option") {
  for (const OptionSpec& spec : option_table())
    for (std::string_view spelling : spellings_of(spec)) {
      const Args args{std::string(spelling) + "=v", "x"};
      CAPTURE(args);
      CHECK(expand_abbreviations(args, option_table()) == args);
    }
}

TEST_CASE("abbreviations: parse() reads them as torchrun does") {
  CHECK(run({"--nproc=2", kProg}).config.nproc_per_node == 2);
  CHECK(run({"--nproc_per", "3", kProg}).config.nproc_per_node == 3);
  CHECK(run({"--redirect=3", kProg}).config.redirects.all == Std::all);
  CHECK(run({"--max-r=2", kProg}).config.max_restarts == 2);
  CHECK(run({"--max_r", "1", kProg}).config.max_restarts == 1);
  CHECK(run({"--stand", kProg}).config.rdzv.backend == cxxrun::rendezvous::Backend::local);
  CHECK(run({"--hel"}).help);
  CHECK_THAT(failure({"--he"}).message, Contains("--he could match --help, --health-port, "));
  // An exact name is never read as a prefix of a longer one.
  CHECK(run({"--role", "trainer", kProg}).config.role == "trainer");
  // The program's own options are its own, however they look.
  Parsed p = run({"--nproc=2", kProg, "--nproc=3", "--r"});
  CHECK(p.config.nproc_per_node == 2);
  CHECK(p.config.command == std::vector<std::string>{kProg, "--nproc=3", "--r"});

  std::string message = refusal({"--r=1"});
  CHECK_THAT(message, Contains("ambiguous option: --r could match --rdzv-backend, "));
  CHECK_THAT(message, Contains("--redirects"));
  CHECK_THAT(refusal({"--stand=1"}), Contains("--standalone is a flag and takes no value"));
  CHECK_THAT(help_text(), Contains("shortened to any prefix that names one option"));
}
