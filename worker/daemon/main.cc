// spheret-worker: the daemon on each machine. Registers its GPUs or CPU slots with the
// coordinator, pulls leases, runs spheret-lm for each, forwards the events, heartbeats.
//
//   spheret-worker --coordinator 127.0.0.1:7070 --cpu-slots 2                 # a CPU machine
//   spheret-worker --coordinator coord:7070 --gpus 0,1,2,3 --token-file worker.token
//                  --tls-ca ca.pem [--tls-cert worker.pem --tls-key worker.key]
//                  --checkpoint-root /shared/spheret/runs --data-root /shared/data
//
// SIGTERM or SIGINT: stop acquiring, let the trainers checkpoint, hand their trials back, exit.
// SIGKILL: the trainers die with it; what they started is ended by its next start, before it
// registers (worker/daemon/trainer_records.h).
#include <prometheus/exposer.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "worker/daemon/trainer_records.h"
#include "worker/daemon/worker.h"

namespace {

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop = true; }

// spheret-lm next to this binary (build/bin/ or an install's bin/).
std::string SiblingTrainer() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "spheret-lm" : (self.parent_path() / "spheret-lm").string();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"spheret-worker: runs the coordinator's trials on this machine"};
  spheret::worker::WorkerOptions options;
  options.lm_binary = SiblingTrainer();
  std::string token_file, metrics_listen = "127.0.0.1:9465";
  app.add_option("--coordinator", options.coordinator, "coordinator host:port")
      ->envname("SPHERET_COORDINATOR")
      ->capture_default_str();
  app.add_option("--gpus", options.gpus, "GPU indices to use, e.g. 0,1")->delimiter(',');
  app.add_option("--cpu-slots", options.cpu_slots, "CPU slots (a CPU worker)");
  app.add_option("--threads-per-slot", options.threads_per_slot, "OMP threads per CPU slot")
      ->capture_default_str();
  app.add_option("--worker-id", options.worker_id, "stable worker name (default: host name)");
  app.add_option("--host", options.host, "address gang peers reach this machine at")
      ->capture_default_str();
  app.add_option("--lm", options.lm_binary, "spheret-lm binary")->capture_default_str();
  app.add_option("--work-dir", options.work_dir, "configs, trainer logs, spool")
      ->capture_default_str();
  app.add_option("--checkpoint-root", options.checkpoint_root,
                 "run folders, shared by the workers (default: WORK_DIR/runs)");
  app.add_option("--data-root", options.data_root, "datasets folder for spheret-lm")
      ->capture_default_str();
  app.add_option("--grace", options.grace_ms, "ms between SIGTERM and SIGKILL of a trainer")
      ->capture_default_str();
  app.add_option("--acquire-interval", options.acquire_interval_ms,
                 "ms between requests for work while slots stay free (a slot that frees asks "
                 "at once)")
      ->capture_default_str();
  app.add_option("--token-file", token_file, "file holding a worker-role token");
  app.add_option("--tls-ca", options.tls.ca_file,
                 "CA certificate (PEM) that verifies the coordinator: use TLS")
      ->envname("SPHERET_TLS_CA");
  app.add_option("--tls-cert", options.tls.cert_file,
                 "client certificate (PEM) for a coordinator that requires mTLS")
      ->envname("SPHERET_TLS_CERT");
  app.add_option("--tls-key", options.tls.key_file, "client private key (PEM)")
      ->envname("SPHERET_TLS_KEY");
  app.add_option("--metrics-listen", metrics_listen, "/metrics address ('' to disable)")
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  spdlog::set_default_logger(spdlog::stderr_color_mt("worker"));
  if (!token_file.empty()) {
    std::ifstream in(token_file);
    if (!(in >> options.token)) {
      spdlog::error("--token-file {}: cannot read a token", token_file);
      return 2;
    }
  }
  if (absl::Status valid = spheret::worker::ValidateWorkerOptions(&options); !valid.ok()) {
    spdlog::error("{}", valid.ToString());
    return 2;
  }
  // Held until exit: no other worker runs on this work dir. Its earlier instance's leftovers are
  // ended before this one registers, so it never runs an attempt beside one of theirs.
  absl::StatusOr<spheret::worker::TrainerRecords> records =
      spheret::worker::TrainerRecords::Claim(options.work_dir);
  using Lines = absl::StatusOr<std::vector<std::string>>;
  const Lines ended = records.ok() ? records->EndLeftovers() : Lines(records.status());
  if (!ended.ok()) {
    spdlog::error("{}", ended.status().ToString());
    return 1;
  }
  for (const std::string& line : *ended) spdlog::warn("{}", line);
  spheret::worker::WorkerMetrics metrics;
  std::unique_ptr<prometheus::Exposer> exposer;
  if (!metrics_listen.empty()) {
    try {
      exposer = std::make_unique<prometheus::Exposer>(metrics_listen);
      exposer->RegisterCollectable(metrics.registry());
    } catch (const std::exception& e) {
      spdlog::error("--metrics-listen {}: {}", metrics_listen, e.what());
      return 1;
    }
  }
  spdlog::info("spheret-worker {}: {} {}, coordinator {}, trainer {}, work dir {}, metrics {}",
               options.worker_id, options.gpus.empty() ? options.cpu_slots : options.gpus.size(),
               options.gpus.empty() ? "CPU slot(s)" : "GPU(s)", options.coordinator,
               options.lm_binary, options.work_dir,
               exposer ? std::to_string(exposer->GetListeningPorts().front()) : "off");
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGPIPE, SIG_IGN);
  spheret::worker::Worker worker(options, &metrics);
  if (absl::Status status = worker.Run(g_stop); !status.ok()) {
    spdlog::error("{}", status.ToString());
    return 1;
  }
  return 0;
}
