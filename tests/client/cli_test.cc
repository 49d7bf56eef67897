// The `spheret` CLI against a real spheret-coordinator process on loopback whose database is
// filled by fake workers over gRPC: every subcommand's output is checked, and bad input gives a
// one-line error with exit code != 0.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <cmath>
#include <chrono>
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
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing_util::ChildProcess;

struct CliResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

int Lines(const std::string& text) {
  return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
}

// Parses RFC 4180 CSV without embedded newlines (what the CLI writes for these tables).
std::vector<std::map<std::string, std::string>> ParseCsv(const std::string& text) {
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
bool WaitForText(const fs::path& file, const std::string& text) {
  for (int i = 0; i < 600; ++i) {
    if (ReadFile(file).find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

bool HaveProgram(const std::string& name) {
  return std::system(("command -v " + name + " > /dev/null 2>&1").c_str()) == 0;
}

constexpr char kSweep[] = R"(name: cli-test
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
    v1::ReportEventsResponse response;
    std::unique_ptr<grpc::ClientContext> context = Context();  // outlives the stream
    auto writer = workers_->ReportEvents(context.get(), &response);
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
                 {"metric", "acc_norm"}, {"value", 30 + 10 * offset},
                 {"std_error", 0.5},     {"step", steps}};
    v1::Event* event = batch.add_other();
    event->set_json(eval.dump());
    event->set_seq(1);
    v1::EvalScore* score = event->mutable_eval();  // typed by the worker
    score->set_task("hellaswag");
    score->set_metric("acc_norm");
    score->set_value(30 + 10 * offset);
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

  // Compiles `tabular` in a minimal document when pdflatex is installed.
  void ExpectLatexCompiles(const std::string& tabular, const std::string& name) {
    if (!HaveProgram("pdflatex")) {
      std::cout << "pdflatex not installed: " << name << " LaTeX checked as text only\n";
      return;
    }
    std::ofstream(*dir_ / (name + ".tex")) << "\\documentclass{article}\\begin{document}\n"
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

  static fs::path* dir_;
  static std::string* db_;
  static std::string* token_;
  static std::string* address_;
  static int port_;
  static ChildProcess* coordinator_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::WorkerService::Stub> workers_;
};

fs::path* CliTest::dir_ = nullptr;
std::string* CliTest::db_ = nullptr;
std::string* CliTest::token_ = nullptr;
std::string* CliTest::address_ = nullptr;
int CliTest::port_ = 0;
ChildProcess* CliTest::coordinator_ = nullptr;

TEST_F(CliTest, DryRunPrintsTheExpandedTrialsAndSubmitsNothing) {
  const fs::path file = *dir_ / "dry.yaml";
  std::ofstream(file) << std::string(kSweep).replace(6, 8, "cli-dry-");
  CliResult table = Cli({"submit", file.string(), "--dry-run"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("8 trials (dry run: nothing was submitted)"), std::string::npos)
      << table.out;
  EXPECT_NE(table.out.find("p_spheret  0.5"), std::string::npos) << table.out;
  EXPECT_EQ(Lines(table.out), 1 + 8 + 1);  // header, trials, count
  CliResult as_json = Cli({"submit", file.string(), "--dry-run", "--json"});
  ASSERT_EQ(as_json.exit_code, 0) << as_json.err;
  const json parsed = json::parse(as_json.out);
  EXPECT_EQ(parsed["trial_count"], 8);
  EXPECT_EQ(parsed["trials"].size(), 8u);
  EXPECT_EQ(parsed["trials"][0]["trial_key"].get<std::string>().size(), 64u);
  CliResult sweeps = Cli({"sweeps", "--json"});
  ASSERT_EQ(sweeps.exit_code, 0) << sweeps.err;
  for (const json& sweep : json::parse(sweeps.out)) EXPECT_NE(sweep["name"], "cli-dry-");
}

TEST_F(CliTest, SubmitIsIdempotentAndListingsShowTheSweep) {
  const int64_t sweep = CompletedSweep();
  CliResult again = Cli({"submit", (*dir_ / "sweep.yaml").string()});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(again.out, "sweep " + std::to_string(sweep) + ": 8 trials, 0 new\n");

  CliResult sweeps = Cli({"sweeps"});
  ASSERT_EQ(sweeps.exit_code, 0) << sweeps.err;
  EXPECT_NE(sweeps.out.find("cli-test"), std::string::npos);
  EXPECT_NE(sweeps.out.find("DONE"), std::string::npos) << sweeps.out;
  const json listed = json::parse(Cli({"sweeps", "--json"}).out);
  bool found = false;
  for (const json& s : listed) {
    if (s["name"] == "cli-test") {
      found = true;
      EXPECT_EQ(s["trial_count"], "8");  // int64 is a string in proto JSON
      EXPECT_EQ(s["trials_by_state"]["SUCCEEDED"], "8");
    }
  }
  EXPECT_TRUE(found) << listed.dump();

  CliResult trials = Cli({"trials", "--sweep", std::to_string(sweep), "--state", "succeeded"});
  ASSERT_EQ(trials.exit_code, 0) << trials.err;
  EXPECT_EQ(Lines(trials.out), 9) << trials.out;
  EXPECT_NE(trials.out.find("p_spheret"), std::string::npos);
  EXPECT_NE(trials.out.find(" 100 "), std::string::npos) << trials.out;  // step
  const json trial_list =
      json::parse(Cli({"trials", "--sweep", std::to_string(sweep), "--json"}).out);
  ASSERT_EQ(trial_list.size(), 8u);
  for (const json& t : trial_list) EXPECT_EQ(t["state"], "TRIAL_STATE_SUCCEEDED");
  EXPECT_EQ(Cli({"trials", "--state", "running"}).out.find("cli-test"), std::string::npos);

  CliResult watch = Cli({"watch", std::to_string(sweep)});
  ASSERT_EQ(watch.exit_code, 0) << watch.err;
  EXPECT_NE(watch.out.find("sweep " + std::to_string(sweep) + " ended: SUCCEEDED 8"),
            std::string::npos)
      << watch.out;
  EXPECT_EQ(watch.out.find("\x1b["), std::string::npos) << "piped output has no escapes";
  if (HaveProgram("script")) {  // on a terminal (util-linux's script gives it a pty)
    const std::string command = std::string(SPHERET_CLI_PATH) + " --coordinator " + *address_ +
                                " --token " + *token_ + " watch " + std::to_string(sweep);
    CliResult tty = Run({"/usr/bin/script", "-qec", command, "/dev/null"});
    ASSERT_EQ(tty.exit_code, 0) << tty.err;
    EXPECT_NE(tty.out.find("\x1b[2K"), std::string::npos) << tty.out;  // lines redrawn in place
    EXPECT_NE(tty.out.find("[########################] step 100/100"), std::string::npos)
        << tty.out;
    EXPECT_NE(tty.out.find("8 trials: SUCCEEDED 8"), std::string::npos) << tty.out;
  }
}

TEST_F(CliTest, ResultsArePivotedAndEqualTheDatabase) {
  const int64_t sweep = CompletedSweep();
  const auto cells = CellsFromDatabase("val/loss");
  ASSERT_EQ(cells.size(), 4u);

  CliResult table = Cli({"results", std::to_string(sweep)});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_EQ(Lines(table.out), 3) << table.out;  // header, pre_ln, p_spheret p=0.5
  EXPECT_EQ(table.out.rfind("method", 0), 0u) << table.out;
  EXPECT_NE(table.out.find("p_spheret p=0.5"), std::string::npos) << table.out;
  char expected[64];
  const auto [mean, std] = cells.at("pre_ln|S");
  std::snprintf(expected, sizeof(expected), "%.3f ± %.3f (2)", mean, std);
  EXPECT_NE(table.out.find(expected), std::string::npos) << expected << "\n" << table.out;

  CliResult csv = Cli({"results", std::to_string(sweep), "--format", "csv"});
  ASSERT_EQ(csv.exit_code, 0) << csv.err;
  const auto rows = ParseCsv(csv.out);
  ASSERT_EQ(rows.size(), 4u) << csv.out;
  for (const auto& row : rows) {
    const auto& cell = cells.at(row.at("method") + "|" + row.at("scale"));
    EXPECT_NEAR(std::stod(row.at("mean")), cell.first, 1e-12);
    EXPECT_NEAR(std::stod(row.at("std")), cell.second, 1e-12);
    EXPECT_EQ(row.at("n"), "2");
    EXPECT_EQ(row.at("metric"), "val/loss");
  }

  CliResult as_json = Cli({"results", std::to_string(sweep), "--format", "json", "--vs-paper"});
  ASSERT_EQ(as_json.exit_code, 0) << as_json.err;
  const json parsed = json::parse(as_json.out);
  ASSERT_EQ(parsed.size(), 4u);
  for (const json& row : parsed) {
    if (row["method"] == "pre_ln" && row["scale"] == "S") {
      EXPECT_DOUBLE_EQ(row["paper"].get<double>(), 3.071);  // FineWeb-Edu, Table 2
    }
    if (row["method"] == "p_spheret") {
      EXPECT_DOUBLE_EQ(row["p"].get<double>(), 0.5);
    }
  }

  CliResult md = Cli({"results", std::to_string(sweep), "--format", "md", "--metric", "val/loss",
                      "--metric", "train/loss_avg"});
  ASSERT_EQ(md.exit_code, 0) << md.err;
  EXPECT_NE(md.out.find("| method | S val loss | S train loss | M val loss | M train loss |"),
            std::string::npos)
      << md.out;
  EXPECT_NE(md.out.find("| --- | ---: |"), std::string::npos);

  CliResult latex = Cli({"results", std::to_string(sweep), "--format", "latex"});
  ASSERT_EQ(latex.exit_code, 0) << latex.err;
  EXPECT_NE(latex.out.find("\\begin{tabular}{lrr}"), std::string::npos) << latex.out;
  EXPECT_NE(latex.out.find("p\\_spheret p=0.5"), std::string::npos) << latex.out;
  EXPECT_NE(latex.out.find("$\\pm$"), std::string::npos);
  ExpectLatexCompiles(latex.out, "results");
}

TEST_F(CliTest, ReportWritesTablesEqualToTheDatabaseAndFigures) {
  const int64_t sweep = CompletedSweep();
  const fs::path out = *dir_ / "report";
  CliResult report = Cli({"report", std::to_string(sweep), "--out", out.string(), "--vs-paper"});
  ASSERT_EQ(report.exit_code, 0) << report.err;
  for (const char* name : {"README.md", "losses.txt", "losses.md", "losses.tex", "losses.csv",
                           "losses.json", "zeroshot.csv", "zeroshot.md", "val_loss.png",
                           "val_loss.svg", "val_loss.gp", "train_loss.png"}) {
    EXPECT_TRUE(fs::exists(out / name)) << name;
  }
  for (const std::string metric : {"val/loss", "train/loss_avg", "val/ppl"}) {
    const auto cells = CellsFromDatabase(metric);
    int checked = 0;
    for (const auto& row : ParseCsv(ReadFile(out / "losses.csv"))) {
      if (row.at("metric") != metric) continue;
      const auto& cell = cells.at(row.at("method") + "|" + row.at("scale"));
      EXPECT_NEAR(std::stod(row.at("mean")), cell.first, 1e-12) << metric;
      EXPECT_NEAR(std::stod(row.at("std")), cell.second, 1e-12) << metric;
      ++checked;
    }
    EXPECT_EQ(checked, 4) << metric;
  }
  const std::string losses = ReadFile(out / "losses.txt");
  EXPECT_NE(losses.find("S val loss (paper)"), std::string::npos) << losses;
  EXPECT_NE(losses.find("3.071"), std::string::npos) << losses;
  const auto zero_shot = ParseCsv(ReadFile(out / "zeroshot.csv"));
  ASSERT_EQ(zero_shot.size(), 4u);
  EXPECT_EQ(zero_shot[0].at("metric"), "hellaswag/acc_norm");
  ExpectLatexCompiles(ReadFile(out / "losses.tex"), "losses");
  ExpectLatexCompiles(ReadFile(out / "zeroshot.tex"), "zeroshot");
  const std::string png = ReadFile(out / "val_loss.png");
  ASSERT_GT(png.size(), 1000u);
  EXPECT_EQ(png.substr(1, 3), "PNG");
  const std::string svg = ReadFile(out / "val_loss.svg");
  EXPECT_NE(svg.find("<svg"), std::string::npos);
  if (HaveProgram("python3")) {
    EXPECT_EQ(std::system(("python3 -c 'import sys, xml.etree.ElementTree as E; "
                           "E.parse(sys.argv[1])' " +
                           (out / "val_loss.svg").string())
                              .c_str()),
              0)
        << "the SVG does not parse as XML";
  }
}

TEST_F(CliTest, PlotWritesFigureDataAndScript) {
  const int64_t sweep = CompletedSweep();
  for (const char* name : {"curves.png", "curves.svg"}) {
    const fs::path file = *dir_ / name;
    CliResult plot =
        Cli({"plot", std::to_string(sweep), "--metric", "train/loss", "--out", file.string()});
    ASSERT_EQ(plot.exit_code, 0) << plot.err;
    EXPECT_NE(plot.out.find("(4 lines)"), std::string::npos) << plot.out;  // 2 panels × 2
    EXPECT_GT(fs::file_size(file), 1000u);
  }
  const fs::path data = *dir_ / "curves-data" / "S__pre_ln.dat";
  ASSERT_TRUE(fs::exists(data));
  EXPECT_EQ(Lines(ReadFile(data)), 1 + 101);  // header + steps 0..100
  const std::string script = ReadFile(*dir_ / "curves.gp");
  EXPECT_NE(script.find("set multiplot layout 1,2"), std::string::npos) << script;
  EXPECT_NE(script.find("'curves-data/M__p_spheret_p_0.5.dat'"), std::string::npos) << script;
}

TEST_F(CliTest, LogsShowAttemptsStderrAndEvents) {
  const fs::path file = *dir_ / "one.yaml";
  std::ofstream(file) << "name: cli-logs\ndataset: fortunes\nbase: {max_iters: 10}\n"
                         "parameters: {method: {values: [geonorm]}}\n"
                         "max_restarts: 0\nresources: {gpus: 0}\n";
  CliResult submitted = Cli({"submit", file.string()});
  ASSERT_EQ(submitted.exit_code, 0) << submitted.err;
  std::vector<v1::Lease> leases = Acquire("fake-logs", 1);
  ASSERT_EQ(leases.size(), 1u);
  Report(leases[0], 10);
  Finish("fake-logs", leases[0], v1::TRIAL_STATE_FAILED, "RuntimeError: out of memory\n", 1);
  const std::string trial = std::to_string(leases[0].trial_id());
  CliResult logs = Cli({"logs", trial});
  ASSERT_EQ(logs.exit_code, 0) << logs.err;
  EXPECT_NE(logs.out.find("FAILED"), std::string::npos) << logs.out;
  EXPECT_NE(logs.out.find("fake-logs"), std::string::npos);
  EXPECT_NE(logs.out.find("RuntimeError: out of memory"), std::string::npos);
  EXPECT_NE(logs.out.find(R"("type":"eval")"), std::string::npos) << logs.out;
  const json parsed = json::parse(Cli({"logs", trial, "--json"}).out);
  EXPECT_EQ(parsed["attempts"][0]["exit_code"], 1);
  EXPECT_EQ(parsed["events"].size(), 2u);
  CliResult missing = Cli({"logs", "999999"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_EQ(Lines(missing.err), 1) << missing.err;
  EXPECT_NE(missing.err.find("no trial 999999"), std::string::npos) << missing.err;
}

TEST_F(CliTest, SubmitWaitAndWatchFollowALiveSweepAndCancelStopsAnother) {
  const fs::path file = *dir_ / "live.yaml";
  std::ofstream(file) << "name: cli-live\ndataset: fortunes\nbase: {max_iters: 100}\n"
                         "parameters: {method: {values: [pre_ln]}}\n"
                         "seeds: [1, 2]\nresources: {gpus: 0}\n";
  const fs::path submit_out = *dir_ / "submit.out";
  ChildProcess submit({SPHERET_CLI_PATH, "--coordinator", *address_, "--token", *token_, "submit",
                       file.string(), "--wait"},
                      submit_out.string(), (*dir_ / "submit.err").string());
  std::vector<v1::Lease> leases;
  for (int i = 0; i < 200 && leases.size() < 2; ++i) {  // the sweep appears when submit runs
    for (const v1::Lease& lease : Acquire("fake-live", 2 - static_cast<int>(leases.size())))
      leases.push_back(lease);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(leases.size(), 2u);
  const int64_t live_sweep = leases[0].sweep_id();
  const fs::path watch_out = *dir_ / "watch.out";
  ChildProcess watch({SPHERET_CLI_PATH, "--coordinator", *address_, "--token", *token_, "watch",
                      std::to_string(live_sweep)},
                     watch_out.string(), (*dir_ / "watch.err").string());
  // Both follow the sweep before it ends (on a loaded machine they may take a while to start).
  ASSERT_TRUE(WaitForText(submit_out, "RUNNING")) << ReadFile(*dir_ / "submit.err");
  ASSERT_TRUE(WaitForText(watch_out, "RUNNING")) << ReadFile(*dir_ / "watch.err");
  for (const v1::Lease& lease : leases) {
    Report(lease, 100);
    Finish("fake-live", lease, v1::TRIAL_STATE_SUCCEEDED);
  }
  for (ChildProcess* child : {&submit, &watch}) {
    const int status = child->Wait();  // each ends by itself when the sweep does
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << ReadFile(*dir_ / "submit.err") << ReadFile(*dir_ / "watch.err");
  }
  const std::string submitted = ReadFile(submit_out);
  EXPECT_EQ(submitted.rfind("sweep " + std::to_string(live_sweep) + ": 2 trials, 2 new\n", 0), 0u)
      << submitted;
  for (const std::string& lines : {submitted, ReadFile(watch_out)}) {
    EXPECT_NE(lines.find("RUNNING"), std::string::npos) << lines;
    EXPECT_NE(lines.find("step 100/100 loss"), std::string::npos) << lines;
    EXPECT_NE(lines.find("SUCCEEDED"), std::string::npos);
    EXPECT_NE(lines.find("ended: SUCCEEDED 2"), std::string::npos) << lines;
  }

  int64_t sweep = 0;
  const fs::path pending = *dir_ / "pending.yaml";
  std::ofstream(pending) << "name: cli-cancel\ndataset: fortunes\nseeds: [1, 2, 3]\n"
                            "parameters: {method: {values: [pre_ln]}}\n"
                            "resources: {gpus: 0}\n";
  CliResult second = Cli({"submit", pending.string()});
  ASSERT_EQ(second.exit_code, 0) << second.err;
  ASSERT_EQ(std::sscanf(second.out.c_str(), "sweep %ld:", &sweep), 1);
  CliResult cancel = Cli({"cancel", std::to_string(sweep)});
  ASSERT_EQ(cancel.exit_code, 0) << cancel.err;
  EXPECT_EQ(cancel.out, "cancelled 3 pending trials; 0 running trials are stopping\n");
  const json trials = json::parse(Cli({"trials", "--sweep", std::to_string(sweep), "--json"}).out);
  for (const json& t : trials) EXPECT_EQ(t["state"], "TRIAL_STATE_CANCELLED");
}

TEST_F(CliTest, WatchReconnectsWhenTheCoordinatorRestarts) {
  const fs::path file = *dir_ / "restart.yaml";
  std::ofstream(file) << "name: cli-restart\ndataset: fortunes\nbase: {max_iters: 100}\n"
                         "parameters: {method: {values: [pre_ln]}}\nresources: {gpus: 0}\n";
  CliResult submitted = Cli({"submit", file.string()});
  ASSERT_EQ(submitted.exit_code, 0) << submitted.err;
  std::vector<v1::Lease> leases = Acquire("fake-restart", 1);
  ASSERT_EQ(leases.size(), 1u);
  const fs::path watch_out = *dir_ / "watch-restart.out", watch_err = *dir_ / "watch-restart.err";
  ChildProcess watch({SPHERET_CLI_PATH, "--coordinator", *address_, "--token", *token_, "watch",
                      std::to_string(leases[0].sweep_id())},
                     watch_out.string(), watch_err.string());
  ASSERT_TRUE(WaitForText(watch_out, "RUNNING")) << ReadFile(watch_err);
  // SIGKILL and a restart on the same database and port; the lease survives the restart.
  delete coordinator_;
  coordinator_ = new ChildProcess(
      {SPHERET_COORDINATOR_PATH, "--db", *db_, "--listen", *address_, "--metrics-listen",
       "127.0.0.1:0", "--require-tokens", "--lease-ttl", "60"},
      (*dir_ / "coordinator2.out").string(), (*dir_ / "coordinator2.err").string());
  ASSERT_EQ(coordinator_->FirstLine().rfind("listening", 0), 0u)
      << ReadFile(*dir_ / "coordinator2.err");
  channel_ = grpc::CreateChannel(*address_, grpc::InsecureChannelCredentials());
  workers_ = v1::WorkerService::NewStub(channel_);
  Report(leases[0], 100);
  Finish("fake-restart", leases[0], v1::TRIAL_STATE_SUCCEEDED);
  const int status = watch.Wait();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << ReadFile(watch_err);
  EXPECT_NE(ReadFile(watch_err).find("reconnecting"), std::string::npos) << ReadFile(watch_err);
  EXPECT_NE(ReadFile(watch_out).find("ended: SUCCEEDED 1"), std::string::npos)
      << ReadFile(watch_out);
}

TEST_F(CliTest, SqlIsReadOnly) {
  CompletedSweep();
  CliResult count =
      Cli({"sql", "--db", *db_, "SELECT count(*) AS n FROM sweeps WHERE name = 'cli-test'",
           "--format", "csv"},
          false);
  ASSERT_EQ(count.exit_code, 0) << count.err;
  EXPECT_EQ(count.out, "n\n1\n");
  CliResult rows =
      Cli({"sql", "--db", *db_, "SELECT trial_id, state FROM trials ORDER BY trial_id LIMIT 2",
           "--format", "json"},
          false);
  ASSERT_EQ(rows.exit_code, 0) << rows.err;
  EXPECT_EQ(json::parse(rows.out).size(), 2u);
  for (const char* write :
       {"DELETE FROM trials", "UPDATE trials SET state = 'FAILED'", "PRAGMA journal_mode = DELETE",
        "ATTACH 'x.db' AS x", "SELECT 1; DELETE FROM trials"}) {
    CliResult refused = Cli({"sql", "--db", *db_, write}, false);
    EXPECT_EQ(refused.exit_code, 1) << write;
    EXPECT_EQ(Lines(refused.err), 1) << refused.err;
  }
  EXPECT_EQ(Cli({"sql", "--db", *db_,
                 "SELECT count(*) FROM trials WHERE state = 'FAILED' AND "
                 "sweep_id = 1",
                 "--format", "csv"},
                false)
                .out,
            "count(*)\n0\n");
  CliResult missing = Cli({"sql", "--db", (*dir_ / "nope.db").string(), "SELECT 1"}, false);
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("nope.db: no such database"), std::string::npos) << missing.err;
  // Issue 11, item 9: a query had no time budget (and a long read holds a snapshot that stops
  // the coordinator's WAL checkpoints). This one would count for hours.
  const auto start = std::chrono::steady_clock::now();
  CliResult endless = Cli({"sql", "--db", *db_,
                           "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) "
                           "SELECT count(*) FROM n",
                           "--timeout", "1"},
                          false);
  EXPECT_EQ(endless.exit_code, 1);
  EXPECT_EQ(endless.err,
            "spheret: error: sql: stopped after 1 s (--timeout); narrow the query or raise it\n");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
}

TEST_F(CliTest, TokensCreateListRevoke) {
  CompletedSweep();  // writes sweep.yaml
  CliResult created = Cli({"tokens", "create", "read", "--name", "reader"});
  ASSERT_EQ(created.exit_code, 0) << created.err;
  const std::string reader = created.out.substr(0, created.out.size() - 1);
  ASSERT_EQ(reader.rfind("sph_", 0), 0u) << created.out;
  CliResult listed = Cli({"tokens", "list"});
  EXPECT_NE(listed.out.find("reader"), std::string::npos) << listed.out;
  EXPECT_NE(listed.out.find("test-admin"), std::string::npos);
  EXPECT_EQ(listed.out.find(reader), std::string::npos) << "the secret must not be listed";
  EXPECT_EQ(Cli({"--coordinator", *address_, "--token", reader, "sweeps"}, false).exit_code, 0);
  CliResult denied = Cli(
      {"--coordinator", *address_, "--token", reader, "submit", (*dir_ / "sweep.yaml").string()},
      false);
  EXPECT_EQ(denied.exit_code, 1);
  EXPECT_NE(denied.err.find("a 'read' token may not call this method"), std::string::npos)
      << denied.err;
  CliResult not_admin =
      Cli({"--coordinator", *address_, "--token", reader, "tokens", "list"}, false);
  EXPECT_EQ(not_admin.exit_code, 1);
  CliResult revoked = Cli({"tokens", "revoke", "reader"});
  ASSERT_EQ(revoked.exit_code, 0) << revoked.err;
  EXPECT_EQ(revoked.out, "revoked 1 token(s) named 'reader'\n");
  CliResult after = Cli({"--coordinator", *address_, "--token", reader, "sweeps"}, false);
  EXPECT_EQ(after.exit_code, 1);
  EXPECT_NE(after.err.find("unknown token"), std::string::npos) << after.err;
}

TEST_F(CliTest, BadInputGivesOneLineAndNonZeroExit) {
  struct Case {
    std::vector<std::string> args;
    bool defaults;
    int exit_code;
    std::string message;
  };
  const fs::path malformed = *dir_ / "malformed.yaml";
  std::ofstream(malformed) << "name: bad\ndataset: fortunes\nbase: {metod: pre_ln}\n"
                              "parameters: {scale: {values: [xs]}}\n";
  const fs::path broken = *dir_ / "broken.yaml";
  std::ofstream(broken) << "name: bad\nparameters: [oops\n";
  const std::vector<Case> cases = {
      {{"submit", (*dir_ / "missing.yaml").string()}, true, 1, "missing.yaml: cannot read"},
      {{"submit", malformed.string()}, true, 1, "malformed.yaml: line 3: metod: unknown"},
      {{"submit", broken.string()}, true, 1, "broken.yaml: "},
      {{"--coordinator", "127.0.0.1:1", "sweeps"},
       false,
       1,
       "cannot reach the coordinator at 127.0.0.1:1"},
      {{"--coordinator", *address_, "--token", "sph_wrong", "sweeps"},
       false,
       1,
       "refused the call (unknown token)"},
      {{"--coordinator", *address_, "sweeps"}, false, 1, "missing 'authorization"},
      {{"results", "1", "--format", "xml"}, true, 1, "--format: 'xml' is not one of"},
      {{"trials", "--state", "sleeping"}, true, 1, "--state 'sleeping'"},
      {{"plot", "1", "--out", (*dir_ / "x.gif").string()}, true, 1, "must end in .png or .svg"},
      {{"results", "424242"}, true, 1, "424242"},
      {{"sweeps", "--bogus"}, true, 2, "--bogus"},
      {{"tokens", "create", "root"}, true, 2, "root"},
  };
  for (const Case& c : cases) {
    CliResult result = Cli(c.args, c.defaults);
    std::string joined;
    for (const std::string& a : c.args) joined += a + " ";
    EXPECT_EQ(result.exit_code, c.exit_code) << joined << "\n" << result.err;
    EXPECT_EQ(Lines(result.err), 1) << joined << "\n" << result.err;
    EXPECT_NE(result.err.find(c.message), std::string::npos) << joined << "\n" << result.err;
  }
}

}  // namespace
}  // namespace spheret
