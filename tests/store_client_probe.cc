// store_client_probe HOST PORT legacy|modern
//
// Runs a fixed script of store operations through StoreClient and prints one
// line per step, "op args => result", so a test can hold the output against
// a real server (torch's TCPStore, or ours). Leaves behind: /cnt = "7",
// /cas = "second", /from_probe = "hello"; /k1 deleted.
#include <chrono>
#include <cstdio>
#include <functional>
#include <iostream>
#include <string>

#include "store/client.h"

using namespace cxxrun::store;
using namespace std::chrono_literals;

namespace {

int failures = 0;

void step(const std::string& what, const std::function<std::string()>& op) {
  std::string result;
  try {
    result = op();
  } catch (const std::exception& e) {
    result = std::string("error: ") + e.what();
    ++failures;
  }
  std::cout << what << " => " << result << std::endl;
}

// A timeout is the expected answer; report only whether it came on time, so
// the output does not depend on the port in the message.
void step_times_out(const std::string& what, StoreClient::Duration timeout,
                    const std::function<void()>& op) {
  auto start = std::chrono::steady_clock::now();
  std::string result = "returned";
  try {
    op();
  } catch (const StoreTimeout& e) {
    auto took = std::chrono::steady_clock::now() - start;
    bool on_time = took >= timeout - 10ms && took < timeout + 1500ms;
    bool named = std::string(e.what()).find("wait timeout after") != std::string::npos;
    result = std::string("timeout") + (on_time ? "" : " (late)") + (named ? "" : " (unnamed)");
  } catch (const std::exception& e) {
    result = std::string("error: ") + e.what();
  }
  if (result != "timeout") ++failures;
  std::cout << what << " => " << result << std::endl;
}

std::string yes_no(bool b) { return b ? "true" : "false"; }

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: store_client_probe HOST PORT legacy|modern\n";
    return 2;
  }
  StoreClient::Options options;
  options.host = argv[1];
  options.port = std::stoi(argv[2]);
  options.protocol = std::string(argv[3]) == "legacy" ? Protocol::legacy : Protocol::modern;
  options.timeout = 10s;

  std::unique_ptr<StoreClient> store;
  try {
    store = StoreClient::connect(options);
  } catch (const std::exception& e) {
    std::cout << "connect => error: " << e.what() << std::endl;
    return 1;
  }
  std::cout << "connect => ok" << std::endl;

  step("set k1 v1", [&] { return store->set("k1", "v1"), std::string("ok"); });
  step("get k1", [&] { return store->get("k1"); });
  step("add cnt 5", [&] { return std::to_string(store->add("cnt", 5)); });
  step("add cnt 2", [&] { return std::to_string(store->add("cnt", 2)); });
  step("get cnt", [&] { return store->get("cnt"); });
  step("compare_set cas '' first", [&] { return store->compare_set("cas", "", "first"); });
  step("compare_set cas first second",
       [&] { return store->compare_set("cas", "first", "second"); });
  step("compare_set cas wrong third", [&] { return store->compare_set("cas", "wrong", "third"); });
  step("compare_set absent x y", [&] { return store->compare_set("absent", "x", "y"); });
  step("check k1", [&] { return yes_no(store->check({"k1"})); });
  step("check k1 nope", [&] { return yes_no(store->check({"k1", "nope"})); });
  step_times_out("wait nope 300ms", 300ms, [&] { store->wait({"nope"}, 300ms); });
  step("get k1", [&] { return store->get("k1"); });
  step_times_out("get nope 200ms", 200ms, [&] { store->get("nope", 200ms); });
  step("num_keys", [&] { return std::to_string(store->num_keys()); });
  step("delete_key k1", [&] { return yes_no(store->delete_key("k1")); });
  step("delete_key k1", [&] { return yes_no(store->delete_key("k1")); });
  step("check k1", [&] { return yes_no(store->check({"k1"})); });
  step("set from_probe hello",
       [&] { return store->set("from_probe", "hello"), std::string("ok"); });
  step("local_address", [&] { return store->local_address(); });
  if (options.protocol == Protocol::modern) {
    step("append app a", [&] { return store->append("app", "a"), std::string("ok"); });
    step("append app b", [&] { return store->append("app", "b"), std::string("ok"); });
    step("get app", [&] { return store->get("app"); });
    step("multi_set m1 m2", [&] {
      return store->multi_set({"m1", "m2"}, {"x", "y"}), std::string("ok");
    });
    step("multi_get m1 m2", [&] {
      auto v = store->multi_get({"m1", "m2"});
      return v.size() == 2 ? v[0] + "," + v[1] : "wrong count";
    });
  }
  return failures == 0 ? 0 : 1;
}
