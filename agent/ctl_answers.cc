#include "agent/ctl_answers.h"

#include <chrono>

#include <boost/asio/post.hpp>
#include <nlohmann/json.hpp>

#include "agent/rendezvous_link.h"
#include "agent/report/rank_stacks.h"
#include "rendezvous/ctl_requests.h"

namespace cxxrun::agent {

CtlAnswers::CtlAnswers(boost::asio::io_context& io, RendezvousLink& link, std::string node, std::string host,
                       TakeStacks take_stacks)
    : io_(io), link_(link), node_(std::move(node)), host_(std::move(host)), take_stacks_(std::move(take_stacks)) {}

void CtlAnswers::start() {
  link_.call([this](rendezvous::Rendezvous& r) -> RendezvousLink::Then {
    r.watch_requests([this](long long n, const std::string& request) {
      boost::asio::post(io_, [this, n, request] { on_request(n, request); });
    });
    return {};
  });
}

void CtlAnswers::line(int rank, std::string_view text) {
  const long long ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count();
  output_.add(rank, text, ms);
}

void CtlAnswers::on_request(long long n, const std::string& request) {
  if (auto logs = RankOutput::parse(request))
    return send(n, output_.answer(*logs, node_, host_, rendezvous::requests::kMaxAnswerBytes));
  if (auto stacks = parse_stacks_request(request)) {
    // Answered when the stacks are in (within kStackDeadline), on the loop.
    return take_stacks_([this, n, asked = *stacks](std::vector<RankStack> taken) {
      send(n, stacks_answer(asked, taken, node_, host_, rendezvous::requests::kMaxAnswerBytes));
    });
  }
  send(n, nlohmann::json{{"node", node_}, {"host", host_}, {"error", "this agent does not read that request"}}.dump());
}

void CtlAnswers::send(long long n, std::string answer) {
  link_.call([this, n, answer = std::move(answer)](rendezvous::Rendezvous& r) -> RendezvousLink::Then {
    r.answer_request(n, node_, answer);
    return {};
  });
}

}  // namespace cxxrun::agent
