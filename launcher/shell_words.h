// Words through a shell and back. ssh joins the remote command's words with
// spaces and the remote user's shell splits them again, so every word the
// launcher sends is quoted for that shell (shell_quote); --rsh is one string
// that the launcher splits as a shell would (split_shell_words), as rsync
// does its --rsh.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace cxxrun::launcher {

// A POSIX shell reads the result as exactly `word`: single quotes, each '
// written as '\''; a word of only safe characters stays as it is.
std::string shell_quote(std::string_view word);
// The words quoted and joined by spaces: one command line for `sh -c`.
std::string shell_command(const std::vector<std::string>& words);

// Splits like sh: blanks separate words; '...' is literal; "..." keeps
// blanks, with \ escaping $ ` " \ and newline; a bare \ escapes the next
// character. No expansion of any kind. Throws std::invalid_argument naming
// an unterminated quote or a trailing backslash.
std::vector<std::string> split_shell_words(std::string_view text);

}  // namespace cxxrun::launcher
