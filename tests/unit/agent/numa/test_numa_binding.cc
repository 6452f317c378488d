// --numa-binding's planner against hwloc XML topologies (tests/data/):
//   numa-2x2-8gpu.xml         2 packages x 2 NUMA nodes (0-3), 5 cores a node
//                             (an L3 of 2 cores, then one of 3), 2 PUs a core:
//                             core k is CPUs k and k+20. GPUs, in PCI order:
//                             18 2a | 3a 5d | 9a ab | ba db (2 a node; ab is
//                             VGA class, the rest 3D), written out of order;
//                             2 NVSwitches and an ASPEED VGA that are not GPUs.
//   numa-no-gpu.xml           one node, CPUs 0-1; an NVSwitch, an ASPEED VGA
//                             and an InfiniBand card, no NVIDIA GPU.
//   numa-1node-2cpu-2gpu.xml  one node, CPUs 0 and 1 on two cores, 2 GPUs.
#include <sched.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/mempolicy.h>

#include <algorithm>
#include <filesystem>

#include "agent/numa/binding.h"
#include "agent/numa/worker_binding.h"
#include "options_fixture.h"

using namespace cxxrun::agent;

namespace {

// The build names the folder: __FILE__ is relative when a compiler cache
// rewrites paths, and the tests run from another directory.
const std::string kData = CXXRUN_TEST_DATA_DIR;
const std::string kEightGpus = kData + "/numa-2x2-8gpu.xml";
const std::string kNoGpu = kData + "/numa-no-gpu.xml";
const std::string kTwoCpus = kData + "/numa-1node-2cpu-2gpu.xml";

// "0-2,20" -> {0, 1, 2, 20}
std::vector<int> cpus(const std::string& list) {
  std::vector<int> out;
  size_t at = 0;
  while (at < list.size()) {
    size_t comma = list.find(',', at);
    if (comma == std::string::npos) comma = list.size();
    const std::string item = list.substr(at, comma - at);
    const size_t dash = item.find('-');
    const int first = std::stoi(item.substr(0, dash));
    const int last = dash == std::string::npos ? first : std::stoi(item.substr(dash + 1));
    for (int c = first; c <= last; ++c) out.push_back(c);
    at = comma + 1;
  }
  return out;
}

const NumaTopology& eight_gpus() {
  static const NumaTopology host = read_numa_topology(kEightGpus);
  return host;
}

NumaRequest numa_request(NumaMode mode, int nproc, std::optional<std::string> cuda_visible_devices = std::nullopt,
                    std::vector<int> agent_cpus = cpus("0-39")) {
  return {mode, nproc, std::move(cuda_visible_devices), std::move(agent_cpus)};
}

std::vector<NumaPlacement> plan(const NumaRequest& r) { return plan_numa_binding(eight_gpus(), r); }

std::string refusal(const NumaTopology& host, const NumaRequest& r) {
  try {
    plan_numa_binding(host, r);
  } catch (const NumaBindingError& e) {
    return e.what();
  }
  FAIL("the plan was not refused");
  return "";
}

}  // namespace

TEST_CASE("hwloc finds the NVIDIA GPUs in PCI order, each on its NUMA node", "[numa]") {
  const NumaTopology& host = eight_gpus();
  std::vector<std::string> buses;
  std::vector<int> nodes;
  for (const auto& gpu : host.gpus) {
    buses.push_back(gpu.pci_bus_id);
    nodes.push_back(gpu.numa_node);
  }
  // Neither NVSwitch (class 0x0680) nor the ASPEED VGA counts.
  CHECK(buses == std::vector<std::string>{"0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0",
                                          "0000:9a:00.0", "0000:ab:00.0", "0000:ba:00.0", "0000:db:00.0"});
  CHECK(nodes == std::vector<int>{0, 0, 1, 1, 2, 2, 3, 3});
  REQUIRE(host.nodes.size() == 4);
  CHECK(host.nodes[1].os_index == 1);
  CHECK(host.nodes[1].cpus == cpus("5-9,25-29"));
  CHECK(host.core_of.at(25) == 5);
  CHECK(host.cache_of.at(21) == 0);
  CHECK(host.cache_of.at(24) == 2);
  CHECK(host.package_of.at(29) == 0);
  CHECK(host.package_of.at(30) == 1);

  CHECK(read_numa_topology(kNoGpu).gpus.empty());
  CHECK_THROWS_AS(read_numa_topology(kData + "/no-such-topology.xml"), TopologyError);
}

TEST_CASE("node: every allowed CPU of the GPU's NUMA node, and its memory", "[numa]") {
  const auto p = plan(numa_request(NumaMode::node, 8));
  REQUIRE(p.size() == 8);
  CHECK(p[0].cpus == cpus("0-4,20-24"));
  CHECK(p[0].memory_node == 0);
  CHECK(p[3].cpus == cpus("5-9,25-29"));
  CHECK(p[3].memory_node == 1);
  CHECK(p[3].gpu == 3);
  CHECK(p[3].gpu_pci == "0000:5d:00.0");
  CHECK(p[7].cpus == cpus("15-19,35-39"));
  CHECK(p[7].memory_node == 3);
  CHECK(describe_binding(3, p[3]) ==
        "local rank 3: bound to CPUs 5-9,25-29 and memory of NUMA node 1 (near GPU 3, 0000:5d:00.0)");
}

TEST_CASE("socket: the CPUs of every NUMA node of the GPU's package", "[numa]") {
  const auto p = plan(numa_request(NumaMode::socket, 8));
  CHECK(p[0].cpus == cpus("0-9,20-29"));
  CHECK(p[3].cpus == cpus("0-9,20-29"));
  CHECK(p[4].cpus == cpus("10-19,30-39"));
  CHECK_FALSE(p[4].memory_node);
  CHECK(p[4].numa_node == 2);
  CHECK(describe_binding(4, p[4]) == "local rank 4: bound to CPUs 10-19,30-39 (NUMA node 2, near GPU 4, 0000:9a:00.0)");
}

TEST_CASE("exclusive: the node's cores split among its GPUs, the lower GPUs taking the extra", "[numa]") {
  const auto p = plan(numa_request(NumaMode::exclusive, 8));
  // 5 cores for 2 GPUs: 3 and 2, whole cores (both their CPUs).
  CHECK(p[0].cpus == cpus("0-2,20-22"));
  CHECK(p[1].cpus == cpus("3-4,23-24"));
  CHECK(p[6].cpus == cpus("15-17,35-37"));
  CHECK(p[7].cpus == cpus("18-19,38-39"));
  CHECK_FALSE(p[0].memory_node);
  // One worker still takes only its GPU's share: the node has two GPUs.
  CHECK(plan(numa_request(NumaMode::exclusive, 1))[0].cpus == cpus("0-2,20-22"));
  // A core the agent may use only half of still counts as a core.
  // Node 0 then has 4 cores: 0, 1, 2 and the half of 3.
  const auto half = plan(numa_request(NumaMode::exclusive, 2, std::nullopt, cpus("0-3,20-22")));
  CHECK(half[0].cpus == cpus("0-1,20-21"));
  CHECK(half[1].cpus == cpus("2-3,22"));
}

TEST_CASE("exclusive refuses a node with fewer cores than GPUs", "[numa]") {
  const std::string why = refusal(eight_gpus(), numa_request(NumaMode::exclusive, 1, std::nullopt, cpus("0,20")));
  CHECK_THAT(why, Contains("NUMA node 0 has 1"));
  CHECK_THAT(why, Contains("for 2 GPUs"));
}

TEST_CASE("core-complex: a last-level cache's CPUs, larger caches first", "[numa]") {
  auto p = plan(numa_request(NumaMode::core_complex, 8));
  // Node 0's caches: CPUs 0-1,20-21 and 2-4,22-24; the larger comes first.
  CHECK(p[0].cpus == cpus("2-4,22-24"));
  CHECK(p[1].cpus == cpus("0-1,20-21"));
  CHECK(p[2].cpus == cpus("7-9,27-29"));
  // The sizes count allowed CPUs only: without 3, 4, 23 and 24 the first
  // cache is the larger one.
  p = plan(numa_request(NumaMode::core_complex, 2, std::nullopt, cpus("0-2,20-22")));
  CHECK(p[0].cpus == cpus("0-1,20-21"));
  CHECK(p[1].cpus == cpus("2,22"));
  // Equal sizes: the lower CPUs first.
  p = plan(numa_request(NumaMode::core_complex, 2, std::nullopt, cpus("0-3,20-23")));
  CHECK(p[0].cpus == cpus("0-1,20-21"));
  CHECK(p[1].cpus == cpus("2-3,22-23"));
  // More GPUs on the node than caches: round robin.
  p = plan(numa_request(NumaMode::core_complex, 2, std::nullopt, cpus("0-1,20-21")));
  CHECK(p[0].cpus == cpus("0-1,20-21"));
  CHECK(p[1].cpus == cpus("0-1,20-21"));
}

TEST_CASE("CUDA_VISIBLE_DEVICES maps local ranks to the host's GPUs", "[numa]") {
  auto p = plan(numa_request(NumaMode::node, 2, "6, 2"));
  CHECK(p[0].gpu == 6);
  CHECK(p[0].cpus == cpus("15-19,35-39"));
  CHECK(p[1].gpu == 2);
  CHECK(p[1].memory_node == 1);
  // The split follows CUDA's numbering: GPU 7, shown first, takes the
  // larger share of node 3.
  p = plan(numa_request(NumaMode::exclusive, 2, "7,6"));
  CHECK(p[0].gpu == 7);
  CHECK(p[0].cpus == cpus("15-17,35-37"));
  CHECK(p[1].cpus == cpus("18-19,38-39"));
  // GPU 0 alone on node 0 in the agent's view: every core is its own.
  CHECK(plan(numa_request(NumaMode::exclusive, 1, "0"))[0].cpus == cpus("0-4,20-24"));
  // As CUDA reads it, the list ends at the first bad entry.
  CHECK_THAT(refusal(eight_gpus(), numa_request(NumaMode::node, 2, "1,9,2")),
             Contains("2 local workers need 2 GPUs to bind near, one each, and CUDA_VISIBLE_DEVICES=1,9,2 shows 1 "
                      "of this host's 8"));
  CHECK_THAT(refusal(eight_gpus(), numa_request(NumaMode::node, 1, "")), Contains("shows 0 of this host's 8"));
}

TEST_CASE("GPU UUIDs in CUDA_VISIBLE_DEVICES are refused", "[numa]") {
  for (const char* uuid : {"GPU-8f3e2d4a-1b2c-3d4e-5f60-718293a4b5c6", "0,MIG-1b2c3d4e-5f60-7182-93a4-b5c6d7e8f901"}) {
    const std::string why = refusal(eight_gpus(), numa_request(NumaMode::node, 1, uuid));
    CHECK_THAT(why, Contains("is a UUID"));
    CHECK_THAT(why, Contains("name the GPUs by index"));
  }
}

TEST_CASE("a host without NVIDIA GPUs, or with fewer than workers, is refused", "[numa]") {
  CHECK(refusal(read_numa_topology(kNoGpu), numa_request(NumaMode::node, 1, std::nullopt, {0, 1})) ==
        "this host has no NVIDIA GPU to bind near");
  CHECK(refusal(eight_gpus(), numa_request(NumaMode::socket, 9)) ==
        "9 local workers need 9 GPUs to bind near, one each, and this host has 8");
}

TEST_CASE("only CPUs in the agent's own affinity are given", "[numa]") {
  auto p = plan(numa_request(NumaMode::node, 1, std::nullopt, cpus("1-3,21,30")));
  CHECK(p[0].cpus == cpus("1-3,21"));
  // Node 0 has no CPU the agent may use: it belongs to no package, and
  // socket gives node 1's alone.
  p = plan(numa_request(NumaMode::socket, 1, "2", cpus("5-19,25-39")));
  CHECK(p[0].cpus == cpus("5-9,25-29"));
  CHECK(refusal(eight_gpus(), numa_request(NumaMode::socket, 1, std::nullopt, cpus("5-19,25-39"))) ==
        "none of NUMA node 0's CPUs (0-4,20-24), near GPU 0 (0000:18:00.0), is in cxxrun's own affinity "
        "(5-19,25-39)");
}

TEST_CASE("mode names and CPU lists", "[numa]") {
  CHECK(numa_mode_named("core-complex") == NumaMode::core_complex);
  CHECK(numa_mode_named("exclusive") == NumaMode::exclusive);
  CHECK_FALSE(numa_mode_named("core_complex"));
  CHECK(cpu_list_text({0, 1, 2, 4, 6, 7}) == "0-2,4,6-7");
  CHECK(cpu_list_text({5}) == "5");
  const std::vector<int> mine = agent_affinity();
  CHECK_FALSE(mine.empty());
  CHECK(std::is_sorted(mine.begin(), mine.end()));
}

TEST_CASE("binding masks are the kernel's bit arrays", "[numa]") {
  NumaPlacement p;
  p.cpus = {0, 2, 65};
  BindingMasks m = binding_masks(p);
  CHECK(m.cpus == std::vector<unsigned long>{0b101, 0b10});
  CHECK(m.memory_nodes.empty());
  p.memory_node = 1;
  CHECK(binding_masks(p).memory_nodes == std::vector<unsigned long>{0b10});
}

TEST_CASE("apply_binding binds a process's CPUs and memory", "[numa]") {
  const std::vector<int> mine = agent_affinity();
  NumaPlacement p;
  p.cpus = {mine.back()};
  p.memory_node = 0;  // every Linux machine has node 0
  const BindingMasks masks = binding_masks(p);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    if (apply_binding(masks) != BindingStep::none) _exit(1);
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0 || CPU_COUNT(&set) != 1 || !CPU_ISSET(p.cpus[0], &set)) _exit(2);
    int mode = -1;
    unsigned long nodes[16] = {};
    if (syscall(SYS_get_mempolicy, &mode, nodes, sizeof nodes * 8, nullptr, 0UL) != 0) _exit(3);
    _exit(mode == MPOL_BIND && nodes[0] == 1 ? 0 : 4);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("the launcher plans each local rank for --numa-binding", "[numa][options]") {
  const std::vector<int> mine = agent_affinity();
  std::vector<int> near;  // the two-CPU topology's CPUs this process may use
  for (int cpu : {0, 1})
    if (std::find(mine.begin(), mine.end(), cpu) != mine.end()) near.push_back(cpu);
  Parsed p = run({"--numa-binding=node", "--nproc-per-node=2", kProg}, with("HWLOC_XMLFILE", kTwoCpus));
  REQUIRE(p.config.numa_binding.size() == 2);
  CHECK(p.config.numa_binding[1].cpus == near);
  CHECK(p.config.numa_binding[1].memory_node == 0);
  CHECK(p.config.numa_binding[1].gpu_pci == "0000:2a:00.0");
  CHECK(run({kProg}, with("HWLOC_XMLFILE", kTwoCpus)).config.numa_binding.empty());

  CHECK(refusal({"--numa-binding=exclusive"}, with("HWLOC_XMLFILE", kNoGpu)) ==
        "--numa-binding=exclusive: this host has no NVIDIA GPU to bind near");
  CHECK_THAT(refusal({"--numa-binding=node", "--nproc-per-node=3"}, with("HWLOC_XMLFILE", kTwoCpus)),
             Contains("--numa-binding=node: 3 local workers need 3 GPUs"));
  CHECK_THAT(refusal({"--numa_binding", "socket"}, with("HWLOC_XMLFILE", kData + "/no-such-topology.xml")),
             Contains("--numa-binding=socket: hwloc cannot read the topology in"));
  CHECK_THAT(refusal({"--numa-binding=sockets"}), Contains("invalid choice"));
}
