// The database of the paper's campaign, written through the coordinator's own ingest path: an
// in-process coordinator on 127.0.0.1:0 with its real SQLite file (WAL, synchronous = full), the
// paper's sweep files submitted over gRPC (examples/paper/fineweb-edu.yaml and openwebtext.yaml:
// 8 rows x 3 scales x 2 corpora = 48 trials of 8 GPUs each), and simulated 8-GPU workers that
// Register, Acquire, stream each trial's events with IngestEvents as the worker daemon does and
// Finish it SUCCEEDED. A trial reports (bench/campaign_events.h) train/loss every step; val/loss,
// val/ppl, train/loss_avg and its method's exported geometry on every attn and mlp layer of its
// depth (12, 24, 36 by scale) plus the model row every 250 steps; the L models their zero-shot
// scores. The reads of bench/campaign_reads.sh then run on the file it leaves.
//
//   build/bin/bench_campaign_db --db FILE [--fraction 1/8] [--sweep FILE ...] [--workers 4]
//
// --fraction scales each trial's steps (max_iters x fraction; the configs still say 50,000), so
// the read side can be timed at 1/8, 1/4, 1/2 and the whole campaign. The database at FILE is
// replaced. Prints the rows ingested, the rate and the file's size.
#include <grpcpp/grpcpp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "base/clock.h"
#include "bench/campaign_events.h"
#include "config/method_registry.h"
#include "config/trial_config.h"
#include "net/call_context.h"
#include "server/coordinator.h"
#include "server/rpc/server.h"
#include "server/sweep/trial_depth.h"
#include "spheret/v1/sweeps.grpc.pb.h"
#include "spheret/v1/workers.grpc.pb.h"

namespace {

using Clock = std::chrono::steady_clock;
using spheret::bench::CampaignTrial;
using spheret::v1::SweepService;
using spheret::v1::WorkerService;

struct Flags {
  std::string db;
  std::vector<std::string> sweeps = {"examples/paper/fineweb-edu.yaml",
                                     "examples/paper/openwebtext.yaml"};
  std::string fraction = "1";
  double share = 1.0;  // the fraction's value
  int workers = 4;
  int64_t interval = 250;        // steps between val and geometry points
  int64_t stream_steps = 2'500;  // steps an IngestEvents stream carries (one batch per interval)
};

// Totals over the worker threads.
struct Totals {
  std::atomic<int64_t> metrics_acked{0}, metrics_sent{0}, layer_values_sent{0}, scores_sent{0};
  std::atomic<int64_t> trials{0};
  std::atomic<bool> failed{false};
};

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

// Sets up a call as the worker daemon does: it waits (within the deadline) for the channel to
// connect rather than failing at once on a connection attempt that failed, e.g. on a loaded
// machine.
grpc::ClientContext* Prepare(grpc::ClientContext* context, absl::Duration timeout) {
  spheret::net::PrepareCall(context, {"", timeout, /*wait_for_ready=*/true});
  return context;
}

// Register and Acquire may be tried again after a transient failure (the coordinator hands back
// the leases of an Acquire whose answer reached no one): five tries, 0.1 s to 1.6 s apart. Every
// failure is printed with what it was.
template <typename Call>
bool Retried(const std::string& what, Call call) {
  for (int attempt = 1;; ++attempt) {
    const grpc::Status status = call();
    if (status.ok()) return true;
    const bool transient = status.error_code() == grpc::StatusCode::UNAVAILABLE ||
                           status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
    std::fprintf(stderr, "%s: %s (code %d)%s\n", what.c_str(), status.error_message().c_str(),
                 static_cast<int>(status.error_code()),
                 transient && attempt < 5 ? "; trying again" : "");
    if (!transient || attempt == 5) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(100 << (attempt - 1)));
  }
}

// "1/8" or "0.125" -> 0.125; 0 when it is neither, or not in (0, 1].
double ParseFraction(const std::string& text) {
  double value = 0, over = 1;
  char slash = 0;
  std::istringstream in(text);
  in >> value;
  if (in >> slash && (slash != '/' || !(in >> over) || over <= 0)) return 0;
  value /= over;
  return value > 0 && value <= 1 ? value : 0;
}

std::string WorkerId(int w) { return "campaign-" + std::to_string(w); }

// One IngestEvents stream of the steps [first, end), a batch per interval; the trial's last
// stream ends with its checkpoint and, for an L model, its zero-shot scores.
bool StreamSteps(WorkerService::Stub* stub, const CampaignTrial& trial, int64_t first, int64_t end,
                 Totals* totals) {
  grpc::ClientContext context;
  spheret::v1::IngestEventsResponse response;
  auto writer = stub->IngestEvents(Prepare(&context, absl::Minutes(10)), &response);
  for (int64_t from = first; from < end; from += trial.interval) {
    spheret::v1::EventBatch batch;
    batch.set_trial_id(trial.trial_id);
    batch.set_attempt(trial.attempt);
    const int64_t to = std::min(end, from + trial.interval);
    const spheret::bench::CampaignRows rows =
        spheret::bench::AddCampaignSteps(trial, from, to, &batch);
    totals->metrics_sent += rows.metrics;
    totals->layer_values_sent += rows.layer_values;
    if (to == trial.steps) {
      batch.set_checkpoint_step(trial.steps);
      batch.set_checkpoint_path("checkpoints/trial-" + std::to_string(trial.trial_id) + "/ckpt.pt");
      if (trial.zero_shot) {
        totals->scores_sent += spheret::bench::AddZeroShotScores(trial, trial.steps, 1, &batch);
      }
    }
    if (!writer->Write(batch)) break;
  }
  writer->WritesDone();
  const grpc::Status status = writer->Finish();
  if (!status.ok()) {
    std::fprintf(stderr, "trial %lld: IngestEvents: %s\n", static_cast<long long>(trial.trial_id),
                 status.error_message().c_str());
    return false;
  }
  totals->metrics_acked += response.metric_rows();
  return true;
}

// The simulated trainer of one lease: its events, then Finish SUCCEEDED.
bool RunTrial(WorkerService::Stub* stub, const std::string& worker, const spheret::v1::Lease& lease,
              const Flags& flags, Totals* totals) {
  const spheret::TrialConfig config(lease.config_json());
  const absl::StatusOr<spheret::TrainConfig> resolved = config.Resolve();
  if (!resolved.ok()) {
    std::fprintf(stderr, "trial %lld: %s\n", static_cast<long long>(lease.trial_id()),
                 resolved.status().ToString().c_str());
    return false;
  }
  CampaignTrial trial;
  trial.trial_id = lease.trial_id();
  trial.attempt = lease.attempt();
  trial.method = std::string(spheret::SpecOf(resolved->connection.method).id);
  trial.depth = spheret::TrialDepth(config);
  trial.steps = std::llround(static_cast<double>(resolved->max_iters) * flags.share);
  trial.interval = flags.interval;
  trial.zero_shot = resolved->scale == "L";
  for (int64_t first = 0; first < trial.steps; first += flags.stream_steps) {
    const int64_t end = std::min(trial.steps, first + flags.stream_steps);
    if (!StreamSteps(stub, trial, first, end, totals)) return false;
  }
  grpc::ClientContext context;
  spheret::v1::FinishRequest finish;
  finish.set_worker_id(worker);
  finish.set_trial_id(lease.trial_id());
  finish.set_attempt(lease.attempt());
  finish.set_outcome(spheret::v1::TRIAL_STATE_SUCCEEDED);
  spheret::v1::FinishResponse done;
  const grpc::Status status = stub->Finish(Prepare(&context, absl::Seconds(60)), finish, &done);
  if (!status.ok()) {
    std::fprintf(stderr, "trial %lld: Finish: %s\n", static_cast<long long>(lease.trial_id()),
                 status.error_message().c_str());
  }
  return status.ok();
}

// One simulated 8-GPU worker: Register, then Acquire one trial at a time and run it, until an
// Acquire leases nothing.
void DriveWorker(const std::shared_ptr<grpc::Channel>& channel, int w, const Flags& flags,
                 Totals* totals) {
  auto stub = WorkerService::NewStub(channel);
  const std::string worker = WorkerId(w);
  spheret::v1::RegisterRequest registration;
  registration.set_worker_id(worker);
  for (int gpu = 0; gpu < 8; ++gpu) registration.add_gpus(gpu);
  if (!Retried(worker + ": Register", [&] {
        grpc::ClientContext context;
        spheret::v1::RegisterResponse response;
        return stub->Register(Prepare(&context, absl::Seconds(30)), registration, &response);
      })) {
    totals->failed = true;
    return;
  }
  while (!totals->failed) {
    spheret::v1::AcquireRequest request;
    request.set_worker_id(worker);
    request.set_free_slots(8);
    spheret::v1::AcquireResponse response;
    if (!Retried(worker + ": Acquire", [&] {
          grpc::ClientContext context;
          response.Clear();
          return stub->Acquire(Prepare(&context, absl::Seconds(30)), request, &response);
        })) {
      totals->failed = true;
      return;
    }
    if (response.leases().empty()) return;
    for (const spheret::v1::Lease& lease : response.leases()) {
      if (!RunTrial(stub.get(), worker, lease, flags, totals)) totals->failed = true;
      ++totals->trials;
    }
  }
}

bool Submit(SweepService::Stub* sweeps, const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) {
    std::fprintf(stderr, "%s: cannot read the sweep file\n", path.c_str());
    return false;
  }
  spheret::v1::SubmitSweepRequest submit;
  submit.set_spec_yaml(text.str());
  spheret::v1::SubmitSweepResponse submitted;
  grpc::ClientContext context;
  const grpc::Status status =
      sweeps->SubmitSweep(Prepare(&context, absl::Seconds(60)), submit, &submitted);
  if (!status.ok()) {
    std::fprintf(stderr, "%s: %s\n", path.c_str(), status.error_message().c_str());
    return false;
  }
  std::printf("campaign: %s: sweep %lld, %lld trials\n", path.c_str(),
              static_cast<long long>(submitted.sweep_id()),
              static_cast<long long>(submitted.created_trials()));
  return true;
}

int64_t FileBytes(const std::string& path) {
  std::error_code error;
  const auto size = std::filesystem::file_size(path, error);
  return error ? 0 : static_cast<int64_t>(size);
}

// Submits the sweeps and drives the workers to the end of every trial. False on any failure.
bool WriteCampaign(const Flags& flags, const std::string& target, Totals* totals) {
  auto channel = grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
  auto sweeps = SweepService::NewStub(channel);
  for (const std::string& path : flags.sweeps) {
    if (!Submit(sweeps.get(), path)) return false;
  }
  std::vector<std::thread> pool;
  for (int w = 0; w < flags.workers; ++w) {
    pool.emplace_back([&, w] {
      grpc::ChannelArguments args;
      args.SetInt("spheret.channel", w);  // distinct connections
      DriveWorker(grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args), w,
                  flags, totals);
    });
  }
  for (std::thread& t : pool) t.join();
  return !totals->failed;
}

void PrintTotals(const Flags& flags, const Totals& totals, double seconds, int64_t bytes) {
  const int64_t rows = totals.metrics_sent + totals.layer_values_sent;
  std::printf(
      "campaign: fraction %s: %lld trials SUCCEEDED in %.1f s; sent %lld metric rows (%lld "
      "acknowledged), %lld layer values, %lld zero-shot scores: %.0f rows/s (metric rows + layer "
      "values) through IngestEvents\n",
      flags.fraction.c_str(), static_cast<long long>(totals.trials.load()), seconds,
      static_cast<long long>(totals.metrics_sent.load()),
      static_cast<long long>(totals.metrics_acked.load()),
      static_cast<long long>(totals.layer_values_sent.load()),
      static_cast<long long>(totals.scores_sent.load()), static_cast<double>(rows) / seconds);
  std::printf("campaign: database %s: %.1f MB (file + WAL), %.1f MB per million rows\n",
              flags.db.c_str(), bytes / 1e6, bytes / 1e6 / (static_cast<double>(rows) / 1e6));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_campaign_db: the paper's campaign database, through the coordinator"};
  Flags flags;
  app.add_option("--db", flags.db, "the database file to write (replaced)")->required();
  app.add_option("--sweep", flags.sweeps, "sweep files to submit (default: the paper's two)");
  app.add_option("--fraction", flags.fraction, "share of each trial's steps: 1/8, 0.25, 1, ...");
  app.add_option("--workers", flags.workers, "simulated 8-GPU workers (concurrent trials)")
      ->check(CLI::PositiveNumber);
  app.add_option("--interval", flags.interval, "steps between val and geometry points")
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  flags.share = ParseFraction(flags.fraction);
  if (flags.share <= 0) {
    std::fprintf(stderr, "--fraction %s: give a share in (0, 1] as 1/8 or 0.125\n",
                 flags.fraction.c_str());
    return 2;
  }
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(flags.db + suffix);

  spheret::store::StoreOptions store_options{flags.db};
  store_options.synchronous_full = true;
  auto store = std::move(*spheret::store::OpenSqliteStore(store_options));
  spheret::metrics::CoordinatorMetrics metrics("campaign");
  spheret::RealClock clock;
  spheret::CoordinatorOptions options;
  options.scheduler.lease_ttl_ms = 3'600'000;  // no heartbeats: a trial's events come in seconds
  auto coordinator =
      std::move(*spheret::Coordinator::Start(store.get(), &metrics, &clock, options));
  spheret::rpc::ServerOptions server_options;
  server_options.listen = "127.0.0.1:0";
  auto server =
      std::move(*spheret::rpc::CoordinatorServer::Start(coordinator.get(), server_options));
  const std::string target = "127.0.0.1:" + std::to_string(server->port());

  Totals totals;
  const auto start = Clock::now();
  const bool ok = WriteCampaign(flags, target, &totals);
  const double seconds = Seconds(start);
  server->Shutdown();
  coordinator.reset();
  store.reset();
  PrintTotals(flags, totals, seconds, FileBytes(flags.db) + FileBytes(flags.db + "-wal"));
  return ok ? 0 : 1;
}
