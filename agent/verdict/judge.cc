#include "agent/verdict/judge.h"

#include <charconv>
#include <sstream>

namespace cxxrun::agent {
namespace {

constexpr int kMaxBudget = 1000;

std::optional<int> budget_of(const std::string& text) {
  int n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || end != text.data() + text.size() || n < 1 || n > kMaxBudget) return std::nullopt;
  return n;
}

std::string step_text(uint64_t step) { return "step " + std::to_string(step); }

// What moved on in `now`, in words; "" when nothing did.
std::string advance(const History& before, const NodeOutcome& now) {
  if (now.step && (!before.best_step || *now.step > *before.best_step))
    return before.best_step ? "progress beyond " + step_text(*before.best_step) : "progress to " + step_text(*now.step);
  if (now.checkpoints > 0 &&
      (!now.checkpoint_step || !before.checkpoint_step || *now.checkpoint_step > *before.checkpoint_step))
    return "a new checkpoint (" + now.checkpoint + ")";
  if (now.progress && !now.step) return "progress that names no step";
  return "";
}

std::string ended_with(const History& h) {
  return h.cause + (h.at_step ? " at " + step_text(*h.at_step) : "");
}

std::string stop_evidence(const History& h) {
  std::string out = "not restarting: " + std::to_string(h.repeats) + " attempts in a row ended with " + ended_with(h) + "; ";
  if (h.best_step)
    out += "no progress beyond " + step_text(*h.best_step);
  else if (h.tracked)
    out += "no progress";
  else
    out += "no progress seen (no --progress-pattern, --checkpoint-dir or reported step)";
  if (h.checkpoint_step)
    out += " and no checkpoint since " + step_text(*h.checkpoint_step);
  else if (!h.checkpoint.empty())
    out += " and no checkpoint since " + h.checkpoint;
  else
    out += " and no checkpoint";
  return out;
}

}  // namespace

std::optional<std::string> parse_restart_policy(const std::string& text, RestartRule& rule) {
  RestartRule r;
  std::stringstream in(text);
  std::string part;
  bool first = true;
  bool any = false;
  while (std::getline(in, part, ',')) {
    any = true;
    if (first && (part == "progress" || part == "always")) {
      r.always = part == "always";
      first = false;
      continue;
    }
    first = false;
    const auto eq = part.find('=');
    const std::string name = part.substr(0, eq);
    if (r.always) return "'always' takes no budgets (it restarts up to --max-restarts whatever the cause)";
    if (eq == std::string::npos || (name != "same-cause" && name != "oom"))
      return "must be 'progress' or 'always', optionally followed by ,same-cause=N and ,oom=N (got '" + part + "')";
    const auto n = budget_of(part.substr(eq + 1));
    if (!n) return "'" + name + "' must be a whole number of attempts from 1 to 1000";
    (name == "oom" ? r.oom : r.same_cause) = *n;
  }
  if (!any || text.back() == ',')
    return "must be 'progress' or 'always', optionally followed by ,same-cause=N and ,oom=N";
  rule = r;
  return std::nullopt;
}

std::string describe(const RestartRule& rule) {
  if (rule.always) return "always";
  return "progress,same-cause=" + std::to_string(rule.same_cause) + ",oom=" + std::to_string(rule.oom);
}

History judge(const History& before, const JobOutcome& now, const RestartRule& rule, int round) {
  History h = before;
  h.judged = before.judged + 1;
  h.round = round;
  h.tracked = before.tracked || now.progress.tracked;
  const NodeOutcome& p = now.progress;
  const std::string moved = advance(before, p);
  const std::string key = now.root ? now.root->key() : "";
  const bool same = before.repeats > 0 && !key.empty() && key == before.key && p.step == before.at_step;

  h.key = key;
  h.cause = now.root ? now.root->text() : "a failure whose record could not be read";
  h.oom = now.root && now.root->cause == "oom-killed";
  h.at_step = p.step;
  if (p.step && (!h.best_step || *p.step > *h.best_step)) h.best_step = p.step;
  if (p.checkpoints > 0 && (!p.checkpoint_step || !h.checkpoint_step || *p.checkpoint_step > *h.checkpoint_step)) {
    h.checkpoint_step = p.checkpoint_step;
    h.checkpoint = p.checkpoint;
  }
  h.repeats = same && moved.empty() ? before.repeats + 1 : 1;

  const int budget = h.oom ? rule.oom : rule.same_cause;
  // Without a progress source a repeat cannot be told from a failure that
  // moves on, but an OOM kill under the same limit will come again.
  const bool judged = !rule.always && !key.empty() && (h.tracked || h.oom);
  h.stop = judged && h.repeats >= budget;
  if (h.stop) {
    h.evidence = stop_evidence(h);
  } else if (!judged) {
    h.evidence = "verdict: restart: " + ended_with(h) +
                 (rule.always ? " (--restart-policy=always)" : "; no progress source tells a repeat from progress");
  } else if (!moved.empty() && same) {
    h.evidence = "verdict: restart: " + ended_with(h) + " again, after " + moved;
  } else if (h.repeats == 1) {
    h.evidence = "verdict: restart: " + ended_with(h) + (before.repeats == 0 || same         ? ""
                                       : key == before.key ? ", at another step than the last attempt"
                                                           : ", a different cause from the last attempt") +
                 (moved.empty() ? "" : "; " + moved);
  } else {
    h.evidence = "verdict: restart: " + std::to_string(h.repeats) + " of " + std::to_string(budget) +
                 " attempts in a row ended with " + ended_with(h) + " without progress";
  }
  return h;
}

}  // namespace cxxrun::agent
