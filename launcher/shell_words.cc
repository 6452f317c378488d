#include "launcher/shell_words.h"

#include <stdexcept>

namespace cxxrun::launcher {
namespace {

bool safe(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         std::string_view("_-./=:,+@%").find(c) != std::string_view::npos;
}

}  // namespace

std::string shell_quote(std::string_view word) {
  bool plain = !word.empty();
  for (char c : word) plain = plain && safe(c);
  if (plain) return std::string(word);
  std::string out = "'";
  for (char c : word) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

std::string shell_command(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) out += (out.empty() ? "" : " ") + shell_quote(w);
  return out;
}

std::vector<std::string> split_shell_words(std::string_view text) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
      continue;
    }
    in_word = true;
    if (c == '\'') {
      const size_t end = text.find('\'', i + 1);
      if (end == std::string_view::npos) throw std::invalid_argument("an unterminated ' quote");
      word.append(text.substr(i + 1, end - i - 1));
      i = end;
    } else if (c == '"') {
      size_t j = i + 1;
      for (; j < text.size() && text[j] != '"'; ++j) {
        if (text[j] == '\\' && j + 1 < text.size() &&
            std::string_view("$`\"\\\n").find(text[j + 1]) != std::string_view::npos) {
          if (text[j + 1] != '\n') word += text[j + 1];
          ++j;
        } else {
          word += text[j];
        }
      }
      if (j >= text.size()) throw std::invalid_argument("an unterminated \" quote");
      i = j;
    } else if (c == '\\') {
      if (i + 1 >= text.size()) throw std::invalid_argument("a trailing backslash");
      if (text[i + 1] != '\n') word += text[i + 1];
      ++i;
    } else {
      word += c;
    }
  }
  if (in_word) words.push_back(std::move(word));
  return words;
}

}  // namespace cxxrun::launcher
