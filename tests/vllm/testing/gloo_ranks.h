// Runs the ranks of one Gloo group as threads of a test: fn(rank, group) on each,
// every rank with its own communicator (its own TCP endpoints) meeting in a fresh
// temp directory. Returns when all have returned; an exception on a rank fails the
// test with the rank's message.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "vllm/distributed/gloo_communicator.h"
#include "vllm/testing/model_fixtures.h"

namespace vllm::testing {

inline void RunRanks(int world_size, const std::function<void(int, Communicator&)>& fn,
                     std::chrono::milliseconds timeout = std::chrono::milliseconds(60000)) {
  TempDir rendezvous;
  std::vector<std::string> errors(static_cast<size_t>(world_size));
  std::vector<std::thread> ranks;
  for (int r = 0; r < world_size; ++r) {
    ranks.emplace_back([&, r] {
      try {
        std::unique_ptr<Communicator> group = CreateGlooCommunicator(
            {.rank = r, .world_size = world_size, .rendezvous_dir = rendezvous.path(), .timeout = timeout});
        fn(r, *group);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  }
  for (std::thread& t : ranks) t.join();
  for (int r = 0; r < world_size; ++r) {
    if (!errors[static_cast<size_t>(r)].empty()) ADD_FAILURE() << "rank " << r << ": " << errors[static_cast<size_t>(r)];
  }
}

}  // namespace vllm::testing
