// Load benchmark of the coordinator over real gRPC on loopback: an in-process coordinator on
// 127.0.0.1:0 (SQLite file in a temp folder, its /metrics exposer on 127.0.0.1:0) and simulated
// workers on client threads. With its defaults it measures issue 32's goal load, one line per
// figure beside its goal:
//   submit:  expand and store a 100,000-trial sweep (goal < 2 s);
//   acquire: Acquire p50/p99 with 2,000 single-slot workers, each Acquire -> Finish -> Acquire
//            until the sweep is drained or --acquire-seconds pass (goal p99 < 20 ms);
//   rpc floor: the same client threads calling an RPC that decides and commits nothing;
//   scrape:  GET /metrics of the real exposer with --workers trials running (goal < 100 ms);
//   ingest:  metric rows/s over --seconds of IngestEvents streams of 1,000-row batches, WAL
//            checkpoints included (goal >= 1,000,000), and the database's size per million rows;
//   floor:   this machine's single-writer SQLite insert rate into a table of one row per value,
//            shaped like `scalars` of schema versions 1 to 10 (no gRPC, no coordinator): the
//            ceiling of the ingest figure before version 11 packed a batch's values of a metric
//            into one scalar_blocks row.
//
//   build/bin/bench_coordinator_load [--trials 100000] [--workers 2000] [--threads 16]
//       [--acquire-seconds 15] [--seconds 60] [--streams 8] [--floor-rows 2000000] [--sync full]
#include <grpcpp/grpcpp.h>
#include <prometheus/exposer.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "base/clock.h"
#include "bench/load_probes.h"
#include "bench/load_samples.h"
#include "protocol/metric_catalog.h"
#include "server/coordinator.h"
#include "server/rpc/server.h"
#include "spheret/v1/sweeps.grpc.pb.h"
#include "spheret/v1/workers.grpc.pb.h"

namespace {

using Clock = std::chrono::steady_clock;
using spheret::bench::Percentile;
using spheret::bench::Sorted;
using spheret::bench::SweepYaml;
using spheret::v1::SweepService;
using spheret::v1::WorkerService;
namespace protocol = spheret::protocol;

struct Flags {
  int trials = 100'000, workers = 2'000, threads = 16, acquire_seconds = 15, seconds = 60;
  int streams = 8;
  int64_t floor_rows = 2'000'000;
  std::string sync = "full";
};

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

const char* Verdict(bool met) { return met ? "met" : "NOT met"; }

std::string WorkerId(int w) { return "sim-" + std::to_string(w); }

// One client thread's share of the simulated workers: Acquire, then Finish what was leased, until
// an Acquire round leases nothing or `deadline` passes. Appends each Acquire's latency (s).
int64_t DriveWorkers(WorkerService::Stub* stub, int first, int step, int workers,
                     Clock::time_point deadline, std::vector<double>* latencies,
                     std::vector<double>* finishes) {
  int64_t finished = 0;
  for (bool drained = false; !drained && Clock::now() < deadline;) {
    drained = true;
    for (int w = first; w < workers && Clock::now() < deadline; w += step) {
      grpc::ClientContext context;
      spheret::v1::AcquireRequest request;
      request.set_worker_id(WorkerId(w));
      request.set_free_slots(1);
      spheret::v1::AcquireResponse response;
      const auto call = Clock::now();
      if (!stub->Acquire(&context, request, &response).ok()) continue;
      latencies->push_back(Seconds(call));
      for (const auto& lease : response.leases()) {
        drained = false;
        grpc::ClientContext finish_context;
        spheret::v1::FinishRequest finish;
        finish.set_worker_id(request.worker_id());
        finish.set_trial_id(lease.trial_id());
        finish.set_attempt(lease.attempt());
        finish.set_outcome(spheret::v1::TRIAL_STATE_SUCCEEDED);
        spheret::v1::FinishResponse done;
        const auto finish_call = Clock::now();
        if (!stub->Finish(&finish_context, finish, &done).ok()) continue;
        finishes->push_back(Seconds(finish_call));
        ++finished;
      }
    }
  }
  return finished;
}

void AcquirePhase(const Flags& flags, const std::vector<std::shared_ptr<grpc::Channel>>& channels) {
  std::vector<std::vector<double>> latencies(flags.threads), finishes(flags.threads);
  std::atomic<int64_t> finished{0};
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::seconds(flags.acquire_seconds);
  std::vector<std::thread> pool;
  for (int t = 0; t < flags.threads; ++t) {
    pool.emplace_back([&, t] {
      auto stub = WorkerService::NewStub(channels[t]);
      finished += DriveWorkers(stub.get(), t, flags.threads, flags.workers, deadline, &latencies[t],
                               &finishes[t]);
    });
  }
  for (std::thread& t : pool) t.join();
  const double drain_s = Seconds(start);
  std::vector<double> all = Sorted(latencies), ends = Sorted(finishes);
  if (all.empty()) return;
  const double p99 = Percentile(all, 0.99);
  std::printf(
      "acquire: p99 %.2f ms, p50 %.2f ms with %d workers on %d client threads (%zu calls, %lld "
      "trials leased and finished in %.2f s; Finish p50 %.2f ms, p99 %.2f ms) (goal p99 < 20 ms: "
      "%s)\n",
      p99, Percentile(all, 0.5), flags.workers, flags.threads, all.size(),
      static_cast<long long>(finished.load()), drain_s, Percentile(ends, 0.5),
      Percentile(ends, 0.99), Verdict(p99 < 20));
}

// The same client threads calling, for `seconds`, an RPC that decides nothing and commits nothing
// (a Heartbeat of an unknown worker): the share of the Acquire figure that is gRPC on loopback
// and waiting for a CPU.
void RpcFloorPhase(const Flags& flags, const std::vector<std::shared_ptr<grpc::Channel>>& channels,
                   int seconds) {
  std::vector<std::vector<double>> latencies(flags.threads);
  const auto deadline = Clock::now() + std::chrono::seconds(seconds);
  std::vector<std::thread> pool;
  for (int t = 0; t < flags.threads; ++t) {
    pool.emplace_back([&, t] {
      auto stub = WorkerService::NewStub(channels[t]);
      while (Clock::now() < deadline) {
        grpc::ClientContext context;
        spheret::v1::HeartbeatRequest request;
        request.set_worker_id("unknown-" + std::to_string(t));
        spheret::v1::HeartbeatResponse response;
        const auto call = Clock::now();
        if (stub->Heartbeat(&context, request, &response).ok()) {
          latencies[t].push_back(Seconds(call));
        }
      }
    });
  }
  for (std::thread& t : pool) t.join();
  const std::vector<double> all = Sorted(latencies);
  std::printf(
      "rpc floor: p99 %.2f ms, p50 %.2f ms for %zu Heartbeats that decide and commit nothing, "
      "on the same %d client threads\n",
      Percentile(all, 0.99), Percentile(all, 0.5), all.size(), flags.threads);
}

// Each worker leases one trial and keeps it; each running trial reports its four live gauges.
// Returns the leases.
std::vector<spheret::v1::Lease> StartTrials(const Flags& flags, WorkerService::Stub* stub) {
  std::vector<spheret::v1::Lease> running;
  for (int w = 0; w < flags.workers; ++w) {
    grpc::ClientContext context;
    spheret::v1::AcquireRequest request;
    request.set_worker_id(WorkerId(w));
    request.set_free_slots(1);
    spheret::v1::AcquireResponse response;
    if (!stub->Acquire(&context, request, &response).ok()) continue;
    for (const auto& lease : response.leases()) running.push_back(lease);
  }
  for (const spheret::v1::Lease& lease : running) {
    grpc::ClientContext context;
    spheret::v1::IngestEventsResponse response;
    auto writer = stub->IngestEvents(&context, &response);
    spheret::v1::EventBatch batch;
    batch.set_trial_id(lease.trial_id());
    batch.set_attempt(lease.attempt());
    for (const char* name : {protocol::kTrainLoss, protocol::kValLoss, protocol::kLearningRate,
                             protocol::kTokensPerSec}) {
      auto* row = batch.add_metrics();
      row->set_name(name);
      row->set_value(1.5);
    }
    writer->Write(batch);
    writer->WritesDone();
    writer->Finish().IgnoreError();
  }
  return running;
}

void ScrapePhase(int port, size_t running) {
  std::vector<double> times;
  int64_t bytes = 0;
  for (int i = 0; i < 5; ++i) {
    const auto start = Clock::now();
    bytes = spheret::bench::HttpGet(port, "/metrics");
    times.push_back(Seconds(start) * 1e3);
  }
  std::sort(times.begin(), times.end());
  std::printf(
      "scrape: slowest of 5 GET /metrics %.2f ms, median %.2f ms, %lld bytes with %zu trials "
      "running (goal < 100 ms: %s)\n",
      times.back(), times[2], static_cast<long long>(bytes), running,
      Verdict(bytes > 0 && times.back() < 100));
}

// One stream's load: IngestEvents calls of one 1,000-row batch each until `deadline`.
int64_t StreamRows(WorkerService::Stub* stub, const spheret::v1::Lease& lease,
                   Clock::time_point deadline) {
  int64_t step = 1'000'000, rows = 0;  // past StartTrials' rows
  while (Clock::now() < deadline) {
    grpc::ClientContext context;
    spheret::v1::IngestEventsResponse response;
    auto writer = stub->IngestEvents(&context, &response);
    spheret::v1::EventBatch batch;
    batch.set_trial_id(lease.trial_id());
    batch.set_attempt(lease.attempt());
    for (int i = 0; i < 1000; ++i, ++step) {
      auto* row = batch.add_metrics();
      row->set_name(i % 4 == 0   ? protocol::kTrainLoss
                    : i % 4 == 1 ? protocol::kLearningRate
                    : i % 4 == 2 ? protocol::kGradNorm
                                 : protocol::kTokensPerSec);
      row->set_step(step / 4);
      row->set_value(1.0 / (step + 1));
    }
    writer->Write(batch);
    writer->WritesDone();
    if (writer->Finish().ok()) rows += response.metric_rows();
  }
  return rows;
}

int64_t FileBytes(const std::filesystem::path& path) {
  std::error_code error;
  const auto size = std::filesystem::file_size(path, error);
  return error ? 0 : static_cast<int64_t>(size);
}

void IngestPhase(const Flags& flags, const std::vector<std::shared_ptr<grpc::Channel>>& channels,
                 const std::vector<spheret::v1::Lease>& running, const std::string& db_path) {
  const int streams = std::min<int>(flags.streams, static_cast<int>(running.size()));
  const int64_t bytes_before = FileBytes(db_path) + FileBytes(db_path + "-wal");
  std::atomic<int64_t> rows{0};
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::seconds(flags.seconds);
  std::vector<std::thread> pool;
  for (int s = 0; s < streams; ++s) {
    pool.emplace_back([&, s] {
      auto stub = WorkerService::NewStub(channels[s % channels.size()]);
      rows += StreamRows(stub.get(), running[s], deadline);
    });
  }
  for (std::thread& t : pool) t.join();
  const double ingest_s = Seconds(start);
  const double rate = static_cast<double>(rows.load()) / ingest_s;
  const int64_t bytes = FileBytes(db_path) + FileBytes(db_path + "-wal") - bytes_before;
  std::printf(
      "ingest: %.0f metric rows/s sustained, %lld rows acknowledged by %d streams in %.2f s "
      "(goal >= 1,000,000: %s)\n",
      rate, static_cast<long long>(rows.load()), streams, ingest_s, Verdict(rate >= 1e6));
  std::printf("ingest: database grew %.1f MB per million rows (%.1f MB file + WAL for %lld rows)\n",
              bytes / 1e6 / (rows.load() / 1e6), bytes / 1e6, static_cast<long long>(rows.load()));
}

bool Register(const Flags& flags, const std::vector<std::shared_ptr<grpc::Channel>>& channels) {
  for (int w = 0; w < flags.workers; ++w) {
    auto stub = WorkerService::NewStub(channels[w % flags.threads]);
    grpc::ClientContext context;
    spheret::v1::RegisterRequest request;
    request.set_worker_id(WorkerId(w));
    request.set_cpu_slots(1);
    spheret::v1::RegisterResponse response;
    if (!stub->Register(&context, request, &response).ok()) return false;
  }
  return true;
}

bool Submit(SweepService::Stub* sweeps, const std::string& name, int trials) {
  spheret::v1::SubmitSweepRequest submit;
  submit.set_spec_yaml(SweepYaml(name, trials));
  spheret::v1::SubmitSweepResponse submitted;
  const auto start = Clock::now();
  grpc::ClientContext context;
  grpc::Status status = sweeps->SubmitSweep(&context, submit, &submitted);
  const double submit_s = Seconds(start);
  if (!status.ok()) {
    std::fprintf(stderr, "submit: %s\n", status.error_message().c_str());
    return false;
  }
  std::printf("submit: %lld trials expanded and stored in %.3f s (goal < 2 s: %s)\n",
              static_cast<long long>(submitted.created_trials()), submit_s, Verdict(submit_s < 2));
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_coordinator_load: the coordinator under simulated workers"};
  Flags flags;
  app.add_option("--trials", flags.trials, "trials of the submitted sweep (a multiple of 100)");
  app.add_option("--workers", flags.workers, "simulated single-slot workers");
  app.add_option("--threads", flags.threads, "client threads driving the workers")
      ->check(CLI::PositiveNumber);
  app.add_option("--acquire-seconds", flags.acquire_seconds,
                 "longest duration of the Acquire phase (it ends earlier when drained)");
  app.add_option("--seconds", flags.seconds, "duration of the ingestion phase");
  app.add_option("--streams", flags.streams, "concurrent IngestEvents streams");
  app.add_option("--floor-rows", flags.floor_rows, "rows of the SQLite floor probe (0: none)");
  app.add_option("--sync", flags.sync, "SQLite synchronous mode")
      ->check(CLI::IsMember({"full", "normal"}));
  CLI11_PARSE(app, argc, argv);

  const auto dir =
      std::filesystem::temp_directory_path() / ("spheret_bench_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string db_path = (dir / "spheret.db").string();
  spheret::store::StoreOptions store_options{db_path};
  store_options.synchronous_full = flags.sync == "full";
  auto store = std::move(*spheret::store::OpenSqliteStore(store_options));
  spheret::metrics::CoordinatorMetrics metrics("bench");
  prometheus::Exposer exposer("127.0.0.1:0");
  exposer.RegisterCollectable(metrics.registry());
  spheret::RealClock clock;
  spheret::CoordinatorOptions options;
  options.scheduler.lease_ttl_ms = 600'000;
  auto coordinator =
      std::move(*spheret::Coordinator::Start(store.get(), &metrics, &clock, options));
  spheret::rpc::ServerOptions server_options;
  server_options.listen = "127.0.0.1:0";
  auto server =
      std::move(*spheret::rpc::CoordinatorServer::Start(coordinator.get(), server_options));
  const std::string target = "127.0.0.1:" + std::to_string(server->port());
  std::printf("coordinator on %s, SQLite synchronous=%s, %u hardware threads\n", target.c_str(),
              flags.sync.c_str(), std::thread::hardware_concurrency());

  grpc::ChannelArguments client_args;
  client_args.SetMaxReceiveMessageSize(256 << 20);  // as the CLI's: a submit answers every key
  auto channel = grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), client_args);
  auto sweeps = SweepService::NewStub(channel);
  if (!Submit(sweeps.get(), "load", flags.trials)) return 1;
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (int i = 0; i < flags.threads; ++i) {
    grpc::ChannelArguments args;
    args.SetInt("spheret.channel", i);  // distinct connections
    channels.push_back(grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args));
  }
  if (!Register(flags, channels)) return 1;
  AcquirePhase(flags, channels);
  RpcFloorPhase(flags, channels, std::min(flags.acquire_seconds, 5));

  // The scrape and the ingest run with every worker holding one trial of a fresh sweep.
  {
    spheret::v1::SubmitSweepRequest submit;
    submit.set_spec_yaml(SweepYaml("running", std::max(flags.workers, 100)));
    spheret::v1::SubmitSweepResponse submitted;
    grpc::ClientContext context;
    if (!sweeps->SubmitSweep(&context, submit, &submitted).ok()) return 1;
  }
  auto worker_stub = WorkerService::NewStub(channel);
  const std::vector<spheret::v1::Lease> running = StartTrials(flags, worker_stub.get());
  ScrapePhase(exposer.GetListeningPorts().at(0), running.size());
  IngestPhase(flags, channels, running, db_path);
  server->Shutdown();
  coordinator.reset();
  store.reset();

  if (flags.floor_rows > 0) {
    const double floor = spheret::bench::SqliteInsertRate(
        (dir / "floor.db").string(), flags.sync == "full", flags.floor_rows, 8'000);
    std::printf(
        "floor: %.0f rows/s inserted by one SQLite writer into a scalars-shaped table, 8,000 "
        "rows a transaction, no gRPC (synchronous=%s)\n",
        floor, flags.sync.c_str());
  }
  std::filesystem::remove_all(dir);
  return 0;
}
