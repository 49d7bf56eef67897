// `spheret logs` (client/commands_sweeps.cc, client/fetch.h) against a coordinator process whose
// trial holds more event text than one reply may carry.
#include "tests/client/cli_fixture.h"

namespace spheret {
namespace {

// Issue 44, item 6: GetTrialLogs answered up to 10,000 events of up to 64 KiB in one reply, past
// the 4 MiB the CLI reads, so `spheret logs` failed ("received message larger than max"). The
// coordinator pages the events and the CLI follows the pages: all 100 events of 60 KB (6 MB), in
// order, each once.
TEST_F(CliTest, LogsFollowPagesPastTheReplyLimit) {
  const fs::path file = *dir_ / "big-logs.yaml";
  std::ofstream(file) << "name: cli-big-logs\ndataset: fortunes\nbase: {max_iters: 10}\n"
                         "parameters: {method: {values: [geonorm]}}\nresources: {gpus: 0}\n";
  CliResult submitted = Cli({"submit", file.string()});
  ASSERT_EQ(submitted.exit_code, 0) << submitted.err;
  std::vector<v1::Lease> leases = Acquire("fake-big-logs", 1);
  ASSERT_EQ(leases.size(), 1u);
  constexpr int kEvents = 100;
  for (int first = 0; first < kEvents; first += 10) {  // batches of 600 KB, under 1 MiB
    v1::IngestEventsResponse response;
    std::unique_ptr<grpc::ClientContext> context = Context();
    auto writer = workers_->IngestEvents(context.get(), &response);
    v1::EventBatch batch;
    batch.set_trial_id(leases[0].trial_id());
    batch.set_attempt(leases[0].attempt());
    for (int seq = first; seq < first + 10; ++seq) {
      v1::Event* event = batch.add_other();
      event->set_seq(seq);
      event->set_json(
          json{{"type", "error"}, {"message", std::to_string(seq) + std::string(60'000, 'e')}}
              .dump());
    }
    ASSERT_TRUE(writer->Write(batch));
    writer->WritesDone();
    grpc::Status status = writer->Finish();
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  const std::string trial = std::to_string(leases[0].trial_id());
  CliResult logs = Cli({"logs", trial, "--events", "1000", "--json"});
  ASSERT_EQ(logs.exit_code, 0) << logs.err;
  const json parsed = json::parse(logs.out);
  ASSERT_EQ(parsed["events"].size(), size_t{kEvents});
  for (int seq = 0; seq < kEvents; ++seq) {
    const json& event = parsed["events"][seq];
    EXPECT_EQ(event.value("seq", std::string("0")), std::to_string(seq));
    EXPECT_EQ(json::parse(event["json"].get<std::string>())["message"].get<std::string>().rfind(
                  std::to_string(seq) + "eee", 0),
              0u);
  }
  EXPECT_FALSE(parsed.contains("next_page_token"));
  CliResult latest = Cli({"logs", trial, "--events", "70"});
  ASSERT_EQ(latest.exit_code, 0) << latest.err;
  EXPECT_NE(latest.out.find("--- events (latest 70) ---\n[attempt 1] {\"message\":\"30eee"),
            std::string::npos)
      << latest.out.substr(0, 2000);
}

}  // namespace
}  // namespace spheret
