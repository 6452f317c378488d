#include "rendezvous/rendezvous.h"

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

}  // namespace cxxrun::rendezvous
