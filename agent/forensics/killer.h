// Which part of cxxrun ended a worker, kept on its Failure record
// (agent/forensics/failure.h) and weighed by agent/forensics/death.h.
#pragma once

#include <string_view>

namespace cxxrun::agent {

// Which part of cxxrun killed a worker, when it did.
enum class Killer {
  none,
  hang,             // the hang watchdog: heartbeat or section timeout
  file_timer,       // a torch file-timer scope expired (the worker asked for it)
  grace,            // it ignored the stop signal for the whole shutdown grace
  fault_injection,  // --inject-fault
};

// "hang", "file-timer", "grace", "fault-injection": how a failure record
// names the killer for other nodes; an unknown id reads Killer::none.
std::string_view killer_id(Killer k);
Killer killer_from_id(std::string_view id);

// "the hang watchdog", "torch's file timer", ...
std::string_view killer_name(Killer k);

}  // namespace cxxrun::agent
