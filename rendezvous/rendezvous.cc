#include "rendezvous/rendezvous.h"

#include "rendezvous/round_completion.h"

namespace cxxrun::rendezvous {

std::string_view to_string(RoundEvent e) {
  switch (e) {
    case RoundEvent::none: return "";
    case RoundEvent::abort: return "abort";
    case RoundEvent::join: return "join";
    case RoundEvent::dead: return "dead";
    case RoundEvent::done: return "done";
  }
  return "";
}

RoundEvent parse_round_event(std::string_view text) {
  for (RoundEvent e : {RoundEvent::abort, RoundEvent::join, RoundEvent::dead, RoundEvent::done})
    if (text == to_string(e)) return e;
  return RoundEvent::none;
}

std::string too_few_alive(const RendezvousSettings& s, int alive) {
  return "only " + std::to_string(alive) + (alive == 1 ? " node" : " nodes") + " of job " + s.run_id +
         (alive == 1 ? " is" : " are") + " alive, fewer than the minimum of " + std::to_string(s.min_nodes) +
         " (--nnodes=" + nnodes_text(s.min_nodes, s.max_nodes) + "); stopping";
}

}  // namespace cxxrun::rendezvous
