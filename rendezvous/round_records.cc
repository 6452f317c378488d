#include "rendezvous/round_records.h"

#include <sstream>
#include <stdexcept>

#include "rendezvous/rendezvous.h"
#include "rendezvous/round_completion.h"

namespace cxxrun::rendezvous {

std::string describe(const Member& m) {
  return m.addr + "|" + m.host + "|" + std::to_string(m.pid) + "|" + std::to_string(m.nproc) + "|" +
         std::to_string(m.order) + "|" + m.group;
}

Member parse_member(const std::string& text) {
  Member m;
  size_t a = text.find('|'), b = text.find('|', a + 1), c = text.find('|', b + 1), d = text.find('|', c + 1);
  if (a == std::string::npos || b == std::string::npos || c == std::string::npos || d == std::string::npos)
    throw RendezvousError("malformed member record in the rendezvous store: '" + text + "'");
  m.addr = text.substr(0, a);
  m.host = text.substr(a + 1, b - a - 1);
  try {
    m.pid = std::stol(text.substr(b + 1, c - b - 1));
    m.nproc = std::stoi(text.substr(c + 1, d - c - 1));
    const size_t e = text.find('|', d + 1);
    m.order = std::stoi(text.substr(d + 1, e == std::string::npos ? std::string::npos : e - d - 1));
    if (e != std::string::npos) m.group = text.substr(e + 1);
  } catch (const std::exception&) {
    throw RendezvousError("malformed member record in the rendezvous store: '" + text + "'");
  }
  return m;
}

std::string describe(const AssignmentRecord& a) {
  std::string out = std::to_string(a.group_rank) + "|" + std::to_string(a.base_rank) + "|" +
                    std::to_string(a.world_size) + "|" + a.alive;
  for (size_t i = 0; i < a.member_addrs.size(); ++i) out += (i == 0 ? "|" : ",") + a.member_addrs[i];
  return out;
}

AssignmentRecord parse_assignment(const std::string& text) {
  const auto a = text.find('|'), b = text.find('|', a + 1), c = text.find('|', b + 1);
  if (a == std::string::npos || b == std::string::npos || c == std::string::npos)
    throw RendezvousError("malformed assignment in the rendezvous store: '" + text + "'");
  AssignmentRecord out{to_int(text.substr(0, a), "assignment"), to_int(text.substr(a + 1, b - a - 1), "assignment"),
                       to_int(text.substr(b + 1, c - b - 1), "assignment"), text.substr(c + 1), {}};
  if (const auto d = text.find('|', c + 1); d != std::string::npos) {
    out.alive = text.substr(c + 1, d - c - 1);
    for (size_t at = d + 1;;) {
      const auto comma = text.find(',', at);
      out.member_addrs.push_back(text.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
      if (out.member_addrs.back().empty())
        throw RendezvousError("malformed assignment in the rendezvous store: an empty address in '" + text + "'");
      if (comma == std::string::npos) break;
      at = comma + 1;
    }
  }
  return out;
}

std::string describe(const JobConfig& c) { return c.nnodes + "|" + c.entrypoint; }

JobConfig parse_config(const std::string& text) {
  const auto bar = text.find('|');
  return {text.substr(0, bar), bar == std::string::npos ? "" : text.substr(bar + 1)};
}

std::string shown_nnodes(const std::string& min_max) {
  const auto colon = min_max.find(':');
  return colon != std::string::npos && min_max.substr(0, colon) == min_max.substr(colon + 1) ? min_max.substr(0, colon)
                                                                                              : min_max;
}

std::string describe(const RoundCompletionRecord& c) {
  return std::to_string(c.members) + "|" + std::to_string(c.assigner);
}

RoundCompletionRecord parse_completion(const std::string& text) {
  const auto bar = text.find('|');
  if (bar == std::string::npos)
    throw RendezvousError("malformed round completion in the rendezvous store: '" + text + "'");
  return {to_int(text.substr(0, bar), "member count"), to_int(text.substr(bar + 1), "completer slot")};
}

std::string describe_ranks(const std::vector<int>& slot_of_rank) {
  std::string out;
  for (size_t rank = 0; rank < slot_of_rank.size(); ++rank) out += (rank ? "," : "") + std::to_string(slot_of_rank[rank]);
  return out;
}

std::vector<int> parse_ranks(const std::string& text, int members) {
  std::vector<int> rank_of_slot(members, 0);
  int rank = 0;
  for (size_t pos = 0; pos <= text.size() && rank < members; ++rank) {
    size_t comma = text.find(',', pos);
    if (comma == std::string::npos) comma = text.size();
    rank_of_slot.at(to_int(text.substr(pos, comma - pos), "rank list")) = rank;
    pos = comma + 1;
  }
  return rank_of_slot;
}

std::vector<std::string> parse_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(line);
  return lines;
}

int to_int(const std::string& text, const std::string& what) {
  try {
    return std::stoi(text);
  } catch (const std::exception&) {
    throw RendezvousError("malformed " + what + " in the rendezvous store: '" + text + "'");
  }
}

JobConfig config_of(const RendezvousSettings& s) {
  return JobConfig{std::to_string(s.min_nodes) + ":" + std::to_string(s.max_nodes), s.entrypoint};
}

void check_config(const std::string& theirs, const RendezvousSettings& s) {
  const JobConfig mine = config_of(s);
  if (theirs == describe(mine)) return;
  if (theirs == kClosedConfig)
    throw RendezvousError("rendezvous '" + s.run_id + "' at " + s.endpoint +
                          " is closed: that job already finished; start a new job with another --rdzv-id");
  const JobConfig their = parse_config(theirs);
  if (their.nnodes != mine.nnodes)
    throw RendezvousError("--nnodes=" + nnodes_text(s.min_nodes, s.max_nodes) + " disagrees with --nnodes=" +
                          shown_nnodes(their.nnodes) + " of the nodes already in rendezvous '" + s.run_id + "'");
  throw RendezvousError("rendezvous id '" + s.run_id + "' is in use by another job (it runs " + their.entrypoint +
                        ", this node runs " + s.entrypoint + "); pick another --rdzv-id");
}

}  // namespace cxxrun::rendezvous
