// Text made at compile time from the constants it names, so that the option
// table's help and defaults cite a default (a port, a grace) from its one
// home instead of repeating its digits: text<"port ", decimal<29400>, "">.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>

namespace cxxrun::launcher::static_text {

// A string literal as a value a template can take.
template <size_t N>
struct Lit {
  char s[N]{};
  constexpr Lit(const char (&in)[N]) { std::copy_n(in, N, s); }
  constexpr Lit() = default;
  static constexpr size_t size = N - 1;  // without the '\0'
};

constexpr size_t digits(long long v) {
  size_t n = 1;
  for (; v >= 10; v /= 10) ++n;
  return n;
}

// The decimal digits of a non-negative V.
template <long long V>
constexpr Lit<digits(V) + 1> decimal() {
  static_assert(V >= 0);
  Lit<digits(V) + 1> out;
  long long v = V;
  for (size_t i = digits(V); i-- > 0; v /= 10) out.s[i] = static_cast<char>('0' + v % 10);
  return out;
}

// The parts joined, as a '\0'-terminated array with static storage:
// text<"a", decimal<5>(), "b"> is "a5b".
template <Lit... Parts>
struct Joined {
  static constexpr auto make() {
    std::array<char, (Parts.size + ... + 0) + 1> out{};
    size_t at = 0;
    ((std::copy_n(Parts.s, Parts.size, out.begin() + at), at += Parts.size), ...);
    return out;
  }
  static constexpr auto value = make();
};

template <Lit... Parts>
inline constexpr const char* text = Joined<Parts...>::value.data();

}  // namespace cxxrun::launcher::static_text
