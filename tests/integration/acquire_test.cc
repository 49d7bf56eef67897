// A worker asks for work as soon as a slot frees, not an --acquire-interval later: with the
// interval at two minutes, a one-slot worker still runs a two-trial sweep back to back.
#include <gtest/gtest.h>

#include <string>

#include "spheret/v1/sweeps.grpc.pb.h"
#include "tests/integration/cluster_fixture.h"

namespace spheret {
namespace {

using testing_util::Base;
using AcquireTest = testing_util::ClusterTest;

TEST_F(AcquireTest, AFreedSlotAsksForTheNextTrialAtOnce) {
  // Submitted before the worker starts, so its first request (at start-up) gets the first trial;
  // the second can only come from the request made when that trial's slot frees: the next
  // interval's request would come 120 s later, past the wait below.
  const int64_t sweep = Submit("name: back-to-back\ndataset: tiny\nbase: " + Base(4, 2) +
                               "\nparameters:\n  method: {values: [pre_ln]}\nseeds: [1, 2]\n");
  worker_flags_ = {"--acquire-interval", "120000"};
  StartWorker("a", 1);
  EXPECT_TRUE(WaitFor(sweep, 60, [](auto& t) { return All(t, v1::TRIAL_STATE_SUCCEEDED); }))
      << Log("a");
}

}  // namespace
}  // namespace spheret
