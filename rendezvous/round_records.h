// The c10d rendezvous's records as they are written in the store: a
// member's descriptor ("addr|host|pid|nproc|order") and the numbers its keys
// hold. Text from the store is another node's writing: anything malformed
// is a RendezvousError naming the text, never a crash.
#pragma once

#include <string>

#include "rendezvous/c10d_rendezvous.h"

namespace cxxrun::rendezvous {

std::string describe(const Member& m);
Member parse_member(const std::string& text);
// `what` names the value in the error ("round number", "assignment").
int to_int(const std::string& text, const std::string& what);

}  // namespace cxxrun::rendezvous
