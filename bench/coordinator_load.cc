// Load benchmark of the coordinator over real gRPC on loopback: an in-process coordinator on
// 127.0.0.1:0 (SQLite file in a temp folder) and simulated workers on client threads.
//
// Prints: expand-and-submit time of a 10,000-trial sweep; Acquire latency p50/p99 with 500
// simulated workers (each Acquire -> Finish -> Acquire ... until the sweep is drained); and
// sustained metric rows/s into SQLite (concurrent IngestEvents streams of 1,000-row batches).
//
//   build/bin/bench_coordinator_load [--trials 10000] [--workers 500] [--threads 16]
//                                    [--seconds 5] [--streams 8] [--sync full|normal]
#include <grpcpp/grpcpp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "base/clock.h"
#include "server/coordinator.h"
#include "server/rpc/server.h"
#include "spheret/v1/sweeps.grpc.pb.h"
#include "spheret/v1/workers.grpc.pb.h"

namespace {

using Clock = std::chrono::steady_clock;
using spheret::v1::SweepService;
using spheret::v1::WorkerService;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

// A grid of exactly `trials` trials: learning_rate x warmup_iters x seeds.
std::string SweepYaml(const std::string& name, int trials) {
  std::string seeds;
  const int per_seed = 100;
  for (int s = 0; s < std::max(trials / per_seed, 1); ++s)
    seeds += (s ? ", " : "") + std::to_string(s);
  std::string lrs, warmups;
  for (int i = 1; i <= 10; ++i) {
    lrs += (i > 1 ? ", " : "") + std::to_string(i) + "e-4";
    warmups += (i > 1 ? ", " : "") + std::to_string(10 * i);
  }
  return "name: " + name +
         "\ndataset: fortunes\nbase: {scale: xs, max_iters: 1000}\n"
         "parameters:\n  learning_rate: {values: [" +
         lrs + "]}\n  warmup_iters: {values: [" + warmups + "]}\nseeds: [" + seeds + "]\n";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_coordinator_load: the coordinator under simulated workers"};
  int trials = 10'000, workers = 500, threads = 16, seconds = 5, streams = 8;
  std::string sync = "full";
  app.add_option("--trials", trials, "trials of the submitted sweep (a multiple of 100)");
  app.add_option("--workers", workers, "simulated single-slot workers");
  app.add_option("--threads", threads, "client threads driving the workers");
  app.add_option("--seconds", seconds, "duration of the ingestion phase");
  app.add_option("--streams", streams, "concurrent IngestEvents streams");
  app.add_option("--sync", sync, "SQLite synchronous mode")
      ->check(CLI::IsMember({"full", "normal"}));
  CLI11_PARSE(app, argc, argv);

  const auto dir =
      std::filesystem::temp_directory_path() / ("spheret_bench_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  spheret::store::StoreOptions store_options{(dir / "spheret.db").string()};
  store_options.synchronous_full = sync == "full";
  auto store = std::move(*spheret::store::OpenSqliteStore(store_options));
  spheret::metrics::CoordinatorMetrics metrics("bench");
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
              sync.c_str(), std::thread::hardware_concurrency());

  // 1. Expand and submit.
  auto channel = grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
  auto sweeps = SweepService::NewStub(channel);
  spheret::v1::SubmitSweepRequest submit;
  submit.set_spec_yaml(SweepYaml("load", trials));
  spheret::v1::SubmitSweepResponse submitted;
  auto start = Clock::now();
  grpc::ClientContext submit_context;
  grpc::Status status = sweeps->SubmitSweep(&submit_context, submit, &submitted);
  const double submit_s = Seconds(start);
  if (!status.ok()) {
    std::fprintf(stderr, "submit: %s\n", status.error_message().c_str());
    return 1;
  }
  std::printf("submit: %lld trials expanded and stored in %.3f s (target < 2 s)\n",
              static_cast<long long>(submitted.created_trials()), submit_s);

  // 2. Acquire latency: `workers` single-slot workers drain the sweep.
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (int i = 0; i < threads; ++i) {
    grpc::ChannelArguments args;
    args.SetInt("spheret.channel", i);  // distinct connections
    channels.push_back(grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args));
  }
  for (int w = 0; w < workers; ++w) {
    auto stub = WorkerService::NewStub(channels[w % threads]);
    grpc::ClientContext context;
    spheret::v1::RegisterRequest request;
    request.set_worker_id("sim-" + std::to_string(w));
    request.set_cpu_slots(1);
    spheret::v1::RegisterResponse response;
    if (!stub->Register(&context, request, &response).ok()) return 1;
  }
  std::vector<std::vector<double>> latencies(threads);
  std::atomic<int64_t> finished{0};
  start = Clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      auto stub = WorkerService::NewStub(channels[t]);
      bool drained = false;
      while (!drained) {
        drained = true;
        for (int w = t; w < workers; w += threads) {
          grpc::ClientContext context;
          spheret::v1::AcquireRequest request;
          request.set_worker_id("sim-" + std::to_string(w));
          request.set_free_slots(1);
          spheret::v1::AcquireResponse response;
          const auto call = Clock::now();
          if (!stub->Acquire(&context, request, &response).ok()) continue;
          latencies[t].push_back(Seconds(call));
          for (const auto& lease : response.leases()) {
            drained = false;
            grpc::ClientContext finish_context;
            spheret::v1::FinishRequest finish;
            finish.set_worker_id(request.worker_id());
            finish.set_trial_id(lease.trial_id());
            finish.set_attempt(lease.attempt());
            finish.set_outcome(spheret::v1::TRIAL_STATE_SUCCEEDED);
            spheret::v1::FinishResponse done;
            if (stub->Finish(&finish_context, finish, &done).ok()) ++finished;
          }
        }
      }
    });
  }
  for (std::thread& t : pool) t.join();
  pool.clear();
  const double drain_s = Seconds(start);
  std::vector<double> all;
  for (const auto& part : latencies) all.insert(all.end(), part.begin(), part.end());
  std::sort(all.begin(), all.end());
  auto percentile = [&](double q) { return all[static_cast<size_t>(q * (all.size() - 1))] * 1e3; };
  std::printf(
      "acquire: %zu calls by %d workers on %d client threads, %lld trials leased and "
      "finished in %.2f s; latency p50 %.2f ms, p99 %.2f ms (target p99 < 50 ms)\n",
      all.size(), workers, threads, static_cast<long long>(finished.load()), drain_s,
      percentile(0.5), percentile(0.99));

  // 3. Sustained ingestion: `streams` running trials, each streaming 1,000-row batches.
  submit.set_spec_yaml(SweepYaml("ingest", 100));
  grpc::ClientContext ingest_context;
  sweeps->SubmitSweep(&ingest_context, submit, &submitted);
  auto worker_stub = WorkerService::NewStub(channel);
  {
    grpc::ClientContext context;
    spheret::v1::RegisterRequest request;
    request.set_worker_id("ingest");
    request.set_cpu_slots(streams);
    spheret::v1::RegisterResponse response;
    worker_stub->Register(&context, request, &response);
  }
  grpc::ClientContext acquire_context;
  spheret::v1::AcquireRequest acquire;
  acquire.set_worker_id("ingest");
  acquire.set_free_slots(streams);
  acquire.set_max_trials(streams);
  spheret::v1::AcquireResponse leased;
  worker_stub->Acquire(&acquire_context, acquire, &leased);
  std::atomic<int64_t> rows{0};
  const auto deadline = Clock::now() + std::chrono::seconds(seconds);
  start = Clock::now();
  for (int s = 0; s < leased.leases_size(); ++s) {
    pool.emplace_back([&, s] {
      auto stub = WorkerService::NewStub(channels[s % threads]);
      const auto& lease = leased.leases(s);
      int64_t step = 0;
      while (Clock::now() < deadline) {
        grpc::ClientContext context;
        spheret::v1::IngestEventsResponse response;
        auto writer = stub->IngestEvents(&context, &response);
        spheret::v1::EventBatch batch;
        batch.set_trial_id(lease.trial_id());
        batch.set_attempt(lease.attempt());
        for (int i = 0; i < 1000; ++i, ++step) {
          auto* row = batch.add_metrics();
          row->set_name(i % 4 == 0   ? "train/loss"
                        : i % 4 == 1 ? "lr"
                        : i % 4 == 2 ? "grad_norm"
                                     : "tokens_per_sec");
          row->set_step(step / 4);
          row->set_value(1.0 / (step + 1));
        }
        writer->Write(batch);
        writer->WritesDone();
        if (writer->Finish().ok()) rows += response.metric_rows();
      }
    });
  }
  for (std::thread& t : pool) t.join();
  const double ingest_s = Seconds(start);
  std::printf(
      "ingest: %lld metric rows acknowledged by %d streams in %.2f s = %.0f rows/s "
      "(target >= 100,000)\n",
      static_cast<long long>(rows.load()), leased.leases_size(), ingest_s, rows.load() / ingest_s);
  server->Shutdown();
  coordinator.reset();
  store.reset();
  std::filesystem::remove_all(dir);
  return 0;
}
