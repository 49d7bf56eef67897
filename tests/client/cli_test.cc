// The `spheret` CLI against a real spheret-coordinator process on loopback whose database is
// filled by fake workers over gRPC: every subcommand's output is checked, and bad input gives a
// one-line error with exit code != 0.
#include <cmath>

#include "tests/client/cli_fixture.h"

namespace spheret {
namespace {

TEST_F(CliTest, DryRunPrintsTheExpandedTrialsAndSubmitsNothing) {
  const fs::path file = *dir_ / "dry.yaml";
  std::ofstream(file) << std::string(kSweep).replace(6, 8, "cli-dry-");
  CliResult table = Cli({"submit", file.string(), "--dry-run"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("8 trials (dry run: nothing was submitted)"), std::string::npos)
      << table.out;
  EXPECT_NE(table.out.find("p_spheret  0.5"), std::string::npos) << table.out;
  EXPECT_EQ(Lines(table.out), 1 + 8 + 1 + 1);  // header, trials, the shared settings, count
  EXPECT_NE(table.out.find("\nevery trial: "), std::string::npos) << table.out;
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

// Issue 44, item 11: a uniform range wider than DBL_MAX is refused in one line, and draws that
// coincide (3 samples over 2 methods that all round to one value: 2 trials, not 6) are said to
// the submitter, on a dry run and a real submit alike.
TEST_F(CliTest, SubmitRefusesAnEndlessRangeAndSaysWhenDrawsCoincide) {
  const std::string head =
      "name: cli-draws\ndataset: fortunes\nbase: {max_iters: 100, eval_interval: 50}\n"
      "parameters:\n  method: {values: [pre_ln, geonorm]}\n";
  const std::string search = "search: {strategy: random, samples: 3}\nresources: {gpus: 0}\n";
  const fs::path endless = *dir_ / "endless.yaml";
  std::ofstream(endless) << head << "  dropout: {distribution: uniform, min: -1e308, max: 1e308}\n"
                         << search;
  CliResult refused = Cli({"submit", endless.string(), "--dry-run"});
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.err.find("line 6: parameters.dropout.max: max - min of -1e+308 .. 1e+308 is "
                             "wider than the largest double"),
            std::string::npos)
      << refused.err;
  const fs::path narrow = *dir_ / "narrow.yaml";
  std::ofstream(narrow) << head << "  dropout: {distribution: uniform, min: 0.1, max: 0.100001}\n"
                        << search;
  const std::string note =
      "note: search.samples: 3 draws per grid point gave fewer distinct trials at 2 grid point(s)";
  CliResult dry = Cli({"submit", narrow.string(), "--dry-run"});
  ASSERT_EQ(dry.exit_code, 0) << dry.err;
  EXPECT_NE(dry.out.find("2 trials (dry run: nothing was submitted)\n" + note), std::string::npos)
      << dry.out;
  CliResult as_json = Cli({"submit", narrow.string(), "--dry-run", "--json"});
  ASSERT_EQ(as_json.exit_code, 0) << as_json.err;
  EXPECT_EQ(json::parse(as_json.out)["notices"].size(), 1u) << as_json.out;
  CliResult submitted = Cli({"submit", narrow.string()});
  ASSERT_EQ(submitted.exit_code, 0) << submitted.err;
  EXPECT_NE(submitted.out.find(" 2 trials, 2 new\n" + note), std::string::npos) << submitted.out;
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
  EXPECT_EQ(Lines(table.out), 4) << table.out;  // header, 2 rows, the ScaleNorm confound
  EXPECT_EQ(table.out.rfind("method", 0), 0u) << table.out;
  EXPECT_NE(table.out.find("p_spheret p=0.5"), std::string::npos) << table.out;
  char expected[96];
  const auto [mean, std] = cells.at("pre_ln|S");
  const double half = 12.706204736174707 * std / std::sqrt(2.0);  // t(0.975, 1) · std / √2
  std::snprintf(expected, sizeof(expected), "%.3f ± %.3f [%.3f, %.3f] (2)", mean, std, mean - half,
                mean + half);
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
    const double half = 12.706204736174707 * cell.second / std::sqrt(2.0);
    EXPECT_NEAR(std::stod(row.at("ci95_low")), cell.first - half, 1e-9);
    EXPECT_NEAR(std::stod(row.at("ci95_high")), cell.first + half, 1e-9);
    EXPECT_EQ(row.at("metric"), "val/loss");
  }
}

TEST_F(CliTest, ResultsRenderAsJsonMarkdownAndLatex) {
  const int64_t sweep = CompletedSweep();
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
                           "val_loss.svg", "val_loss.gp", "train_loss_avg.png"}) {
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
  EXPECT_EQ(zero_shot[0].at("metric"), "zeroshot/hellaswag/acc_norm");
  const double percent = std::stod(zero_shot[0].at("mean"));  // the report's unit, as the paper's
  EXPECT_TRUE(percent >= 30 && percent <= 50) << percent;
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

// Text that submitters and trainers chose (a trainer's stderr, a task name, a sweep name) is
// shown with its terminal escapes made visible, never sent to the terminal.
TEST_F(CliTest, LogsAndResultsShowOthersTerminalEscapesEscaped) {
  const fs::path file = *dir_ / "esc.yaml";
  const std::string rest =
      "dataset: fortunes\nbase: {max_iters: 10}\nparameters: {method: {values: [geonorm]}}\n"
      "max_restarts: 0\nresources: {gpus: 0}\n";
  // "\e" in a double-quoted YAML string is ESC: a name that would clear the screen is refused,
  // and the refusal does not clear it either.
  std::ofstream(file) << "name: \"cli-esc\\e[2J\"\n" << rest;
  CliResult refused = Cli({"submit", file.string()});
  EXPECT_NE(refused.exit_code, 0) << refused.out;
  EXPECT_EQ(refused.err.find('\x1b'), std::string::npos) << refused.err;
  std::ofstream(file) << "name: cli-esc\n" << rest;
  CliResult submitted = Cli({"submit", file.string()});
  ASSERT_EQ(submitted.exit_code, 0) << submitted.err;
  std::vector<v1::Lease> leases = Acquire("fake-esc", 1);
  ASSERT_EQ(leases.size(), 1u);
  v1::IngestEventsResponse response;
  std::unique_ptr<grpc::ClientContext> context = Context();
  auto writer = workers_->IngestEvents(context.get(), &response);
  v1::EventBatch batch;
  batch.set_trial_id(leases[0].trial_id());
  batch.set_attempt(leases[0].attempt());
  v1::Event* event = batch.add_other();
  event->set_json(R"({"type":"eval","task":"hella\u001b]0;owned\u0007swag"})");
  event->set_seq(1);
  v1::EvalScore* score = event->mutable_eval();
  score->set_task("hella\x1b]0;owned\x07swag");
  score->set_metric("acc_norm");
  score->set_value(0.25);
  score->set_step(10);
  ASSERT_TRUE(writer->Write(batch));
  writer->WritesDone();
  ASSERT_TRUE(writer->Finish().ok());
  Finish("fake-esc", leases[0], v1::TRIAL_STATE_FAILED, "\x1b[2J\x1b[31mboom\rfake\n", 1);

  CliResult logs = Cli({"logs", std::to_string(leases[0].trial_id())});
  ASSERT_EQ(logs.exit_code, 0) << logs.err;
  EXPECT_EQ(logs.out.find('\x1b'), std::string::npos) << logs.out;
  EXPECT_NE(logs.out.find("\\x1b[2J\\x1b[31mboom\\rfake\n"), std::string::npos) << logs.out;
  const std::string metric = "zeroshot/hella\x1b]0;owned\x07swag/acc_norm";
  for (const char* format : {"table", "csv", "md", "latex", "json"}) {
    CliResult results = Cli({"results", std::to_string(leases[0].sweep_id()), "--metric", metric,
                             "--state", "FAILED", "--format", format});
    ASSERT_EQ(results.exit_code, 0) << format << ": " << results.err;
    EXPECT_EQ(results.out.find('\x1b'), std::string::npos) << format << ": " << results.out;
    EXPECT_EQ(results.out.find('\x07'), std::string::npos) << format << ": " << results.out;
  }
}

}  // namespace
}  // namespace spheret
