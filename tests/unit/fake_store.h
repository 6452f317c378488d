// An in-memory StoreClient shared by threads, for testing algorithms built on
// the store without sockets. Semantics follow the server's (COMPARE_SET quirk
// included); waits honour their timeouts.
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "store/client.h"

class FakeStore {
 public:
  class Client : public cxxrun::store::StoreClient {
   public:
    Client(FakeStore& store, std::string addr) : s_(store), addr_(std::move(addr)) {}
    void set(const std::string& k, const std::string& v) override {
      std::lock_guard l(s_.mu_);
      s_.data_[k] = v;
      s_.cv_.notify_all();
    }
    std::string get(const std::string& k) override { return get(k, std::chrono::seconds(30)); }
    std::string get(const std::string& k, Duration timeout) override {
      wait({k}, timeout);
      std::lock_guard l(s_.mu_);
      return s_.data_[k];
    }
    int64_t add(const std::string& k, int64_t delta) override {
      std::lock_guard l(s_.mu_);
      auto& v = s_.data_[k];
      int64_t n = (v.empty() ? 0 : std::stoll(v)) + delta;
      v = std::to_string(n);
      s_.cv_.notify_all();
      return n;
    }
    std::string compare_set(const std::string& k, const std::string& expected, const std::string& desired) override {
      std::lock_guard l(s_.mu_);
      auto it = s_.data_.find(k);
      if (it == s_.data_.end()) {
        if (!expected.empty()) return expected;
        s_.data_[k] = desired;
        s_.cv_.notify_all();
        return desired;
      }
      if (it->second == expected) it->second = desired;
      return it->second;
    }
    bool check(const std::vector<std::string>& keys) override {
      std::lock_guard l(s_.mu_);
      for (auto& k : keys)
        if (!s_.data_.count(k)) return false;
      return true;
    }
    void wait(const std::vector<std::string>& keys, Duration timeout) override {
      std::unique_lock l(s_.mu_);
      auto all = [&] {
        for (auto& k : keys)
          if (!s_.data_.count(k)) return false;
        return true;
      };
      if (!s_.cv_.wait_for(l, timeout, all)) throw cxxrun::store::StoreTimeout("wait timeout: " + keys[0]);
    }
    int64_t num_keys() override {
      std::lock_guard l(s_.mu_);
      return static_cast<int64_t>(s_.data_.size());
    }
    bool delete_key(const std::string& k) override {
      std::lock_guard l(s_.mu_);
      return s_.data_.erase(k) > 0;
    }
    void append(const std::string& k, const std::string& v) override {
      std::lock_guard l(s_.mu_);
      s_.data_[k] += v;
      s_.cv_.notify_all();
    }
    std::vector<std::string> multi_get(const std::vector<std::string>& keys) override {
      std::vector<std::string> out;
      for (auto& k : keys) out.push_back(get(k));
      return out;
    }
    void multi_set(const std::vector<std::string>& keys, const std::vector<std::string>& values) override {
      for (size_t i = 0; i < keys.size(); ++i) set(keys[i], values[i]);
    }
    std::string local_address() const override { return addr_; }
    void set_timeout(Duration) override {}  // the fake answers at once

   private:
    FakeStore& s_;
    std::string addr_;
  };

  // The keys written under `prefix`, in order.
  std::vector<std::string> keys_under(const std::string& prefix) {
    std::lock_guard l(mu_);
    std::vector<std::string> out;
    for (auto it = data_.lower_bound(prefix); it != data_.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it)
      out.push_back(it->first);
    return out;
  }

  // A store restarted empty on the same address.
  void forget_everything() {
    std::lock_guard l(mu_);
    data_.clear();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::string> data_;
};
