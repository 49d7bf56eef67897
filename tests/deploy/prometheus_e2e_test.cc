// Debian's `prometheus` server on loopback scrapes a live spheret-coordinator and spheret-worker
// (training a real spheret-lm trial) with deploy/'s recording and alert rules; every PromQL
// expression of the Grafana dashboards (variables substituted) must return data through the HTTP
// API. Bounded: each wait has a deadline and every process is stopped at the end.
#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <thread>

#include "spheret/v1/sweeps.grpc.pb.h"
#include "tests/deploy/dashboards.h"
#include "tests/integration/child_process.h"
#include "tests/server/metrics_check.h"

namespace spheret {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing_util::ChildProcess;
using testing_util::HttpGet;
using testing_util::ReadText;
using Clock = std::chrono::steady_clock;

const fs::path kSource = SPHERET_SOURCE_DIR;

std::string UrlEncode(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      char hex[4];
      std::snprintf(hex, sizeof(hex), "%%%02X", c);
      out += hex;
    }
  }
  return out;
}

// A port nothing listens on now (the kernel's choice for port 0).
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
  bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  socklen_t length = sizeof(address);
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  close(fd);
  return ntohs(address.sin_port);
}

bool WaitUntil(int seconds, const std::function<bool()>& done) {
  const auto deadline = Clock::now() + std::chrono::seconds(seconds);
  while (Clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  return done();
}

// A 400-line text prepared (byte level) as data set `tiny` under dir/data.
void PrepareTinyData(const fs::path& dir) {
  fs::create_directories(dir / "text");
  {
    std::ofstream text(dir / "text" / "a.txt");
    for (int i = 1; i <= 400; ++i) text << "line " << i << ": the quick brown fox jumps\n";
  }
  ChildProcess prepare({SPHERET_LM_PATH, "prepare", "--input", (dir / "text").string(), "--out",
                        (dir / "data" / "tiny").string()},
                       (dir / "prepare.out").string(), (dir / "prepare.err").string());
  ASSERT_EQ(prepare.Wait(), 0) << ReadText(dir / "prepare.err");
}

// The worker's /metrics port, from its start-up log line (0 when it did not say within 30 s).
int WorkerMetricsPort(const fs::path& dir) {
  int worker_metrics = 0;
  WaitUntil(30, [&] {
    const std::string log = ReadText(dir / "worker.err") + ReadText(dir / "worker.out");
    const size_t at = log.find(", metrics ");
    if (at == std::string::npos) return false;
    worker_metrics = std::atoi(log.c_str() + at + 10);
    return worker_metrics > 0;
  });
  return worker_metrics;
}

// A long autonorm trial on the tiny data, with every kind of metric and diag event: ‖h‖ and θ,
// the gate choice and (every 2 steps, 2 Lanczos steps) the block Jacobian.
void SubmitMonitoredSweep(int port) {
  auto channel =
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials());
  auto sweeps = v1::SweepService::NewStub(channel);
  {
    grpc::ClientContext context;
    v1::SubmitSweepRequest request;
    request.set_spec_yaml(
        "name: monitored\ndataset: tiny\nbase: {scale: xs, block_size: 32, batch_size: 4, "
        "gradient_accumulation_steps: 1, max_iters: 100000, eval_interval: 5, eval_iters: 1, "
        "diag_interval: 2, jacobian_interval: 2, jacobian_iters: 2, log_interval: 1}\n"
        "parameters:\n  method: {values: [autonorm, proj_spheret]}\n");
    v1::SubmitSweepResponse response;
    ASSERT_TRUE(sweeps->SubmitSweep(&context, request, &response).ok());
  }
  // An ASHA search on the third slot, one trial at a time in file order: the first learning rate
  // learns in 2 steps, the second (1e-9) cannot, so it loses at rung 0 (step 2) and is pruned:
  // the search panels (trials per rung, pruned, compute saved) get their series.
  grpc::ClientContext context;
  v1::SubmitSweepRequest request;
  request.set_spec_yaml(
      "name: searched\ndataset: tiny\nbase: {scale: xs, block_size: 32, batch_size: 4, "
      "gradient_accumulation_steps: 1, max_iters: 40, warmup_iters: 0, log_interval: 1, "
      "eval_interval: 20, eval_iters: 1}\n"
      "parameters:\n  learning_rate: {values: [3e-3, 1e-9]}\n"
      "search: {strategy: asha, metric: train/loss, min_iters: 2, reduction_factor: 3}\n");
  v1::SubmitSweepResponse response;
  grpc::Status submitted = sweeps->SubmitSweep(&context, request, &response);
  ASSERT_TRUE(submitted.ok()) << submitted.error_message();
}

// Prometheus with deploy/'s rules, scraping the coordinator and the worker every second.
void WritePrometheusConfig(const fs::path& path, int coordinator_metrics, int worker_metrics) {
  {
    std::ofstream config(path);
    config << "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
           << "rule_files:\n  - " << (kSource / "deploy/prometheus/rules/recording.yml").string()
           << "\n  - " << (kSource / "deploy/prometheus/rules/alerts.yml").string() << "\n"
           << "scrape_configs:\n"
           << "  - job_name: spheret-coordinator\n    static_configs: [{targets: ['127.0.0.1:"
           << coordinator_metrics << "']}]\n"
           << "  - job_name: spheret-worker\n    static_configs: [{targets: ['127.0.0.1:"
           << worker_metrics << "']}]\n";
  }
}

// Every query of every dashboard returns data (within 20 s each).
template <typename Query>
void ExpectEveryDashboardQueryHasData(const Query& query) {
  const auto queries = testing_util::DashboardQueries(kSource / "deploy/grafana/dashboards");
  ASSERT_GT(queries.size(), 20u);
  for (const auto& dashboard_query : queries) {
    const std::string promql = testing_util::ToPromQl(dashboard_query.expr);
    json answer;
    const bool has_data = WaitUntil(20, [&] {
      answer = query(promql);
      return answer.is_object() && answer["status"] == "success" &&
             !answer["data"]["result"].empty();
    });
    EXPECT_TRUE(has_data) << dashboard_query.dashboard << " / " << dashboard_query.where << ": "
                          << promql << " -> " << answer.dump();
  }
  std::printf("%zu dashboard queries returned data from Prometheus\n", queries.size());
}

// Whether the coordinator's /metrics shows the running trial's val loss, rotation angle,
// throughput and learning rate.
bool TrialSeriesExported(int coordinator_metrics) {
  const std::string page = testing_util::FetchMetrics(coordinator_metrics);
  for (const char* series :
       {"spheret_val_loss{", "spheret_rotation_angle_radians{",
        "spheret_layer_value{field=\"gate_choice\"", "spheret_layer_value{field=\"jac_bound_max\"",
        "spheret_layer_value{field=\"bound_min\"", "spheret_tokens_per_second{",
        "spheret_learning_rate{"}) {
    if (page.find(series) == std::string::npos) return false;
  }
  return true;
}

// The rule files loaded and evaluate (recording rules produce series).
template <typename Query>
void ExpectRulesLoadedAndEvaluating(int prometheus_port, const Query& query) {
  const json rules = json::parse(HttpGet(prometheus_port, "/api/v1/rules"), nullptr, false);
  ASSERT_TRUE(rules.is_object()) << "no /api/v1/rules answer";
  EXPECT_EQ(rules["data"]["groups"].size(), 2u) << rules.dump();
  EXPECT_TRUE(WaitUntil(20, [&] {
    return !query("spheret:running_trials:count_by_sweep")["data"]["result"].empty();
  }));
}

// Prometheus started with deploy/'s rules, scraping the coordinator and the worker every second:
// every dashboard query has data and the rules evaluate; stopped at the end.
void ExpectDashboardsServedByPrometheus(const fs::path& dir, int coordinator_metrics,
                                        int worker_metrics) {
  const int prometheus_port = FreePort();
  WritePrometheusConfig(dir / "prometheus.yml", coordinator_metrics, worker_metrics);
  ChildProcess prometheus(
      {"/usr/bin/prometheus", "--config.file=" + (dir / "prometheus.yml").string(),
       "--storage.tsdb.path=" + (dir / "tsdb").string(),
       "--web.listen-address=127.0.0.1:" + std::to_string(prometheus_port), "--log.level=warn"},
      (dir / "prometheus.out").string(), (dir / "prometheus.err").string());
  const auto query = [&](const std::string& promql) {
    return json::parse(HttpGet(prometheus_port, "/api/v1/query?query=" + UrlEncode(promql)),
                       nullptr, false);
  };
  ASSERT_TRUE(WaitUntil(60, [&] {
    const json up = query("sum(up)");
    return up.is_object() && up["status"] == "success" && !up["data"]["result"].empty() &&
           up["data"]["result"][0]["value"][1] == "2";
  })) << ReadText(dir / "prometheus.err");
  // Each query is polled until it has data (rates need a few scrapes): no head start assumed.
  ExpectEveryDashboardQueryHasData(query);
  ExpectRulesLoadedAndEvaluating(prometheus_port, query);

  prometheus.Signal(SIGTERM);
}

TEST(PrometheusEndToEnd, EveryDashboardQueryReturnsData) {
  if (std::system("command -v prometheus > /dev/null 2>&1") != 0) {
    GTEST_SKIP() << "Debian's prometheus package is not installed (make deps installs it)";
  }
  const fs::path dir =
      fs::temp_directory_path() / ("spheret_prom_test_" + std::to_string(getpid()));
  fs::remove_all(dir);
  PrepareTinyData(dir);
  if (HasFatalFailure()) return;

  ChildProcess coordinator({SPHERET_COORDINATOR_PATH, "--db", (dir / "spheret.db").string(),
                            "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"},
                           (dir / "coordinator.out").string(), (dir / "coordinator.err").string());
  int port = 0, coordinator_metrics = 0;
  const std::string line = coordinator.FirstLine();
  ASSERT_EQ(std::sscanf(line.c_str(), "listening %d metrics %d", &port, &coordinator_metrics), 2)
      << line << ReadText(dir / "coordinator.err");

  ChildProcess worker(
      {SPHERET_WORKER_PATH, "--coordinator", "127.0.0.1:" + std::to_string(port), "--cpu-slots",
       "3", "--worker-id", "w1", "--work-dir", (dir / "w1").string(), "--checkpoint-root",
       (dir / "runs").string(), "--data-root", (dir / "data").string(), "--lm", SPHERET_LM_PATH,
       "--metrics-listen", "127.0.0.1:0"},
      (dir / "worker.out").string(), (dir / "worker.err").string());
  const int worker_metrics = WorkerMetricsPort(dir);
  ASSERT_GT(worker_metrics, 0) << ReadText(dir / "worker.err");

  // A long autonorm trial: val loss, diag (‖h‖, θ, gate, Jacobian), lr and tokens/s flow.
  SubmitMonitoredSweep(port);
  if (HasFatalFailure()) return;
  ASSERT_TRUE(WaitUntil(120, [&] { return TrialSeriesExported(coordinator_metrics); }))
      << testing_util::FetchMetrics(coordinator_metrics) << ReadText(dir / "worker.err");

  // Prometheus with deploy/'s rules, scraping both every second.
  ExpectDashboardsServedByPrometheus(dir, coordinator_metrics, worker_metrics);
  if (HasFatalFailure()) return;
  worker.Send(SIGTERM);  // stops its trainer and hands the trial back
  EXPECT_TRUE(WaitUntil(30, [&] { return waitpid(worker.pid(), nullptr, WNOHANG) != 0; }));
  coordinator.Signal(SIGTERM);
  if (!HasFailure()) fs::remove_all(dir);
}

}  // namespace
}  // namespace spheret
