// The plumbing of bench/etcd_sim.cc: one epoll, the simulated agents'
// coroutines resumed on it (etcd_sim_task.h), and etcd's gRPC API over
// HTTP/2 (etcd_sim_h2.h) as etcd/ speaks it. The agents' steps write and read each message as the
// JSON of etcd's gateway (proto3's JSON mapping), which etcd_sim_proto.h
// turns into protobuf and back, so that the steps read as the requests do
// in docs/etcd-client.md. Nothing of the project's client: the generator
// shares no code with what it stands in for.
//
// An agent runs one coroutine; it waits on one thing at a time (its unary
// connection's answer, one watch's events, a timer, or the process's
// barrier), so each agent has one waiter and one timer generation.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <exception>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <queue>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "etcd_sim_h2.h"
#include "etcd_sim_proto.h"
#include "etcd_sim_task.h"

namespace etcd_sim {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

// ---- connections ----------------------------------------------------------

struct Agent;

// One HTTP/2 connection to a member (etcd_sim_h2.h): an agent's unary one
// (calls one at a time, kept alive), or one watch's (one call, then its
// stream of messages).
struct Conn {
  int fd = -1;
  Agent* agent = nullptr;
  bool watch = false;
  bool closed = false;
  bool liveness = false;  // EtcdLiveness's watch of the round's alive keys
  int member = 0;         // which endpoint
  json create;            // a watch's create_request
  int64_t last_revision = 0;  // the last event it delivered
  int reopened = 0;
  std::string out, in;
  std::unique_ptr<H2Session> h2;
  const char* path = "";  // the call in progress, by its gateway path
  // The answer being read.
  int code = 0;               // gRPC's status once `ready`
  std::string message;        // grpc-message
  json body;                  // unary: the answer, as the gateway would have given it
  bool ready = false;         // unary: an answer is complete
  std::deque<json> messages;  // watch: {"result": message}s not yet taken
  std::string error;          // why it broke; empty while fine
};

struct Agent {
  int index = 0;
  int home = 0;    // the first endpoint it lists (--spread): where its watches go
  int member = 0;  // where its unary calls go: home, until a member refuses one
  int retries = 0;
  std::unique_ptr<Conn> unary;
  // Waiting: the coroutine to resume, what it waits on (a connection, or
  // null for a timer or the barrier), and the timer generation (a timer of
  // an older one is stale).
  std::coroutine_handle<> waiter;
  Conn* waiting_on = nullptr;
  uint64_t gen = 0;
  bool timed_out = false;
};

// proto3 JSON's int64: a string (or a number); absent is 0.
inline int64_t i64(const json& o, const char* name) {
  auto it = o.find(name);
  if (it == o.end() || it->is_null()) return 0;
  return it->is_string() ? std::stoll(it->get<std::string>()) : it->get<int64_t>();
}

// ---- the event loop ---------------------------------------------------------

// The calls counted, by the gateway's path for each (etcd_sim_proto.h
// names the gRPC method), in Loop's `requests` order.
inline const char* const kPaths[] = {"/v3/kv/range", "/v3/kv/put", "/v3/kv/txn", "/v3/lease/grant",
                                     "/v3/lease/keepalive", "/v3/watch", "/v3/kv/deleterange", "other"};

// One process's epoll, connections, timers and waits, for the agents'
// coroutines: call() a unary request, open_watch() and events() a watch,
// sleep(); poll() runs what is ready. Each request is counted by path in
// `requests`; each alive key deleted under a liveness watch in `lapses`.
class Loop {
 public:
  Loop(const std::vector<std::string>& endpoints, std::atomic<int64_t>* requests, std::atomic<int>& lapses,
       std::atomic<int>& retries)
      : endpoints_(endpoints), requests_(requests), lapses_(&lapses), retries_(&retries) {
    ep_ = epoll_create1(EPOLL_CLOEXEC);
    for (const auto& e : endpoints) {
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(static_cast<uint16_t>(atoi(e.substr(e.find(':') + 1).c_str())));
      inet_pton(AF_INET, e.substr(0, e.find(':')).c_str(), &a.sin_addr);
      members_.push_back(a);
    }
  }
  ~Loop() { close(ep_); }

  // Waits up to max_ms (less if a timer is due) for I/O, then resumes the
  // agents whose answer, events or timer came.
  void poll(int max_ms) {
    int wait_ms = max_ms;
    if (!timers_.empty())
      wait_ms = static_cast<int>(std::clamp<int64_t>(
          std::chrono::duration_cast<std::chrono::milliseconds>(timers_.top().at - Clock::now()).count(), 0, max_ms));
    epoll_event events[4096];
    const int n = epoll_wait(ep_, events, 4096, wait_ms);
    for (int k = 0; k < n; ++k) on_event(static_cast<Conn*>(events[k].data.ptr), events[k].events);
    bury();
    for (auto now = Clock::now(); !timers_.empty() && timers_.top().at <= now;) {
      Timer t = timers_.top();
      timers_.pop();
      if (t.agent->gen == t.gen && t.agent->waiter) {
        t.agent->timed_out = true;
        resume(*t.agent);
      }
    }
    bury();
  }
  // Connections closed since: no event of this batch can name them now.
  void bury() { graveyard_.clear(); }


  std::unique_ptr<Conn> connect_to(Agent& a, bool watch) {
    auto c = std::make_unique<Conn>();
    c->agent = &a;
    c->watch = watch;
    c->member = watch ? a.home : a.member;
    dial(*c);
    return c;
  }

  // A new connection for `c`, to its member.
  void dial(Conn& c) {
    Agent& a = *c.agent;
    c.fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c.fd < 0) throw std::runtime_error(std::string("socket: ") + strerror(errno));
    int one = 1;
    setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(c.fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
    // A source address per 1,000 agents: every watch is a connection, and
    // 10,000 agents' would use up one address's ports to a member.
    sockaddr_in from{};
    from.sin_family = AF_INET;
    from.sin_addr.s_addr = htonl((127u << 24) | ((1u + static_cast<uint32_t>(a.index / 1000)) << 8) | 1u);
    if (bind(c.fd, reinterpret_cast<sockaddr*>(&from), sizeof from) != 0)
      throw std::runtime_error(std::string("bind: ") + strerror(errno));
    const sockaddr_in& to = members_.at(static_cast<size_t>(c.member));
    if (connect(c.fd, reinterpret_cast<const sockaddr*>(&to), sizeof to) != 0 && errno != EINPROGRESS)
      throw std::runtime_error(std::string("connect: ") + strerror(errno));
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLOUT;
    ev.data.ptr = &c;
    epoll_ctl(ep_, EPOLL_CTL_ADD, c.fd, &ev);
    c.h2 = std::make_unique<H2Session>();
    Conn* conn = &c;
    c.h2->on_message = [conn](std::string_view bytes) {
      json m = proto::response_json(conn->path, bytes);
      if (conn->watch) conn->messages.push_back(json{{"result", std::move(m)}});
      else conn->body = std::move(m);
    };
    c.h2->on_end = [conn](int code, const std::string& message) {
      if (conn->watch) {
        conn->error = "the watch stream ended: " + message;
        return;
      }
      conn->code = code, conn->message = message, conn->ready = true;
    };
  }

  // A watch stream that broke is made again on the next member, from the
  // revision after the last event it delivered, as etcd::Watch does.
  void reopen(Conn& c) {
    if (++c.reopened > 100) throw std::runtime_error("watch: " + c.error + " (made again 100 times)");
    epoll_ctl(ep_, EPOLL_CTL_DEL, c.fd, nullptr);
    close(c.fd);
    c.member = (c.member + 1) % static_cast<int>(members_.size());
    c.in.clear(), c.out.clear(), c.error.clear(), c.messages.clear();
    c.ready = false;
    json create = c.create;
    if (c.last_revision > 0) create["start_revision"] = std::to_string(c.last_revision + 1);
    ++*retries_;
    dial(c);
    send_request(c, "/v3/watch", json{{"create_request", create}});
  }

  void count(const char* path) {
    size_t i = 0;
    while (i + 1 < std::size(kPaths) && strcmp(kPaths[i], path) != 0) ++i;
    ++requests_[i];
  }

  void send_request(Conn& c, const char* path, const json& body) {
    count(path);
    c.path = path;
    c.ready = false;
    c.body = json();
    c.h2->call(endpoints_.at(static_cast<size_t>(c.member)), proto::method(path), proto::request(path, body));
    c.h2->pending(c.out);
    flush(c);
  }

  std::unique_ptr<Conn> open_watch(Agent& a, const json& create) {
    auto c = connect_to(a, true);
    c->create = create;
    send_request(*c, "/v3/watch", json{{"create_request", create}});
    return c;
  }

  // etcd::Watch::stop: the stream ended, its connection kept for the next.
  void stop_watch(Conn& c) {
    c.liveness = false;  // nothing to resume while stopped
    c.h2->cancel();
    c.messages.clear();
    c.h2->pending(c.out);
    flush(c);
  }

  // etcd::Watch::restart: a new stream on the watch's connection where it
  // still stands (a new connection where not), for `create`.
  void restart_watch(Conn& c, const json& create) {
    c.create = create;
    c.last_revision = 0;
    c.reopened = 0;
    c.messages.clear();
    if (!c.error.empty() || c.h2->dead()) {
      epoll_ctl(ep_, EPOLL_CTL_DEL, c.fd, nullptr);
      close(c.fd);
      c.in.clear(), c.out.clear(), c.error.clear();
      c.member = c.agent->home;
      dial(c);
    } else {
      c.h2->cancel();
    }
    send_request(c, "/v3/watch", json{{"create_request", create}});
  }

  // A unary call on the agent's kept-alive connection; the answer, parsed.
  // A refusal that says nothing was applied, or an answer etcd may or may
  // not have applied, is sent again as our client and EtcdStore do
  // (docs/etcd-client.md: the next member, a pause of 10 ms doubling to
  // 500 ms after each round of members): an overloaded etcd answers "too
  // many requests". Each resend is counted in `retries`.
  Task<json> call(Agent& a, const char* path, const json& body) {
    auto pause = std::chrono::milliseconds(10);
    for (size_t tries = 1;; ++tries) {
      if (!a.unary) a.unary = connect_to(a, false);
      Conn& c = *a.unary;
      send_request(c, path, body);
      while (!c.ready && c.error.empty()) co_await park(a, &c, Clock::time_point::max());
      std::string why = c.error;
      if (why.empty()) {
        c.ready = false;
        if (c.code == 0) co_return std::move(c.body);
        why = "gRPC status " + std::to_string(c.code) + ": " + c.message;
      }
      static const char* const kAgain[] = {"too many requests", "no leader", "not capable", "leader changed",
                                           "unhealthy cluster", "request timed out", "server stopped",
                                           "closed the connection", "reset by peer", "context deadline exceeded"};
      // Unavailable and deadline exceeded are ones our client sends again
      // too: the next member for a read, EtcdStore's resend for a write. So
      // is an overloaded member's "context deadline exceeded", which etcd
      // sends as Unknown (2).
      const bool again = c.code == 14 || c.code == 4 || std::any_of(std::begin(kAgain), std::end(kAgain), [&](const char* k) {
        return why.find(k) != std::string::npos;
      });
      // Our client tries until the call's deadline (a join's is minutes):
      // 1,000 tries is minutes of the pauses below.
      if (!again || tries > 1000)
        throw std::runtime_error(std::string(path) + ": " + why);
      ++a.retries;
      ++*retries_;
      close_conn(a.unary);
      a.member = (a.member + 1) % static_cast<int>(members_.size());
      if (tries % members_.size() == 0) {
        co_await park(a, nullptr, Clock::now() + pause);
        pause = std::min(pause * 2, std::chrono::milliseconds(500));
      }
    }
  }

  // Until the watch holds events (true) or `until` passes (false).
  Task<bool> events(Agent& a, Conn& w, Clock::time_point until) {
    for (;;) {
      if (!w.error.empty()) reopen(w);
      for (const json& m : w.messages)
        if (m.contains("result") && m["result"].contains("events")) co_return true;
      w.messages.clear();  // created, progress notifications
      if (Clock::now() >= until) co_return false;
      if (!co_await park(a, &w, until)) co_return false;
    }
  }
  std::vector<json> take_events(Conn& w) {
    std::vector<json> out;
    for (json& m : w.messages)
      if (m.contains("result"))
        for (json& e : m["result"].value("events", json::array())) out.push_back(std::move(e));
    w.messages.clear();
    return out;
  }

  Task<> sleep(Agent& a, Clock::duration d) { co_await park(a, nullptr, Clock::now() + d); }

  // Suspends the agent until `on` has news (or the barrier opens: on null),
  // or until `until`. True: woken by news.
  struct Park {
    Loop& sim;
    Agent& a;
    Conn* on;
    Clock::time_point until;
    bool await_ready() const noexcept { return false; }
    void await_suspend(std::coroutine_handle<> h) {
      a.waiter = h;
      a.waiting_on = on;
      a.timed_out = false;
      if (until != Clock::time_point::max()) sim.timers_.push({until, &a, ++a.gen});
    }
    bool await_resume() const noexcept { return !a.timed_out; }
  };
  Park park(Agent& a, Conn* on, Clock::time_point until) { return Park{*this, a, on, until}; }

  void resume(Agent& a) {
    ++a.gen;
    a.waiting_on = nullptr;
    std::exchange(a.waiter, nullptr).resume();
  }

  void close_conn(std::unique_ptr<Conn>& c) {
    if (!c) return;
    epoll_ctl(ep_, EPOLL_CTL_DEL, c->fd, nullptr);
    close(c->fd);
    c->closed = true;
    graveyard_.push_back(std::move(c));  // an event for it may still be in this batch
  }

  void flush(Conn& c) {
    while (!c.out.empty()) {
      const ssize_t n = send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL);
      if (n < 0 && (errno == EAGAIN || errno == EINTR || errno == ENOTCONN)) break;
      if (n <= 0) {
        c.error = std::string("send: ") + strerror(errno);
        break;
      }
      c.out.erase(0, static_cast<size_t>(n));
    }
    epoll_event ev{};
    ev.events = EPOLLIN | (c.out.empty() ? 0u : static_cast<uint32_t>(EPOLLOUT));
    ev.data.ptr = &c;
    epoll_ctl(ep_, EPOLL_CTL_MOD, c.fd, &ev);
  }

  void on_event(Conn* c, uint32_t events) {
    if (c->closed) return;
    if (events & EPOLLOUT) flush(*c);
    if (events & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
      char buf[65536];
      for (;;) {
        const ssize_t n = recv(c->fd, buf, sizeof buf, 0);
        if (n > 0) {
          c->in.append(buf, static_cast<size_t>(n));
          continue;
        }
        if (n == 0 || (errno != EAGAIN && errno != EINTR)) c->error = n == 0 ? "the member closed the connection" : strerror(errno);
        break;
      }
      if (c->error.empty() && c->h2->received(c->in, c->error)) {
        c->in.clear();
        c->h2->pending(c->out);
        flush(*c);
      }
      if (c->error.empty() && c->watch) delivered(*c);
      if (c->error.empty() && c->watch) count_deletes(*c);
      if (!c->error.empty() && c->liveness) {
        try {
          reopen(*c);
        } catch (const std::exception&) {
          // Given up on: no one waits on it; its lapses go uncounted.
        }
        return;
      }
    }
    Agent& a = *c->agent;
    const bool news = !c->error.empty() || (c->watch ? !c->messages.empty() : c->ready);
    if (news && a.waiter && a.waiting_on == c) resume(a);
  }

  // The last revision a watch delivered, for a stream made again.
  void delivered(Conn& c) {
    for (const json& m : c.messages)
      if (m.contains("result"))
        for (const json& e : m["result"].value("events", json::array()))
          c.last_revision = std::max(c.last_revision, i64(e.value("kv", json::object()), "mod_revision"));
  }

  // A liveness watch sees every alive key of its round deleted: a lease that
  // lapsed. Each key counted once, however many watches saw it.
  void count_deletes(Conn& c) {
    if (!c.liveness) return;  // the store's watches: events for the agent
    for (json& m : c.messages)
      if (m.contains("result"))
        for (const json& e : m["result"].value("events", json::array()))
          if (e.value("type", "PUT") == "DELETE" && deleted_.insert(unb64(e["kv"].value("key", ""))).second) ++*lapses_;
    c.messages.clear();
  }

  const std::vector<std::string> endpoints_;
  std::vector<sockaddr_in> members_;
  std::atomic<int64_t>* const requests_;
  std::atomic<int>* const lapses_;
  std::atomic<int>* const retries_;
  int ep_ = -1;
  std::vector<std::unique_ptr<Conn>> graveyard_;
  std::set<std::string> deleted_;

  struct Timer {
    Clock::time_point at;
    Agent* agent;
    uint64_t gen;
    bool operator>(const Timer& o) const { return at > o.at; }
  };

  std::priority_queue<Timer, std::vector<Timer>, std::greater<>> timers_;
};

}  // namespace etcd_sim
