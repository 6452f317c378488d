#include "agent/verdict/history.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "agent/progress/attempt_record.h"

namespace cxxrun::agent {
namespace {

using nlohmann::json;

void put(json& j, const char* name, const std::optional<uint64_t>& v) {
  j[name] = v ? json(*v) : json(nullptr);
}

std::optional<uint64_t> step_at(const json& j, const char* name) {
  const auto it = j.find(name);
  if (it == j.end() || !it->is_number_unsigned()) return std::nullopt;
  return it->get<uint64_t>();
}

template <typename T>
T value_or(const json& j, const char* name, T fallback) {
  const auto it = j.find(name);
  if (it == j.end()) return fallback;
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    return fallback;
  }
}

std::optional<json> parse(const std::string& line) {
  json j = json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  return j;
}

}  // namespace

NodeOutcome outcome_of(const std::optional<AttemptRecord>& record) {
  NodeOutcome o;
  if (!record) return o;
  o.tracked = true;
  o.progress = record->first_progress.has_value();
  if (record->highest) o.step = record->highest->step;
  o.checkpoints = record->checkpoints;
  if (record->last_checkpoint) {
    o.checkpoint_step = record->last_checkpoint->step;
    o.checkpoint = record->last_checkpoint->name;
  }
  return o;
}

std::string to_json(const NodeOutcome& o) {
  json j = {{"tracked", o.tracked}, {"progress", o.progress}, {"checkpoints", o.checkpoints},
            {"checkpoint", o.checkpoint}};
  put(j, "step", o.step);
  put(j, "checkpoint_step", o.checkpoint_step);
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::optional<NodeOutcome> node_outcome_from_json(const std::string& line) {
  const auto j = parse(line);
  if (!j) return std::nullopt;
  NodeOutcome o;
  o.tracked = value_or(*j, "tracked", false);
  o.progress = value_or(*j, "progress", false);
  o.step = step_at(*j, "step");
  o.checkpoints = std::max(0, value_or(*j, "checkpoints", 0));
  o.checkpoint_step = step_at(*j, "checkpoint_step");
  o.checkpoint = value_or(*j, "checkpoint", std::string());
  return o;
}

NodeOutcome merge(const std::vector<NodeOutcome>& nodes) {
  NodeOutcome out;
  for (const NodeOutcome& n : nodes) {
    out.tracked = out.tracked || n.tracked;
    out.progress = out.progress || n.progress;
    if (n.step && (!out.step || *n.step > *out.step)) out.step = n.step;
    out.checkpoints += n.checkpoints;
    // The newest checkpoint is the one with the highest step; one without a
    // step stands only when none has one.
    if (n.checkpoints > 0 &&
        (out.checkpoint.empty() || (n.checkpoint_step && (!out.checkpoint_step || *n.checkpoint_step > *out.checkpoint_step)))) {
      out.checkpoint_step = n.checkpoint_step;
      out.checkpoint = n.checkpoint;
    }
  }
  return out;
}

std::string to_json(const History& h) {
  json j = {{"judged", h.judged}, {"round", h.round},     {"key", h.key},
            {"cause", h.cause},   {"oom", h.oom},         {"checkpoint", h.checkpoint},
            {"tracked", h.tracked}, {"repeats", h.repeats}, {"verdict", h.stop ? "stop" : "restart"},
            {"evidence", h.evidence}};
  put(j, "at_step", h.at_step);
  put(j, "best_step", h.best_step);
  put(j, "checkpoint_step", h.checkpoint_step);
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::optional<History> history_from_json(const std::string& line) {
  const auto j = parse(line);
  if (!j || !j->contains("judged")) return std::nullopt;
  History h;
  h.judged = std::max(0, value_or(*j, "judged", 0));
  h.round = value_or(*j, "round", -1);
  h.key = value_or(*j, "key", std::string());
  h.cause = value_or(*j, "cause", std::string());
  h.oom = value_or(*j, "oom", false);
  h.at_step = step_at(*j, "at_step");
  h.best_step = step_at(*j, "best_step");
  h.checkpoint_step = step_at(*j, "checkpoint_step");
  h.checkpoint = value_or(*j, "checkpoint", std::string());
  h.tracked = value_or(*j, "tracked", false);
  h.repeats = std::max(0, value_or(*j, "repeats", 0));
  h.stop = value_or(*j, "verdict", std::string()) == "stop";
  h.evidence = value_or(*j, "evidence", std::string());
  return h;
}

}  // namespace cxxrun::agent
