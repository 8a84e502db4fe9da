// An exception that leaves an OpenMP region ends the whole program (std::terminate), so a variant
// whose parallel loop can throw (a TensorAccessError from a view, its own checks) runs each
// iteration through capture() and calls rethrow_first() after the region: the harness then fails
// the case with the message instead of the process aborting.
#pragma once

#include <atomic>
#include <exception>
#include <mutex>

namespace attnbench {

class ParallelErrors {
 public:
  // Runs `body`, keeping what it throws; once one iteration has thrown, the rest are skipped.
  template <class Body>
  void capture(Body&& body) noexcept {
    if (failed_.load(std::memory_order_relaxed)) return;
    try {
      body();
    } catch (...) {
      const std::lock_guard<std::mutex> lock(mutex_);
      if (!first_) first_ = std::current_exception();
      failed_.store(true, std::memory_order_relaxed);
    }
  }

  // Call after the region: throws the first error captured, if any.
  void rethrow_first() const {
    if (first_) std::rethrow_exception(first_);
  }

 private:
  std::atomic<bool> failed_{false};
  std::mutex mutex_;
  std::exception_ptr first_;
};

}  // namespace attnbench
