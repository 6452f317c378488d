// Whose code a file is: the user's, or Python's, an installed package's or
// the system's. The one rule for every reader that looks past library frames
// for the user's own: a hang's culprit (agent/hang/culprit.h), a traceback's
// innermost user frame (agent/forensics/python_traceback.h), a crash's frame
// (agent/forensics/death.cc).
#pragma once

#include <string_view>

namespace cxxrun::agent {

// A Python source file of Python's own or an installed package's:
// site-packages, dist-packages, the standard library (".../lib/python3.11/"),
// "<frozen ...>". Not "<string>" or "<stdin>": the user's code.
bool python_library_file(std::string_view file);

// Any source file or module (a stack frame's): a Python library's as above,
// or under the system's directories (/usr/lib/, /lib64/, the multiarch
// /lib/<triplet>/ ones, /usr/include/). Empty (a frame without one) is a
// library's too: nothing of the user's can be shown for it.
bool library_file(std::string_view file);

}  // namespace cxxrun::agent
