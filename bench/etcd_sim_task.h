// The coroutines of bench/etcd_sim.cc: Task<T>, an agent's steps awaited
// one inside another, started lazily and resumed by the process's one loop
// (etcd_sim_loop.h) when what it waits on arrives. An exception ends the
// task and reaches whoever awaits it.
#pragma once

#include <coroutine>
#include <exception>
#include <optional>
#include <type_traits>
#include <utility>

namespace etcd_sim {

struct PromiseBase {
  std::coroutine_handle<> continuation = std::noop_coroutine();
  std::exception_ptr error;
  std::suspend_always initial_suspend() noexcept { return {}; }
  struct Final {
    bool await_ready() noexcept { return false; }
    template <typename P>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<P> h) noexcept {
      return h.promise().continuation;
    }
    void await_resume() noexcept {}
  };
  Final final_suspend() noexcept { return {}; }
  void unhandled_exception() { error = std::current_exception(); }
};

template <typename T>
struct ValuePromise : PromiseBase {
  std::optional<T> value;
  void return_value(T v) { value = std::move(v); }
  T take() { return std::move(*value); }
};
struct VoidPromise : PromiseBase {
  void return_void() {}
  void take() {}
};

// A lazy task: runs when awaited (or start()ed), resumes its awaiter when done.
template <typename T = void>
class Task {
 public:
  struct promise_type : std::conditional_t<std::is_void_v<T>, VoidPromise, ValuePromise<T>> {
    Task get_return_object() { return Task(std::coroutine_handle<promise_type>::from_promise(*this)); }
  };
  explicit Task(std::coroutine_handle<promise_type> h) : h_(h) {}
  Task(Task&& o) noexcept : h_(std::exchange(o.h_, {})) {}
  Task(const Task&) = delete;
  ~Task() {
    if (h_) h_.destroy();
  }
  bool await_ready() const noexcept { return false; }
  std::coroutine_handle<> await_suspend(std::coroutine_handle<> awaiter) {
    h_.promise().continuation = awaiter;
    return h_;
  }
  T await_resume() {
    if (h_.promise().error) std::rethrow_exception(h_.promise().error);
    return h_.promise().take();
  }
  // A top-level task: runs until its first wait; done() once it returned.
  void start() { h_.resume(); }
  bool done() const { return h_.done(); }
  std::exception_ptr error() const { return h_.promise().error; }

 private:
  std::coroutine_handle<promise_type> h_;
};

}  // namespace etcd_sim
