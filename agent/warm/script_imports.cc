#include "agent/warm/script_imports.h"

#include <cctype>
#include <fstream>

namespace cxxrun::agent {
namespace {

bool blank(char c) { return c == ' ' || c == '\t' || c == '\f' || c == '\r'; }

bool dotted_name(std::string_view s) {
  if (s.empty()) return false;
  bool start = true;
  for (char c : s) {
    if (c == '.') {
      if (start) return false;
      start = true;
    } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_' ||
               (!start && std::isdigit(static_cast<unsigned char>(c)))) {
      start = false;
    } else {
      return false;
    }
  }
  return !start;
}

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && blank(s.back())) s.remove_suffix(1);
  return s;
}

std::string_view first_word(std::string_view s) {
  s = trimmed(s);
  size_t end = 0;
  while (end < s.size() && !blank(s[end]) && s[end] != '(') ++end;
  return s.substr(0, end);
}

// `word` then a blank: the rest; nullopt otherwise.
std::optional<std::string_view> after_keyword(std::string_view statement, std::string_view word) {
  if (statement.substr(0, word.size()) != word || statement.size() == word.size() || !blank(statement[word.size()]))
    return std::nullopt;
  return statement.substr(word.size());
}

// One logical line at column 0, strings and comments already left out.
void parse(std::string_view code, int line, std::vector<ScriptImport>& out) {
  while (!code.empty()) {
    const size_t semicolon = code.find(';');
    const std::string_view statement = trimmed(code.substr(0, semicolon));
    code = semicolon == std::string_view::npos ? std::string_view() : code.substr(semicolon + 1);
    if (auto names = after_keyword(statement, "import")) {
      while (!names->empty()) {
        const size_t comma = names->find(',');
        const std::string_view name = first_word(names->substr(0, comma));  // "a.b as c": a.b
        if (dotted_name(name)) out.push_back({std::string(name), line});
        *names = comma == std::string_view::npos ? std::string_view() : names->substr(comma + 1);
      }
    } else if (auto rest = after_keyword(statement, "from")) {
      const std::string_view name = first_word(*rest);
      if (dotted_name(name)) out.push_back({std::string(name), line});  // ".x", "." : relative, not a name
    }
  }
}

// From the opening quote at `i` to just past the closing one, counting the
// lines it spans. An unterminated one-line string ends at its line's end.
size_t skip_string(std::string_view s, size_t i, int& line) {
  const char q = s[i];
  const bool triple = s.substr(i, 3) == std::string(3, q);
  size_t j = i + (triple ? 3 : 1);
  while (j < s.size()) {
    const char c = s[j];
    if (c == '\\') {
      if (j + 1 < s.size() && s[j + 1] == '\n') ++line;
      j += 2;
    } else if (triple ? s.substr(j, 3) == std::string(3, q) : c == q) {
      return j + (triple ? 3 : 1);
    } else if (c == '\n') {
      if (!triple) return j;
      ++line;
      ++j;
    } else {
      ++j;
    }
  }
  return s.size();
}

}  // namespace

std::vector<ScriptImport> top_level_imports(std::string_view s) {
  std::vector<ScriptImport> out;
  std::string code;  // the logical line so far, without its strings and comments
  int line = 1;
  int start_line = 1;
  bool fresh = true;  // the next character starts a logical line
  bool top = false;   // the logical line starts at column 0
  int depth = 0;      // open brackets: the line goes on
  auto finish = [&] {
    if (top) parse(code, start_line, out);
    code.clear();
    fresh = true;
  };
  size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (fresh) {
      start_line = line;
      top = !blank(c);
      fresh = false;
    }
    if (c == '#') {
      while (i < s.size() && s[i] != '\n') ++i;
    } else if (c == '\'' || c == '"') {
      i = skip_string(s, i, line);
      code += "\"\"";
    } else if (c == '\\' && s.substr(i + 1, 1) == "\n") {
      code += ' ';
      i += 2;
      ++line;
    } else if (c == '\\' && s.substr(i + 1, 2) == "\r\n") {
      code += ' ';
      i += 3;
      ++line;
    } else if (c == '\n') {
      ++line;
      ++i;
      if (depth == 0) finish();
      else code += ' ';
    } else {
      if (c == '(' || c == '[' || c == '{') ++depth;
      if ((c == ')' || c == ']' || c == '}') && depth > 0) --depth;
      code += c;
      ++i;
    }
  }
  finish();
  return out;
}

std::optional<std::string> read_script(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string text(kMaxScriptBytes, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (in.bad() || text.find('\0') != std::string::npos) return std::nullopt;
  return text;
}

}  // namespace cxxrun::agent
