// Whom a hang is blamed on (agent/hang/culprit.h): eu-stack's frames parsed as
// eu-stack 0.188 prints them (texts captured on real processes: a C++
// program with templates, (anonymous namespace), operators and std::function;
// a [clone .cold] part; -a's "- 1" marks; a stripped binary), who stands
// apart, and whom one tick's verdicts blame and kill.
#include <catch2/catch.hpp>
#include <map>
#include <string>

#include "agent/hang/culprit.h"

using namespace cxxrun::agent;
using namespace std::chrono_literals;

namespace {

// `eu-stack -m -s -p` of /tmp/hangwork/sleeper (g++ -g -O0): rank 0 sleeps
// in run_worker(char const*, int), rank 1 waits on a mutex it holds, in
// (anonymous namespace)::wedge().
const char* const kSleeping = R"EU(PID 12072 - process
TID 12072:
#0  0x00007f8a9031f503 clock_nanosleep@GLIBC_2.2.5 - /usr/lib/x86_64-linux-gnu/libc.so.6
    ../sysdeps/unix/sysv/linux/clock_nanosleep.c:71:10
#1  0x00007f8a90323e53 __nanosleep - /usr/lib/x86_64-linux-gnu/libc.so.6
    ../sysdeps/unix/sysv/linux/nanosleep.c:25:13
#2  0x00007f8a90323d8a sleep - /usr/lib/x86_64-linux-gnu/libc.so.6
    ../sysdeps/posix/sleep.c:55:11
#3  0x00005640f5c291a2 run_worker(char const*, int) - /tmp/hangwork/sleeper
    /tmp/hangwork/sleeper.cc:6:88
#4  0x00005640f5c291d8 main - /tmp/hangwork/sleeper
    /tmp/hangwork/sleeper.cc:7:40
#5  0x00007f8a9027724a __libc_start_call_main - /usr/lib/x86_64-linux-gnu/libc.so.6
    ../sysdeps/nptl/libc_start_call_main.h:58:16
#6  0x00007f8a90277305 __libc_start_main@@GLIBC_2.34 - /usr/lib/x86_64-linux-gnu/libc.so.6
    ../csu/libc-start.c:360:3
#7  0x00005640f5c29091 _start - /tmp/hangwork/sleeper
)EU";
const char* const kWedged = R"EU(PID 12073 - process
TID 12073:
#0  0x00007f5fd935412b __GI___lll_lock_wait - /usr/lib/x86_64-linux-gnu/libc.so.6
    ../sysdeps/nptl/futex-internal.h:146:13
#1  0x00007f5fd935a482 __pthread_mutex_lock@GLIBC_2.2.5 - /usr/lib/x86_64-linux-gnu/libc.so.6
    ./nptl/pthread_mutex_lock.c:48:5
#2  0x00005612c689b17b (anonymous namespace)::wedge() - /tmp/hangwork/sleeper
    /tmp/hangwork/sleeper.cc:5:70
#3  0x00005612c689b198 run_worker(char const*, int) - /tmp/hangwork/sleeper
    /tmp/hangwork/sleeper.cc:6:67
#4  0x00005612c689b1d8 main - /tmp/hangwork/sleeper
    /tmp/hangwork/sleeper.cc:7:40
#5  0x00007f5fd92f524a __libc_start_call_main - /usr/lib/x86_64-linux-gnu/libc.so.6
    ../sysdeps/nptl/libc_start_call_main.h:58:16
#6  0x00007f5fd92f5305 __libc_start_main@@GLIBC_2.34 - /usr/lib/x86_64-linux-gnu/libc.so.6
    ../csu/libc-start.c:360:3
#7  0x00005612c689b091 _start - /tmp/hangwork/sleeper
)EU";
const char* const kSleepingStripped = R"EU(PID 12364 - process
TID 12364:
#0  0x00007fec02740503 clock_nanosleep@GLIBC_2.2.5 - /usr/lib/x86_64-linux-gnu/libc.so.6
    ../sysdeps/unix/sysv/linux/clock_nanosleep.c:71:10
#1  0x00007fec02744e53 __nanosleep - /usr/lib/x86_64-linux-gnu/libc.so.6
    ../sysdeps/unix/sysv/linux/nanosleep.c:25:13
#2  0x00007fec02744d8a sleep - /usr/lib/x86_64-linux-gnu/libc.so.6
    ../sysdeps/posix/sleep.c:55:11
#3  0x00005617631371a2 - /tmp/hangwork/sleeper_s
#4  0x00005617631371d8 - /tmp/hangwork/sleeper_s
#5  0x00007fec0269824a __libc_start_call_main - /usr/lib/x86_64-linux-gnu/libc.so.6
    ../sysdeps/nptl/libc_start_call_main.h:58:16
#6  0x00007fec02698305 __libc_start_main@@GLIBC_2.34 - /usr/lib/x86_64-linux-gnu/libc.so.6
    ../csu/libc-start.c:360:3
#7  0x0000561763137091 - /tmp/hangwork/sleeper_s
)EU";
const char* const kWedgedStripped = R"EU(PID 12365 - process
TID 12365:
#0  0x00007f131ac4d12b __GI___lll_lock_wait - /usr/lib/x86_64-linux-gnu/libc.so.6
    ../sysdeps/nptl/futex-internal.h:146:13
#1  0x00007f131ac53482 __pthread_mutex_lock@GLIBC_2.2.5 - /usr/lib/x86_64-linux-gnu/libc.so.6
    ./nptl/pthread_mutex_lock.c:48:5
#2  0x00005628ee4f817b - /tmp/hangwork/sleeper_s
#3  0x00005628ee4f8198 - /tmp/hangwork/sleeper_s
#4  0x00005628ee4f81d8 - /tmp/hangwork/sleeper_s
#5  0x00007f131abee24a __libc_start_call_main - /usr/lib/x86_64-linux-gnu/libc.so.6
    ../sysdeps/nptl/libc_start_call_main.h:58:16
#6  0x00007f131abee305 __libc_start_main@@GLIBC_2.34 - /usr/lib/x86_64-linux-gnu/libc.so.6
    ../csu/libc-start.c:360:3
#7  0x00005628ee4f8091 - /tmp/hangwork/sleeper_s
)EU";
const char* const kTemplates = R"EU(PID 9351 - process
TID 9351:
#0  0x00007f75a54a412b __GI___lll_lock_wait - /usr/lib/x86_64-linux-gnu/libc.so.6
    ../sysdeps/nptl/futex-internal.h:146:13
#1  0x00007f75a54aa482 __pthread_mutex_lock@GLIBC_2.2.5 - /usr/lib/x86_64-linux-gnu/libc.so.6
    ./nptl/pthread_mutex_lock.c:48:5
#2  0x0000560e466ba1f7 (anonymous namespace)::Waiter::operator()(int) const - /tmp/hangwork/prog0
    /tmp/hangwork/prog.cc:12:76
#3  0x0000560e466ba7ea void std::__invoke_impl<void, (anonymous namespace)::Waiter&, int>(std::__invoke_other, (anonymous namespace)::Waiter&, int&&) - /tmp/hangwork/prog0
    /usr/include/c++/12/bits/invoke.h:61:36
#4  0x0000560e466ba682 std::enable_if<is_invocable_r_v<void, (anonymous namespace)::Waiter&, int>, void>::type std::__invoke_r<void, (anonymous namespace)::Waiter&, int>((anonymous namespace)::Waiter&, int&&) - /tmp/hangwork/prog0
    /usr/include/c++/12/bits/invoke.h:111:28
#5  0x0000560e466ba507 std::_Function_handler<void (int), (anonymous namespace)::Waiter>::_M_invoke(std::_Any_data const&, int&&) - /tmp/hangwork/prog0
    /usr/include/c++/12/bits/std_function.h:290:30
#6  0x0000560e466bae80 std::function<void (int)>::operator()(int) const - /tmp/hangwork/prog0
    /usr/include/c++/12/bits/std_function.h:591:9
#7  0x0000560e466bad73 Box<double, 3>::run(char const*, std::function<void (int)>) - /tmp/hangwork/prog0
    /tmp/hangwork/prog.cc:18:73
#8  0x0000560e466ba243 operator<<(S&, int) - /tmp/hangwork/prog0
    /tmp/hangwork/prog.cc:21:53
#9  0x0000560e466ba2b0 run_worker(char const*, int) - /tmp/hangwork/prog0
    /tmp/hangwork/prog.cc:22:54
#10 0x0000560e466ba2fd main - /tmp/hangwork/prog0
    /tmp/hangwork/prog.cc:25:13
#11 0x00007f75a544524a __libc_start_call_main - /usr/lib/x86_64-linux-gnu/libc.so.6
    ../sysdeps/nptl/libc_start_call_main.h:58:16
#12 0x00007f75a5445305 __libc_start_main@@GLIBC_2.34 - /usr/lib/x86_64-linux-gnu/libc.so.6
    ../csu/libc-start.c:360:3
#13 0x0000560e466ba101 _start - /tmp/hangwork/prog0
TID 9353:
#0  0x00007f75a54ed545 clock_nanosleep@GLIBC_2.2.5 - /usr/lib/x86_64-linux-gnu/libc.so.6
    ../sysdeps/unix/sysv/linux/clock_nanosleep.c:48:7
#1  0x00007f75a54f1e53 __nanosleep - /usr/lib/x86_64-linux-gnu/libc.so.6
    ../sysdeps/unix/sysv/linux/nanosleep.c:25:13
#2  0x00007f75a54f1d8a sleep - /usr/lib/x86_64-linux-gnu/libc.so.6
    ../sysdeps/posix/sleep.c:55:11
#3  0x0000560e466ba2ca main::{lambda()#1}::operator()() const - /tmp/hangwork/prog0
    /tmp/hangwork/prog.cc:24:27
#4  0x0000560e466baa3a void std::__invoke_impl<void, main::{lambda()#1}>(std::__invoke_other, main::{lambda()#1}&&) - /tmp/hangwork/prog0
    /usr/include/c++/12/bits/invoke.h:61:36
#5  0x0000560e466ba9fd std::__invoke_result<main::{lambda()#1}>::type std::__invoke<main::{lambda()#1}>(main::{lambda()#1}&&) - /tmp/hangwork/prog0
    /usr/include/c++/12/bits/invoke.h:96:40
#6  0x0000560e466ba9aa void std::thread::_Invoker<std::tuple<main::{lambda()#1}> >::_M_invoke<0ul>(std::_Index_tuple<0ul>) - /tmp/hangwork/prog0
    /usr/include/c++/12/bits/std_thread.h:252:26
#7  0x0000560e466ba97e std::thread::_Invoker<std::tuple<main::{lambda()#1}> >::operator()() - /tmp/hangwork/prog0
    /usr/include/c++/12/bits/std_thread.h:259:20
#8  0x0000560e466ba962 std::thread::_State_impl<std::thread::_Invoker<std::tuple<main::{lambda()#1}> > >::_M_run() - /tmp/hangwork/prog0
    /usr/include/c++/12/bits/std_thread.h:210:20
#9  0x00007f75a56d44a3 - /usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.30
#10 0x00007f75a54a71f5 start_thread - /usr/lib/x86_64-linux-gnu/libc.so.6
    ./nptl/pthread_create.c:442:8
#11 0x00007f75a55278ec __clone3 - /usr/lib/x86_64-linux-gnu/libc.so.6
    ../sysdeps/unix/sysv/linux/x86_64/clone3.S:81
)EU";
const char* const kCold = R"EU(PID 9800 - process
TID 9800:
#0  0x00007f21cc0a412b __GI___lll_lock_wait - /usr/lib/x86_64-linux-gnu/libc.so.6
    ../sysdeps/nptl/futex-internal.h:146:13
#1  0x00007f21cc0aa482 __pthread_mutex_lock@GLIBC_2.2.5 - /usr/lib/x86_64-linux-gnu/libc.so.6
    ./nptl/pthread_mutex_lock.c:48:5
#2  0x000055ecfa60612a step(int) [clone .cold] - /tmp/hangwork/cold2
    /tmp/hangwork/cold2.cc:7:99
#3  0x00007f21cc04524a __libc_start_call_main - /usr/lib/x86_64-linux-gnu/libc.so.6
    ../sysdeps/nptl/libc_start_call_main.h:58:16
#4  0x00007f21cc045305 __libc_start_main@@GLIBC_2.34 - /usr/lib/x86_64-linux-gnu/libc.so.6
    ../csu/libc-start.c:360:3
#5  0x000055ecfa606171 _start - /tmp/hangwork/cold2
)EU";
const char* const kActivation = R"EU(PID 9724 - process
TID 9724:
#0  0x00007f030dea412b     __GI___lll_lock_wait - /usr/lib/x86_64-linux-gnu/libc.so.6
    ../sysdeps/nptl/futex-internal.h:146:13
#1  0x00007f030deaa482 - 1 __pthread_mutex_lock@GLIBC_2.2.5 - /usr/lib/x86_64-linux-gnu/libc.so.6
    ./nptl/pthread_mutex_lock.c:48:5
#2  0x000055f45a7f9309 - 1 step(int) - /tmp/hangwork/cold
    /tmp/hangwork/cold.cc:9:47
#3  0x00007f030de4524a - 1 __libc_start_call_main - /usr/lib/x86_64-linux-gnu/libc.so.6
    ../sysdeps/nptl/libc_start_call_main.h:58:16
#4  0x00007f030de45305 - 1 __libc_start_main@@GLIBC_2.34 - /usr/lib/x86_64-linux-gnu/libc.so.6
    ../csu/libc-start.c:360:3
#5  0x000055f45a7f9171 - 1 _start - /tmp/hangwork/cold
)EU";
// examples/train (RelWithDebInfo), 4 ranks over gloo, rank 2 stopped by
// SIGSTOP: rank 0 waits to receive, rank 2 was stopped while sending.
const char* const kTrainReceiving = R"EU(PID 19006 - process
TID 19006:
#0  0x00007f04678a3f16 __futex_abstimed_wait_common - /usr/lib/x86_64-linux-gnu/libc.so.6
    ./nptl/futex-internal.c:57:12
#1  0x00007f04678a6baf pthread_cond_clockwait@GLIBC_2.30 - /usr/lib/x86_64-linux-gnu/libc.so.6
    ./nptl/pthread_cond_wait.c:503:10
#2  0x00007f0473956d6b gloo::transport::tcp::UnboundBuffer::waitRecv(int*, std::chrono::duration<long, std::ratio<1l, 1000l> >) - /usr/lib/libgloo.so.0.5.0
#3  0x00007f0473926a15 - /usr/lib/libgloo.so.0.5.0
#4  0x0000560a86485056 cxxrun::worker::(anonymous namespace)::GlooCommunicator::allreduce_in_place(void*, unsigned long, cxxrun::worker::DType, cxxrun::worker::ReduceOp) - /work/main/build/examples/train
    ../worker_runtime/gloo_communicator.cc:154:18
#5  0x0000560a86486d4c void cxxrun::worker::(anonymous namespace)::GlooCommunicator::run<cxxrun::worker::(anonymous namespace)::GlooCommunicator::allreduce(void*, unsigned long, cxxrun::worker::DType, cxxrun::worker::ReduceOp)::{lambda()#1}>(char const*, cxxrun::worker::(anonymous namespace)::GlooCommunicator::allreduce(void*, unsigned long, cxxrun::worker::DType, cxxrun::worker::ReduceOp)::{lambda()#1}&&) [clone .constprop.0] - /work/main/build/examples/train
    ../worker_runtime/gloo_communicator.cc:160:44
#6  0x0000560a86486e22 cxxrun::worker::(anonymous namespace)::GlooCommunicator::allreduce(void*, unsigned long, cxxrun::worker::DType, cxxrun::worker::ReduceOp) - /work/main/build/examples/train
    ../worker_runtime/gloo_communicator.cc:160:6
#7  0x0000560a8644a898 (anonymous namespace)::train((anonymous namespace)::Flags const&) - /work/main/build/examples/train
    ../examples/train/main.cc:104:23
#8  0x0000560a86477708 cxxrun::examples::run_worker(char const*, std::function<int ()> const&) - /work/main/build/examples/train
    /usr/include/c++/12/bits/std_function.h:591:9
#9  0x0000560a86447efb main - /work/main/build/examples/train
    ../examples/train/main.cc:154:24
#10 0x00007f046784524a __libc_start_call_main - /usr/lib/x86_64-linux-gnu/libc.so.6
    ../sysdeps/nptl/libc_start_call_main.h:58:16
#11 0x00007f0467845305 __libc_start_main@@GLIBC_2.34 - /usr/lib/x86_64-linux-gnu/libc.so.6
    ../csu/libc-start.c:360:3
#12 0x0000560a864487e1 _start - /work/main/build/examples/train
TID 19010:
#0  0x00007f0467926f36 epoll_wait - /usr/lib/x86_64-linux-gnu/libc.so.6
    ../sysdeps/unix/sysv/linux/epoll_wait.c:30:10
#1  0x00007f0473948ecf gloo::transport::tcp::Loop::run() - /usr/lib/libgloo.so.0.5.0
#2  0x00007f04676d44a3 - /usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.30
#3  0x00007f04678a71f5 start_thread - /usr/lib/x86_64-linux-gnu/libc.so.6
    ./nptl/pthread_create.c:442:8
#4  0x00007f04679278ec __clone3 - /usr/lib/x86_64-linux-gnu/libc.so.6
    ../sysdeps/unix/sysv/linux/x86_64/clone3.S:81
)EU";
const char* const kTrainSending = R"EU(PID 19008 - process
TID 19008:
#0  0x00007f44850a3f16 __futex_abstimed_wait_common - /usr/lib/x86_64-linux-gnu/libc.so.6
    ./nptl/futex-internal.c:57:12
#1  0x00007f44850a6baf pthread_cond_clockwait@GLIBC_2.30 - /usr/lib/x86_64-linux-gnu/libc.so.6
    ./nptl/pthread_cond_wait.c:503:10
#2  0x00007f44913c2f6e gloo::transport::tcp::UnboundBuffer::waitSend(int*, std::chrono::duration<long, std::ratio<1l, 1000l> >) - /usr/lib/libgloo.so.0.5.0
#3  0x00007f449139274c - /usr/lib/libgloo.so.0.5.0
#4  0x000055efa9642056 cxxrun::worker::(anonymous namespace)::GlooCommunicator::allreduce_in_place(void*, unsigned long, cxxrun::worker::DType, cxxrun::worker::ReduceOp) - /work/main/build/examples/train
    ../worker_runtime/gloo_communicator.cc:154:18
#5  0x000055efa9643d4c void cxxrun::worker::(anonymous namespace)::GlooCommunicator::run<cxxrun::worker::(anonymous namespace)::GlooCommunicator::allreduce(void*, unsigned long, cxxrun::worker::DType, cxxrun::worker::ReduceOp)::{lambda()#1}>(char const*, cxxrun::worker::(anonymous namespace)::GlooCommunicator::allreduce(void*, unsigned long, cxxrun::worker::DType, cxxrun::worker::ReduceOp)::{lambda()#1}&&) [clone .constprop.0] - /work/main/build/examples/train
    ../worker_runtime/gloo_communicator.cc:160:44
#6  0x000055efa9643e22 cxxrun::worker::(anonymous namespace)::GlooCommunicator::allreduce(void*, unsigned long, cxxrun::worker::DType, cxxrun::worker::ReduceOp) - /work/main/build/examples/train
    ../worker_runtime/gloo_communicator.cc:160:6
#7  0x000055efa9607898 (anonymous namespace)::train((anonymous namespace)::Flags const&) - /work/main/build/examples/train
    ../examples/train/main.cc:104:23
#8  0x000055efa9634708 cxxrun::examples::run_worker(char const*, std::function<int ()> const&) - /work/main/build/examples/train
    /usr/include/c++/12/bits/std_function.h:591:9
#9  0x000055efa9604efb main - /work/main/build/examples/train
    ../examples/train/main.cc:154:24
#10 0x00007f448504524a __libc_start_call_main - /usr/lib/x86_64-linux-gnu/libc.so.6
    ../sysdeps/nptl/libc_start_call_main.h:58:16
#11 0x00007f4485045305 __libc_start_main@@GLIBC_2.34 - /usr/lib/x86_64-linux-gnu/libc.so.6
    ../csu/libc-start.c:360:3
#12 0x000055efa96057e1 _start - /work/main/build/examples/train
TID 19012:
#0  0x00007f4485126f36 epoll_wait - /usr/lib/x86_64-linux-gnu/libc.so.6
    ../sysdeps/unix/sysv/linux/epoll_wait.c:30:10
#1  0x00007f44913b4ecf gloo::transport::tcp::Loop::run() - /usr/lib/libgloo.so.0.5.0
#2  0x00007f44852d44a3 - /usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.30
#3  0x00007f44850a71f5 start_thread - /usr/lib/x86_64-linux-gnu/libc.so.6
    ./nptl/pthread_create.c:442:8
#4  0x00007f44851278ec __clone3 - /usr/lib/x86_64-linux-gnu/libc.so.6
    ../sysdeps/unix/sysv/linux/x86_64/clone3.S:81
)EU";
// g++ -O1 without -g: ranks 0–2 wait on a lock in wait_for_peers(int), rank
// 3 on another in (anonymous namespace)::wedge(char const*); no source lines.
const char* const kPeerNoDebug = R"EU(PID 21808 - process
TID 21808:
#0  0x00007f924a1f512b __GI___lll_lock_wait - /usr/lib/x86_64-linux-gnu/libc.so.6
    ../sysdeps/nptl/futex-internal.h:146:13
#1  0x00007f924a1fb482 __pthread_mutex_lock@GLIBC_2.2.5 - /usr/lib/x86_64-linux-gnu/libc.so.6
    ./nptl/pthread_mutex_lock.c:48:5
#2  0x00005643144a218b wait_for_peers(int) - /tmp/hangwork/nd
#3  0x00005643144a21bb main - /tmp/hangwork/nd
#4  0x00007f924a19624a __libc_start_call_main - /usr/lib/x86_64-linux-gnu/libc.so.6
    ../sysdeps/nptl/libc_start_call_main.h:58:16
#5  0x00007f924a196305 __libc_start_main@@GLIBC_2.34 - /usr/lib/x86_64-linux-gnu/libc.so.6
    ../csu/libc-start.c:360:3
#6  0x00005643144a2091 _start - /tmp/hangwork/nd
)EU";
const char* const kWedgeNoDebug = R"EU(PID 21809 - process
TID 21809:
#0  0x00007f158fa6012b __GI___lll_lock_wait - /usr/lib/x86_64-linux-gnu/libc.so.6
    ../sysdeps/nptl/futex-internal.h:146:13
#1  0x00007f158fa66482 __pthread_mutex_lock@GLIBC_2.2.5 - /usr/lib/x86_64-linux-gnu/libc.so.6
    ./nptl/pthread_mutex_lock.c:48:5
#2  0x000055a715ca7171 (anonymous namespace)::wedge(char const*) - /tmp/hangwork/nd
#3  0x000055a715ca71d1 main - /tmp/hangwork/nd
#4  0x00007f158fa0124a __libc_start_call_main - /usr/lib/x86_64-linux-gnu/libc.so.6
    ../sysdeps/nptl/libc_start_call_main.h:58:16
#5  0x00007f158fa01305 __libc_start_main@@GLIBC_2.34 - /usr/lib/x86_64-linux-gnu/libc.so.6
    ../csu/libc-start.c:360:3
#6  0x000055a715ca7091 _start - /tmp/hangwork/nd
)EU";

// faulthandler's text of a Python rank inside all_reduce, and of one inside
// barrier: a 2-2 split is two of each.
std::string python_in(const std::string& function, int line) {
  return "Current thread 0x00007f1ca3a5c740 (most recent call first):\n"
         "  File \"/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py\", line 1536 in " +
         function + "\n  File \"/work/w.py\", line " + std::to_string(line) + " in <module>\n";
}

}  // namespace

TEST_CASE("culprit: an eu-stack frame line keeps the whole demangled name and its module") {
  auto f = eu_stack_frame("#3  0x00005640f5c291a2 run_worker(char const*, int) - /tmp/hangwork/sleeper");
  REQUIRE(f);
  CHECK(f->function == "run_worker(char const*, int)");
  CHECK(f->module == "/tmp/hangwork/sleeper");
  f = eu_stack_frame("#2  0x0000560e466ba1f7 (anonymous namespace)::Waiter::operator()(int) const - /tmp/hangwork/prog0");
  CHECK(f->function == "(anonymous namespace)::Waiter::operator()(int) const");
  f = eu_stack_frame("#8  0x0000560e466ba243 operator<<(S&, int) - /tmp/hangwork/prog0");
  CHECK(f->function == "operator<<(S&, int)");
  f = eu_stack_frame("#2  0x000055ecfa60612a step(int) [clone .cold] - /tmp/hangwork/cold2");
  CHECK(f->function == "step(int) [clone .cold]");
  // No symbol: only the module.
  f = eu_stack_frame("#9  0x00007f75a56d44a3 - /usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.30");
  CHECK(f->function.empty());
  CHECK(f->module == "/usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.30");
  // -a's marks, and symbol versions.
  f = eu_stack_frame("#1  0x00007f030deaa482 - 1 __pthread_mutex_lock@GLIBC_2.2.5 - /usr/lib/x86_64-linux-gnu/libc.so.6");
  CHECK(f->function == "__pthread_mutex_lock");
  CHECK(f->module == "/usr/lib/x86_64-linux-gnu/libc.so.6");
  f = eu_stack_frame("#0  0x00007f030dea412b     __GI___lll_lock_wait - /usr/lib/x86_64-linux-gnu/libc.so.6");
  CHECK(f->function == "__GI___lll_lock_wait");
  f = eu_stack_frame("#4  0x00007f030de45305 __libc_start_main@@GLIBC_2.34 - /usr/lib/x86_64-linux-gnu/libc.so.6");
  CHECK(f->function == "__libc_start_main");
  // eu-stack without -m.
  f = eu_stack_frame("#7  0x0000560e466bad73 Box<double, 3>::run(char const*, std::function<void (int)>)");
  CHECK(f->function == "Box<double, 3>::run(char const*, std::function<void (int)>)");
  CHECK(f->module.empty());
  CHECK_FALSE(eu_stack_frame("    /tmp/hangwork/prog.cc:12:76"));
  CHECK_FALSE(eu_stack_frame("TID 9351:"));
}

TEST_CASE("culprit: native main threads from real eu-stack texts") {
  auto frames = main_thread_frames(kTemplates);
  REQUIRE(frames.size() == 14);  // the main thread only, not the sleeping side thread
  CHECK(frames[3].function ==
        "void std::__invoke_impl<void, (anonymous namespace)::Waiter&, int>(std::__invoke_other, "
        "(anonymous namespace)::Waiter&, int&&)");
  CHECK(frames[3].file == "/usr/include/c++/12/bits/invoke.h");
  CHECK(frames[9].function == "run_worker(char const*, int)");
  CHECK(frames[9].module == "/tmp/hangwork/prog0");
  CHECK(frames[9].line == 22);
  CHECK(frames[13].function == "_start");
  // The user's innermost frame is the functor's, not a std:: template
  // instantiated in the user's binary.
  CHECK(where_it_waits(frames) == "__pthread_mutex_lock at prog.cc:12");

  CHECK(where_it_waits(main_thread_frames(kCold)) == "__pthread_mutex_lock at cold2.cc:7");
  CHECK(main_thread_frames(kCold)[2].function == "step(int) [clone .cold]");
  frames = main_thread_frames(kActivation);
  REQUIRE(frames.size() == 6);
  CHECK(frames[2].function == "step(int)");
  CHECK(frames[2].module == "/tmp/hangwork/cold");
  CHECK(where_it_waits(frames) == "__pthread_mutex_lock at cold.cc:9");
}

TEST_CASE("culprit: native ranks are told apart, with debug info and without") {
  CHECK(where_it_waits(main_thread_frames(kSleeping)) == "sleep at sleeper.cc:6");
  CHECK(where_it_waits(main_thread_frames(kWedged)) == "__pthread_mutex_lock at sleeper.cc:5");
  auto p = picture({{0, kSleeping}, {1, kWedged}, {2, kSleeping}});
  CHECK(p.line == "ranks 0, 2 wait in sleep at sleeper.cc:6; rank 1 waits in __pthread_mutex_lock at sleeper.cc:5");
  REQUIRE(p.apart);
  CHECK(*p.apart == 1);
  // Stripped: no symbol in the user's binary, so its module says where.
  p = picture({{0, kSleepingStripped}, {1, kWedgedStripped}, {2, kSleepingStripped}});
  CHECK(p.line == "ranks 0, 2 wait in sleep at sleeper_s; rank 1 waits in __pthread_mutex_lock at sleeper_s");
  REQUIRE(p.apart);
  CHECK(*p.apart == 1);
}

TEST_CASE("culprit: examples/train's ranks in one allreduce are one group, however gloo waits inside") {
  auto frames = main_thread_frames(kTrainReceiving);
  REQUIRE(frames.size() == 13);
  CHECK(frames[4].function ==
        "cxxrun::worker::(anonymous namespace)::GlooCommunicator::allreduce_in_place(void*, unsigned long, "
        "cxxrun::worker::DType, cxxrun::worker::ReduceOp)");
  CHECK(frames[3].function.empty());
  CHECK(frames[3].module == "/usr/lib/libgloo.so.0.5.0");
  // The user's binary calls into gloo's frame without a symbol: named by
  // its module, the same whether gloo then waits to send or to receive.
  CHECK(where_it_waits(frames) == "libgloo.so.0.5.0 at gloo_communicator.cc:154");
  auto p = picture({{0, kTrainReceiving}, {1, kTrainReceiving}, {2, kTrainSending}, {3, kTrainReceiving}});
  CHECK(p.line == "ranks 0\u20133 wait in libgloo.so.0.5.0 at gloo_communicator.cc:154");
  CHECK_FALSE(p.apart);
  // One rank wedged in its own code stands apart from them.
  p = picture({{0, kTrainReceiving}, {1, kWedged}, {2, kTrainSending}, {3, kTrainReceiving}});
  REQUIRE(p.apart);
  CHECK(*p.apart == 1);
}

TEST_CASE("culprit: without debug info a native rank is told apart by its function") {
  CHECK(where_it_waits(main_thread_frames(kPeerNoDebug)) == "__pthread_mutex_lock at wait_for_peers in nd");
  CHECK(where_it_waits(main_thread_frames(kWedgeNoDebug)) ==
        "__pthread_mutex_lock at (anonymous namespace)::wedge in nd");
  auto p = picture({{0, kPeerNoDebug}, {1, kPeerNoDebug}, {2, kPeerNoDebug}, {3, kWedgeNoDebug}});
  REQUIRE(p.apart);
  CHECK(*p.apart == 3);
}

TEST_CASE("culprit: a C++ function is shown without its parameters") {
  Frame f;
  f.function = "(anonymous namespace)::Waiter::operator()(int) const";
  CHECK(where_it_waits({f, Frame{"/w.cc", 3, "user()", "/w"}}) == "(anonymous namespace)::Waiter::operator() at w.cc:3");
  f.function = "step(int) [clone .cold]";
  CHECK(where_it_waits({f, Frame{"/w.cc", 3, "user()", "/w"}}) == "step at w.cc:3");
  f.function = "main::{lambda()#1}::operator()() const";
  CHECK(where_it_waits({f, Frame{"/w.cc", 3, "user()", "/w"}}) == "main::{lambda()#1}::operator() at w.cc:3");
}

TEST_CASE("culprit: no rank stands apart in a 2-2 split, a 1-1 split, or when all wait alike") {
  const std::string ar = python_in("all_reduce", 9), ba = python_in("barrier", 11);
  auto p = picture({{0, ar}, {1, ar}, {2, ba}, {3, ba}});
  CHECK_FALSE(p.apart);
  REQUIRE(p.groups.size() == 2);
  CHECK(p.line == "ranks 0, 1 wait in all_reduce at w.py:9; ranks 2, 3 wait in barrier at w.py:11");
  CHECK_FALSE(picture({{0, ar}, {1, ba}}).apart);
  CHECK_FALSE(picture({{0, ar}, {1, ar}, {2, ar}, {3, ar}}).apart);
  CHECK_FALSE(picture({{0, ar}, {1, ba}, {2, python_in("broadcast", 13)}, {3, ar}}).apart);  // 2-1-1
  CHECK(*picture({{0, ar}, {1, ar}, {2, ar}, {3, ba}}).apart == 3);
  // A rank without a stack is no group: the others still decide.
  CHECK(*picture({{0, ar}, {1, ""}, {2, ar}, {3, ba}}).apart == 3);
}

TEST_CASE("culprit: one tick's verdicts blame the rank the stacks single out, not the first checked") {
  const std::string ar = python_in("all_reduce", 9), ba = python_in("barrier", 11);
  const std::vector<int> running{0, 1, 2, 3};
  // Every rank's section expired in the same tick; rank 3 stands apart.
  const std::vector<Accused> all{{0, 40ms}, {1, 40ms}, {2, 30ms}, {3, 30ms}};
  Blame b = blame(picture({{0, ar}, {1, ar}, {2, ar}, {3, ba}}), all, {}, running);
  CHECK(b.rank == 3);
  CHECK(b.reason == "rank 3 stands apart");
  // One judge named rank 1, but rank 3 stands apart: the others wait for it.
  b = blame(picture({{0, ar}, {1, ar}, {2, ar}, {3, ba}}), {{1, 5ms}}, {}, running);
  CHECK(b.rank == 3);

  // A 2-2 split: nobody stands apart, and the line does not pretend.
  const HangPicture split = picture({{0, ar}, {1, ar}, {2, ba}, {3, ba}});
  b = blame(split, {{2, 10ms}, {1, 50ms}, {3, 50ms}}, {}, running);
  CHECK(b.rank == 1);  // the most overdue, the lowest among equals
  CHECK(b.reason == "no rank stands apart; rank 1 is killed as the first of ranks 1\u20133 past its limit, not as the cause");
  b = blame(split, {{2, 10ms}}, {}, running);
  CHECK(b.rank == 2);
  // Rank 3 waits where rank 2 does: rank 2 was only named first.
  CHECK(b.reason == "no rank stands apart; rank 2 is killed for its own verdict, not as the cause");
  CHECK_FALSE(b.cause);
  // Named alone where no other rank waits (the others each elsewhere): its own verdict is the cause.
  b = blame(picture({{0, ar}, {1, ba}, {2, python_in("broadcast", 13)}, {3, python_in("gather", 15)}}), {{2, 10ms}},
            {}, running);
  CHECK(b.rank == 2);
  CHECK(b.reason == "no rank stands apart; rank 2 is killed for its own verdict");
  CHECK(b.cause);
  // --hang-timeout names nobody: the job is stopped, no rank is its cause.
  b = blame(split, {}, {}, running);
  CHECK(b.rank == 0);
  CHECK(b.reason == "no rank stands apart; rank 0 was killed only to stop the job, not as its cause");
  CHECK_FALSE(b.cause);
  CHECK(split.group_lines ==
        std::vector<std::string>{"ranks 0, 1 wait in all_reduce at w.py:9", "ranks 2, 3 wait in barrier at w.py:11"});
  CHECK_FALSE(blame(split, {{2, 10ms}, {1, 50ms}, {3, 50ms}}, {}, running).cause);
  CHECK(blame(picture({{0, ar}, {1, ar}, {2, ar}, {3, ba}}), {}, {}, running).cause);  // stands apart
  CHECK(blame(HangPicture{}, {}, {}, {}).rank == -1);
  // One rank on the node: nobody to stand apart from, nothing pretended.
  b = blame(picture({{0, ar}}), {{0, 1s}}, {}, {0});
  CHECK(b.rank == 0);
  CHECK(b.reason.empty());
  CHECK(blame(picture({{0, ar}}), {}, {}, {0}).reason.empty());
}

TEST_CASE("culprit: a worker a signal stopped is the reason of the hang, whatever the stacks say") {
  const std::string ar = python_in("all_reduce", 9), ba = python_in("barrier", 11);
  // A stopped rank cannot dump its own stack: the others all wait alike,
  // or one of them even looks apart.
  Blame b = blame(picture({{0, ar}, {1, ar}, {2, ""}, {3, ar}}), {}, {{2, "12:00:01"}}, {0, 1, 2, 3});
  CHECK(b.rank == 2);
  CHECK(b.reason == "rank 2 was stopped by a signal at 12:00:01 and never continued: the other ranks wait for it");
  b = blame(picture({{0, ar}, {1, ba}, {2, ar}, {3, ar}}), {{0, 1s}}, {{3, "12:00:01"}, {2, "12:00:05"}},
            {0, 1, 2, 3});
  CHECK(b.rank == 3);
  CHECK(b.reason.find("(stopped too: rank 2)") != std::string::npos);
}
