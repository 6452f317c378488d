// How a round's group ranks are chosen (rendezvous/group_ranks.h).
#include <catch2/catch.hpp>

#include <vector>

#include "rendezvous/group_ranks.h"

using namespace cxxrun::rendezvous;

TEST_CASE("group ranks: node order first, then address, host, pid and slot") {
  const std::vector<cxxrun::rendezvous::Member> slots = {
      {"10.0.0.9", "h9", 1, 4, kNoOrder, ""},  // slot 0: no order, last
      {"10.0.0.5", "h5", 1, 2, 1, ""},         // slot 1
      {"10.0.0.3", "h3", 1, 8, 0, ""},         // slot 2: scheduler's node 0
      {"10.0.0.5", "h5", 1, 2, 1, ""},         // slot 3: the same as slot 1 but for its slot
      {"10.0.0.1", "h1", 7, 1, kNoOrder, ""},  // slot 4
  };
  const std::vector<int> order = rank_order(slots);
  CHECK(order == std::vector<int>{2, 1, 3, 4, 0});

  const std::vector<AssignmentRecord> a = assignments(slots, order, "r42");
  REQUIRE(a.size() == slots.size());
  // Ranked 2, 1, 3, 4, 0 with nproc 8, 2, 2, 1, 4: each starts where the one before ended.
  const std::vector<std::pair<int, int>> rank_and_base = {{4, 13}, {1, 8}, {0, 0}, {2, 10}, {3, 12}};
  for (size_t slot = 0; slot < a.size(); ++slot) {
    INFO("slot " << slot);
    CHECK(a[slot].group_rank == rank_and_base[slot].first);
    CHECK(a[slot].base_rank == rank_and_base[slot].second);
    CHECK(a[slot].world_size == 17);
    CHECK(a[slot].alive == "r42");
  }
}

TEST_CASE("round records: an appended list's lines, empty ones left out") {
  CHECK(parse_lines("").empty());
  CHECK(parse_lines("a (pid 1) oom\n\nb (pid 2) gpu\n") == std::vector<std::string>{"a (pid 1) oom", "b (pid 2) gpu"});
  CHECK(parse_lines("no newline") == std::vector<std::string>{"no newline"});
}
