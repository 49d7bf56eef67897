// spheret-coordinator: the gRPC API for clients and workers, the SQLite database, the scheduler
// and the Prometheus endpoint.
//
//   spheret-coordinator --db spheret.db                      # 127.0.0.1:7070, metrics :9464
//   spheret-coordinator --db spheret.db --create-token worker --token-name gpu-hosts
//   spheret-coordinator --db spheret.db --listen 0.0.0.0:7070 --tls-cert c.pem --tls-key k.pem
#include <prometheus/exposer.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <thread>

#include "base/clock.h"
#include "server/coordinator.h"
#include "server/metrics/metrics.h"
#include "server/rpc/server.h"
#include "server/store/store.h"
#include "server/tokens.h"

namespace {

constexpr char kVersion[] = "0.1.0";
volatile std::sig_atomic_t g_signal = 0;

void OnSignal(int signal) { g_signal = signal; }

int CreateToken(spheret::store::Store& store, const std::string& role, const std::string& name,
                const std::string& worker_id, int64_t ttl_s) {
  absl::StatusOr<spheret::Role> parsed = spheret::ParseRole(role);
  if (!parsed.ok()) {
    std::cerr << "--create-token: " << parsed.status().message() << "\n";
    return 2;
  }
  spheret::RealClock clock;
  absl::StatusOr<spheret::NewToken> token =
      spheret::TokenKeeper(&store, &clock).Create(*parsed, name, worker_id, ttl_s);
  if (!token.ok()) {
    std::cerr << "--create-token: " << token.status().message() << "\n";
    return 1;
  }
  std::cout << token->token << "\n";  // shown once; only its hash is stored
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"spheret-coordinator: schedules sweeps of spheret-lm trials onto workers"};
  std::string db_path = "spheret.db", metrics_listen = "127.0.0.1:9464";
  std::string create_token, token_name = "token", token_worker_id;
  spheret::rpc::ServerOptions server_options;
  spheret::CoordinatorOptions options;
  int64_t lease_ttl_s = 30, token_ttl_s = 0;
  app.add_option("--db", db_path, "SQLite database file (created when missing)")
      ->capture_default_str();
  app.add_option("--listen", server_options.listen, "gRPC address host:port (port 0: any)")
      ->capture_default_str();
  app.add_option("--metrics-listen", metrics_listen,
                 "Prometheus /metrics address host:port ('' to disable)")
      ->capture_default_str();
  app.add_option("--tls-cert", server_options.tls_cert_file, "server certificate (PEM)");
  app.add_option("--tls-key", server_options.tls_key_file, "server private key (PEM)");
  app.add_option("--tls-client-ca", server_options.tls_client_ca_file,
                 "CA for client certificates (enables mTLS)");
  app.add_flag("--require-tokens", server_options.require_tokens,
               "check bearer tokens even on loopback");
  app.add_flag("--insecure", server_options.insecure,
               "allow a non-loopback --listen without TLS (tokens are still required)");
  app.add_flag("--no-tokens", server_options.no_tokens,
               "accept calls without a token on a non-loopback --listen (a network you trust)");
  app.add_option("--lease-ttl", lease_ttl_s, "seconds a lease lives without a heartbeat")
      ->check(CLI::Range(2, 3600))
      ->capture_default_str();
  double retry_backoff_s = 5;
  app.add_option("--retry-backoff", retry_backoff_s,
                 "seconds before a failed trial's first retry (doubling per failure, at most 300)")
      ->check(CLI::Range(0.0, 300.0))
      ->capture_default_str();
  app.add_option("--max-trials", options.limits.max_trials, "largest grid accepted at submit")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  int64_t max_model_gib = options.limits.max_model_bytes >> 30;
  app.add_option("--max-model-gib", max_model_gib,
                 "largest fp32 training state of a trial's model (weights, grads, AdamW: 16 B a "
                 "parameter) accepted at submit; set it to the workers' memory")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->capture_default_str();
  app.add_option("--create-token", create_token,
                 "create a token with this role (admin|submit|worker|read), print it, exit");
  app.add_option("--token-name", token_name, "a name for --create-token's token");
  app.add_option("--token-worker-id", token_worker_id,
                 "the worker a --create-token worker token speaks for (required for worker)");
  app.add_option("--token-ttl", token_ttl_s,
                 "seconds until --create-token's token expires (default: never)")
      ->check(CLI::Range(int64_t{1}, spheret::kMaxTokenTtlS));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // --help prints and exits 0; a usage error exits 2
  }
  spdlog::set_default_logger(spdlog::stderr_color_mt("coordinator"));
  options.scheduler.lease_ttl_ms = lease_ttl_s * 1000;
  options.limits.max_model_bytes = max_model_gib << 30;
  options.scheduler.backoff_base_ms = static_cast<int64_t>(retry_backoff_s * 1000);
  // Three heartbeats fit in a lease, so one lost heartbeat never costs a lease.
  options.heartbeat_interval_ms = std::min<int64_t>(5'000, options.scheduler.lease_ttl_ms / 3);

  absl::StatusOr<std::unique_ptr<spheret::store::Store>> store =
      spheret::store::OpenSqliteStore({db_path});
  if (!store.ok()) {
    spdlog::error("{}", store.status().ToString());
    return 1;
  }
  if (!create_token.empty()) {
    return CreateToken(**store, create_token, token_name, token_worker_id, token_ttl_s);
  }
  if (absl::Status status = spheret::rpc::ValidateServerOptions(&server_options); !status.ok()) {
    spdlog::error("{}", status.ToString());
    return 2;
  }

  spheret::metrics::CoordinatorMetrics metrics(kVersion);
  std::unique_ptr<prometheus::Exposer> exposer;
  if (!metrics_listen.empty()) {
    try {
      exposer = std::make_unique<prometheus::Exposer>(metrics_listen);
    } catch (const std::exception& e) {
      spdlog::error("--metrics-listen {}: {}", metrics_listen, e.what());
      return 1;
    }
    exposer->RegisterCollectable(metrics.registry());
  }
  spheret::SteadyClock clock;  // leases and back-offs last as long as they should (no wall jumps)
  absl::StatusOr<std::unique_ptr<spheret::Coordinator>> coordinator =
      spheret::Coordinator::Start(store->get(), &metrics, &clock, options);
  if (!coordinator.ok()) {
    spdlog::error("restoring state from {}: {}", db_path, coordinator.status().ToString());
    return 1;
  }
  absl::StatusOr<std::unique_ptr<spheret::rpc::CoordinatorServer>> server =
      spheret::rpc::CoordinatorServer::Start(coordinator->get(), server_options);
  if (!server.ok()) {
    spdlog::error("{}", server.status().ToString());
    return 1;
  }
  const std::string host = server_options.listen.substr(0, server_options.listen.rfind(':'));
  spdlog::info(
      "spheret-coordinator {} listening on {}:{} (db {}, lease ttl {} s, tokens {}, "
      "tls {})",
      kVersion, host, (*server)->port(), db_path, lease_ttl_s,
      server_options.require_tokens ? "required" : "off",
      server_options.tls_cert_file.empty() ? "off" : "on");
  if (exposer) {
    spdlog::info("metrics on http://{}:{}/metrics",
                 host.empty() ? "127.0.0.1" : metrics_listen.substr(0, metrics_listen.rfind(':')),
                 exposer->GetListeningPorts().front());
  }
  // A machine-readable line for scripts that start it on port 0.
  std::printf("listening %d metrics %d\n", (*server)->port(),
              exposer ? exposer->GetListeningPorts().front() : 0);
  std::fflush(stdout);

  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  while (g_signal == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  spdlog::info("signal {}: shutting down", static_cast<int>(g_signal));
  const auto stop_start = std::chrono::steady_clock::now();
  const auto elapsed_ms = [&] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                 stop_start)
        .count();
  };
  (*coordinator)->BeginStop();
  (*server)->Shutdown();
  spdlog::info("RPC server stopped after {} ms", elapsed_ms());
  coordinator->reset();
  spdlog::info("coordinator stopped after {} ms", elapsed_ms());
  return 0;
}
