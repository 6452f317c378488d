#include "launcher/fanout_plan.h"

#include "launcher/shell_words.h"

namespace cxxrun::launcher {

std::vector<std::string> rsh_argv(const FanoutPlan& plan, size_t i) {
  std::vector<std::string> argv = plan.rsh;
  argv.push_back(plan.hosts[i].login);
  for (const std::string& word : plan.commands[i]) argv.push_back(shell_quote(word));
  return argv;
}

}  // namespace cxxrun::launcher
