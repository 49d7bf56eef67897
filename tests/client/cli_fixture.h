// The fixture of cli_test.cc and cli_live_test.cc: a coordinator process and fake workers.
// The `spheret` CLI against a real spheret-coordinator process on loopback whose database is
// filled by fake workers over gRPC: every subcommand's output is checked, and bad input gives a
// one-line error with exit code != 0.
#pragma once

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "spheret/v1/sweeps.grpc.pb.h"
#include "spheret/v1/workers.grpc.pb.h"
#include "tests/integration/child_process.h"

namespace spheret {

namespace fs = std::filesystem;
using nlohmann::json;
using testing_util::ChildProcess;

struct CliResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

inline std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

inline int Lines(const std::string& text) {
  return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
}

// Parses RFC 4180 CSV without embedded newlines (what the CLI writes for these tables).
inline std::vector<std::map<std::string, std::string>> ParseCsv(const std::string& text) {
  std::vector<std::vector<std::string>> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> fields(1);
    bool quoted = false;
    for (size_t i = 0; i < line.size(); ++i) {
      const char c = line[i];
      if (quoted && c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        fields.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = !quoted;
      } else if (c == ',' && !quoted) {
        fields.emplace_back();
      } else {
        fields.back() += c;
      }
    }
    lines.push_back(fields);
  }
  std::vector<std::map<std::string, std::string>> rows;
  for (size_t i = 1; i < lines.size(); ++i) {
    EXPECT_EQ(lines[i].size(), lines[0].size()) << "CSV line " << i << " of\n" << text;
    std::map<std::string, std::string> row;
    for (size_t k = 0; k < lines[0].size() && k < lines[i].size(); ++k)
      row[lines[0][k]] = lines[i][k];
    rows.push_back(row);
  }
  return rows;
}

// Waits (up to 30 s) until the file contains `text`.
inline bool WaitForText(const fs::path& file, const std::string& text) {
  for (int i = 0; i < 600; ++i) {
    if (ReadFile(file).find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

inline bool HaveProgram(const std::string& name) {
  return std::system(("command -v " + name + " > /dev/null 2>&1").c_str()) == 0;
}

inline constexpr char kSweep[] = R"(name: cli-test
dataset: fortunes
metric: {name: val/loss, goal: minimize}
base: {max_iters: 100, eval_interval: 50}
parameters:
  method: {values: [pre_ln, p_spheret]}
  p: {values: [0.5], only_for: {method: p_spheret}}
  scale: {values: [S, M]}
seeds: [1, 2]
resources: {gpus: 0}
)";

class CliTest : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ =
        new fs::path(fs::temp_directory_path() / ("spheret_cli_test_" + std::to_string(getpid())));
    fs::remove_all(*dir_);
    fs::create_directories(*dir_);
    db_ = new std::string((*dir_ / "spheret.db").string());
    ChildProcess create({SPHERET_COORDINATOR_PATH, "--db", *db_, "--create-token", "admin",
                         "--token-name", "test-admin"},
                        (*dir_ / "token.out").string(), (*dir_ / "token.err").string());
    ASSERT_EQ(create.Wait(), 0) << ReadFile(*dir_ / "token.err");
    token_ = new std::string(create.FirstLine());
    coordinator_ = new ChildProcess(
        {SPHERET_COORDINATOR_PATH, "--db", *db_, "--listen", "127.0.0.1:0", "--metrics-listen",
         "127.0.0.1:0", "--require-tokens", "--lease-ttl", "60"},
        (*dir_ / "coordinator.out").string(), (*dir_ / "coordinator.err").string());
    const std::string line = coordinator_->FirstLine();
    ASSERT_EQ(std::sscanf(line.c_str(), "listening %d", &port_), 1) << line;
    address_ = new std::string("127.0.0.1:" + std::to_string(port_));
  }

  static void TearDownTestSuite() {
    delete coordinator_;
    const bool keep = std::getenv("SPHERET_KEEP_TEST_DIR") != nullptr;  // to look at the output
    if (!keep && !testing::UnitTest::GetInstance()->Failed()) fs::remove_all(*dir_);
  }

  void SetUp() override {
    ASSERT_NE(port_, 0) << "the coordinator did not start";
    channel_ = grpc::CreateChannel(*address_, grpc::InsecureChannelCredentials());
    workers_ = v1::WorkerService::NewStub(channel_);
  }

  // Runs `spheret ARGS` against the test coordinator with the admin token (unless the args
  // give --token or --coordinator themselves).
  CliResult Cli(std::vector<std::string> args, bool with_defaults = true) {
    std::vector<std::string> argv = {SPHERET_CLI_PATH};
    if (with_defaults) {
      argv.insert(argv.end(), {"--coordinator", *address_, "--token", *token_});
    }
    argv.insert(argv.end(), args.begin(), args.end());
    return Run(argv);
  }

  // Runs a program (argv[0] an absolute path) to its end.
  CliResult Run(const std::vector<std::string>& argv) {
    const std::string out = (*dir_ / "cli.out").string(), err = (*dir_ / "cli.err").string();
    fs::remove(err);
    ChildProcess cli(argv, out, err);
    const int status = cli.Wait();
    return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), ReadFile(out),
            ReadFile(err)};
  }

  std::unique_ptr<grpc::ClientContext> Context() {
    auto context = std::make_unique<grpc::ClientContext>();
    context->AddMetadata("authorization", "Bearer " + *token_);
    return context;
  }

  std::vector<v1::Lease> Acquire(const std::string& worker, int slots) {
    v1::RegisterRequest registration;
    registration.set_worker_id(worker);
    registration.set_host("fake.test");
    registration.set_cpu_slots(slots);
    v1::RegisterResponse registered;
    EXPECT_TRUE(workers_->Register(Context().get(), registration, &registered).ok());
    v1::AcquireRequest request;
    request.set_worker_id(worker);
    request.set_free_slots(slots);
    request.set_max_trials(slots);
    request.set_rendezvous_port(29500);
    v1::AcquireResponse response;
    grpc::Status status = workers_->Acquire(Context().get(), request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return {response.leases().begin(), response.leases().end()};
  }

  // A fake trainer's events: train/loss every step, val/loss and val/ppl every 50, an eval
  // score at the end. Values differ per trial so that seeds have a spread.
  void Report(const v1::Lease& lease, int steps) {
    v1::IngestEventsResponse response;
    std::unique_ptr<grpc::ClientContext> context = Context();  // outlives the stream
    auto writer = workers_->IngestEvents(context.get(), &response);
    v1::EventBatch batch;
    batch.set_trial_id(lease.trial_id());
    batch.set_attempt(lease.attempt());
    const double offset = 0.037 * (lease.trial_id() % 5) + 0.011 * lease.trial_id();
    const auto add = [&](const std::string& name, int step, double value) {
      v1::MetricRow* row = batch.add_metrics();
      row->set_name(name);
      row->set_step(step);
      row->set_value(value);
    };
    for (int step = 0; step <= steps; ++step) {
      add("train/loss", step, 5.0 - 2.0 * step / steps + offset);
      add("train/loss_avg", step, 5.1 - 2.0 * step / steps + offset);
      if (step % 50 == 0) {
        const double val = 5.2 - 2.0 * step / steps + offset;
        add("val/loss", step, val);
        add("val/ppl", step, std::exp(val));
      }
    }
    json eval = {{"type", "eval"},       {"task", "hellaswag"},
                 {"metric", "acc_norm"}, {"value", 0.3 + 0.1 * offset},
                 {"std_error", 0.5},     {"step", steps}};
    v1::Event* event = batch.add_other();
    event->set_json(eval.dump());
    event->set_seq(1);
    v1::EvalScore* score = event->mutable_eval();  // typed by the worker
    score->set_task("hellaswag");
    score->set_metric("acc_norm");
    score->set_value(0.3 + 0.1 * offset);  // a fraction, as the harness and the trainer
    score->set_std_error(0.5);
    score->set_step(steps);
    v1::Event* done = batch.add_other();
    done->set_json(R"({"type":"done","step":)" + std::to_string(steps) + "}");
    done->set_seq(2);
    ASSERT_TRUE(writer->Write(batch));
    writer->WritesDone();
    grpc::Status status = writer->Finish();
    ASSERT_TRUE(status.ok()) << status.error_message();
  }

  void Finish(const std::string& worker, const v1::Lease& lease, v1::TrialState outcome,
              const std::string& stderr_tail = "", int exit_code = 0) {
    v1::FinishRequest request;
    request.set_worker_id(worker);
    request.set_trial_id(lease.trial_id());
    request.set_attempt(lease.attempt());
    request.set_outcome(outcome);
    request.set_exit_code(exit_code);
    request.set_stderr_tail(stderr_tail);
    v1::FinishResponse response;
    grpc::Status status = workers_->Finish(Context().get(), request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }

  // Submits the 8-trial sweep once per suite and runs it to the end with a fake worker.
  int64_t CompletedSweep() {
    static int64_t sweep_id = 0;
    if (sweep_id != 0) return sweep_id;
    const fs::path file = *dir_ / "sweep.yaml";
    std::ofstream(file) << kSweep;
    CliResult submitted = Cli({"submit", file.string()});
    EXPECT_EQ(submitted.exit_code, 0) << submitted.err;
    EXPECT_EQ(std::sscanf(submitted.out.c_str(), "sweep %ld:", &sweep_id), 1) << submitted.out;
    std::vector<v1::Lease> leases = Acquire("fake-1", 8);
    EXPECT_EQ(leases.size(), 8u);
    for (const v1::Lease& lease : leases) {
      Report(lease, 100);
      Finish("fake-1", lease, v1::TRIAL_STATE_SUCCEEDED);
    }
    return sweep_id;
  }

  // Compiles `tabular` (booktabs' rules) in a minimal document when pdflatex is installed.
  void ExpectLatexCompiles(const std::string& tabular, const std::string& name) {
    if (!HaveProgram("pdflatex")) {
      std::cout << "pdflatex not installed: " << name << " LaTeX checked as text only\n";
      return;
    }
    std::ofstream(*dir_ / (name + ".tex"))
        << "\\documentclass{article}\\usepackage{booktabs}\\begin{document}\n"
        << tabular << "\\end{document}\n";
    EXPECT_EQ(std::system(("cd " + dir_->string() + " && pdflatex -interaction=nonstopmode " +
                           "-halt-on-error " + name + ".tex > " + name + ".pdflatex.log 2>&1")
                              .c_str()),
              0)
        << ReadFile(*dir_ / (name + ".pdflatex.log"));
    EXPECT_TRUE(fs::exists(*dir_ / (name + ".pdf"))) << name;
  }

  // mean and sample std of each cell's final val/loss, straight from the SQLite rows.
  std::map<std::string, std::pair<double, double>> CellsFromDatabase(const std::string& metric) {
    sqlite3* db = nullptr;
    EXPECT_EQ(sqlite3_open_v2(db_->c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
    const std::string sql =
        "SELECT json_extract(t.config_json, '$.method'), json_extract(t.config_json, '$.scale'), "
        "s.value FROM trials t JOIN scalars s USING (trial_id) JOIN metric_names m USING "
        "(metric_id) WHERE m.name = ?1 AND s.superseded = 0 AND t.state = 'SUCCEEDED' AND "
        "s.step = (SELECT max(step) FROM scalars s2 WHERE s2.trial_id = s.trial_id AND "
        "s2.metric_id = s.metric_id)";
    sqlite3_stmt* statement = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &statement, nullptr), SQLITE_OK);
    sqlite3_bind_text(statement, 1, metric.c_str(), -1, SQLITE_TRANSIENT);
    std::map<std::string, std::vector<double>> values;
    while (sqlite3_step(statement) == SQLITE_ROW) {
      // Other tests' sweeps (one database per suite) may have trials without a scale.
      if (sqlite3_column_type(statement, 1) == SQLITE_NULL) continue;
      const std::string key =
          std::string(reinterpret_cast<const char*>(sqlite3_column_text(statement, 0))) + "|" +
          reinterpret_cast<const char*>(sqlite3_column_text(statement, 1));
      values[key].push_back(sqlite3_column_double(statement, 2));
    }
    sqlite3_finalize(statement);
    sqlite3_close(db);
    std::map<std::string, std::pair<double, double>> cells;
    for (const auto& [key, seeds] : values) {
      double mean = 0;
      for (double v : seeds) mean += v;
      mean /= seeds.size();
      double squares = 0;
      for (double v : seeds) squares += (v - mean) * (v - mean);
      cells[key] = {mean, std::sqrt(squares / (seeds.size() - 1))};
    }
    return cells;
  }

  inline static fs::path* dir_ = nullptr;
  inline static std::string* db_ = nullptr;
  inline static std::string* token_ = nullptr;
  inline static std::string* address_ = nullptr;
  inline static int port_ = 0;
  inline static ChildProcess* coordinator_ = nullptr;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::WorkerService::Stub> workers_;
};

}  // namespace spheret
