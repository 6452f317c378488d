#include "agent/forensics/killer.h"

namespace cxxrun::agent {

std::string_view killer_name(Killer k) {
  switch (k) {
    case Killer::hang: return "the hang watchdog";
    case Killer::file_timer: return "torch's file timer";
    case Killer::grace: return "the shutdown grace";
    case Killer::fault_injection: return "fault injection";
    case Killer::none: break;
  }
  return "nobody";
}

std::string_view killer_id(Killer k) {
  switch (k) {
    case Killer::hang: return "hang";
    case Killer::file_timer: return "file-timer";
    case Killer::grace: return "grace";
    case Killer::fault_injection: return "fault-injection";
    case Killer::none: break;
  }
  return "";
}

Killer killer_from_id(std::string_view id) {
  for (Killer k : {Killer::hang, Killer::file_timer, Killer::grace, Killer::fault_injection})
    if (id == killer_id(k)) return k;
  return Killer::none;
}

}  // namespace cxxrun::agent
