// The fixture of cli_paper_known_values_test.cc: the known database (paper_known_values.h) put
// into a real coordinator's SQLite file by fake workers over gRPC, and the checks of a paper
// table's CSV and Markdown against the expected cells (paper_known_tables.h).
#pragma once

#include <set>

#include "tests/client/cli_fixture.h"
#include "tests/client/paper_known_tables.h"

namespace spheret::known {

inline std::string SweepYaml(int corpus) {
  return "name: known-values-" + kDatasets[corpus] + "\ndataset: " + kDatasets[corpus] +
         "\nmetric: {name: val/loss, goal: minimize}\n"
         "base: {max_iters: 30, eval_interval: 15}\n"
         "eval:\n  tasks: [arc_challenge, arc_easy, boolq, hellaswag, lambada_openai, openbookqa,\n"
         "          piqa, sciq, social_iqa, winogrande, wikitext]\n"
         "  data: zeroshot\n"
         "parameters:\n"
         "  method: {values: [pre_ln, pre_dyt, peri_ln, keel, geonorm, p_spheret]}\n"
         "  p: {values: [0.5, 1, 2], only_for: {method: p_spheret}}\n"
         "  scale: {values: [S, M, L]}\n"
         "seeds: [1, 2, 3]\nmax_restarts: 0\nresources: {gpus: 0}\n";
}

// Where a leased trial stands, from its config.
inline Trial TrialOf(const v1::Lease& lease) {
  const json config = json::parse(lease.config_json());
  Trial t;
  t.id = lease.trial_id();
  const auto index = [](const std::vector<std::string>& names, const std::string& name) {
    return static_cast<int>(std::find(names.begin(), names.end(), name) - names.begin());
  };
  t.corpus = index(kDatasets, config.at("dataset").get<std::string>());
  t.scale = index(kScales, config.at("scale").get<std::string>());
  t.seed = config.at("seed").get<int>() - 1;
  const std::string method = config.at("method").get<std::string>();
  const double p = config.contains("p") ? config.at("p").get<double>() : 0;
  t.row = static_cast<int>(
      std::find_if(kRows.begin(), kRows.end(),
                   [&](const Row& row) { return row.method == method && row.p == p; }) -
      kRows.begin());
  return t;
}

class PaperKnownValuesTest : public CliTest {
 protected:
  // A fresh coordinator per suite (and per --gtest_repeat): the database is built again.
  static void SetUpTestSuite() {
    CliTest::SetUpTestSuite();
    trials_.reset();
  }

  // The two sweeps run to their end, once per suite: every trial.
  const std::vector<Trial>& Database() {
    if (trials_) return *trials_;
    trials_ = std::make_unique<std::vector<Trial>>();
    std::vector<Trial>* trials = trials_.get();
    for (int corpus = 0; corpus < 2; ++corpus) {
      const fs::path file = *dir_ / ("known-" + std::to_string(corpus) + ".yaml");
      std::ofstream(file) << SweepYaml(corpus);
      CliResult submitted = Cli({"submit", file.string()});
      EXPECT_EQ(submitted.exit_code, 0) << submitted.err;
      EXPECT_EQ(std::sscanf(submitted.out.c_str(), "sweep %ld:", &sweeps_[corpus]), 1)
          << submitted.out;
    }
    for (int round = 0; round < 20; ++round) {
      const std::vector<v1::Lease> leases = Acquire("known-worker", 24);
      if (leases.empty()) break;
      for (const v1::Lease& lease : leases) {
        trials->push_back(TrialOf(lease));
        RunTrial(lease, trials->back());
      }
    }
    EXPECT_EQ(trials->size(), 2u * 3 * 8 * kSeeds);
    return *trials;
  }

  // The fake trainer of one trial: its curves and scores, then its end. A FAILED trial crashed
  // after step 10: its curves stop there, and neither tables nor figures may count them.
  void RunTrial(const v1::Lease& lease, const Trial& t) {
    ASSERT_LT(t.row, 8) << lease.config_json();
    v1::EventBatch batch;
    batch.set_trial_id(lease.trial_id());
    batch.set_attempt(lease.attempt());
    const int last = Failed(t) ? 10 : kFinalStep;
    const auto add = [&](const std::string& name, int step, double value) {
      v1::MetricRow* row = batch.add_metrics();
      row->set_name(name);
      row->set_step(step);
      row->set_value(value);
    };
    for (int step : kTrainSteps) {
      if (step <= last) add("train/loss_avg", step, LossAt(t, false, step));
    }
    for (int step : kValSteps) {
      if (step > last) continue;
      add("val/loss", step, LossAt(t, true, step));
      // OpenWebText's trainer logs no val/ppl: the report takes exp(val/loss), as for old runs.
      if (t.corpus == kFwe) add("val/ppl", step, std::exp(LossAt(t, true, step)));
    }
    int seq = 0;
    for (int j = 0; j < static_cast<int>(kZeroShot.size()); ++j) {
      if (Reports(t, j)) AddScore(&batch, kZeroShot[j], t, j, ++seq);
    }
    if (!Failed(t)) {
      v1::Event* done = batch.add_other();
      done->set_json(R"({"type":"done","step":30})");
      done->set_seq(++seq);
    }
    v1::IngestEventsResponse response;
    std::unique_ptr<grpc::ClientContext> context = Context();  // outlives the stream
    auto writer = workers_->IngestEvents(context.get(), &response);
    ASSERT_TRUE(writer->Write(batch));
    writer->WritesDone();
    const grpc::Status status = writer->Finish();
    ASSERT_TRUE(status.ok()) << status.error_message();
    if (Failed(t)) {
      Finish("known-worker", lease, v1::TRIAL_STATE_FAILED, "RuntimeError: known failure\n", 1);
    } else {
      Finish("known-worker", lease, v1::TRIAL_STATE_SUCCEEDED);
    }
  }

  static void AddScore(v1::EventBatch* batch, const ZeroShotColumn& column, const Trial& t, int j,
                       int seq) {
    const double value = ZeroShotValue(t, j);
    v1::Event* event = batch->add_other();
    event->set_json(json({{"type", "eval"},
                          {"task", column.task},
                          {"metric", column.metric},
                          {"value", value},
                          {"std_error", 0.01},
                          {"step", kFinalStep}})
                        .dump());
    event->set_seq(seq);
    v1::EvalScore* score = event->mutable_eval();
    score->set_task(column.task);
    score->set_metric(column.metric);
    score->set_value(value);
    score->set_std_error(0.01);
    score->set_step(kFinalStep);
  }

  // `spheret report FINEWEB OPENWEBTEXT --paper OUTPUT ARGS...`, which must succeed.
  CliResult Paper(const std::string& output, std::vector<std::string> args) {
    Database();
    std::vector<std::string> argv = {"report", std::to_string(sweeps_[0]),
                                     std::to_string(sweeps_[1]), "--paper", output};
    argv.insert(argv.end(), args.begin(), args.end());
    CliResult result = Cli(argv);
    EXPECT_EQ(result.exit_code, 0) << result.err;
    return result;
  }

  // Checks csv and md against `expected` cell by cell.
  void ExpectTable(const std::string& output, const ExpectedTable& expected);

  inline static int64_t sweeps_[2] = {0, 0};
  inline static std::unique_ptr<std::vector<Trial>> trials_;
};

// The CSV: one line per cell, rows x columns in order, at full precision.
inline void ExpectCsv(const std::string& csv, const ExpectedTable& expected) {
  const auto lines = ParseCsv(csv);
  const size_t width = expected.columns.size();
  ASSERT_EQ(lines.size(), kRows.size() * width) << csv;
  const auto near = [](const std::string& text, double value, const std::string& what) {
    ASSERT_FALSE(text.empty()) << what;
    EXPECT_NEAR(std::stod(text), value, 1e-11 * std::max(1.0, std::abs(value))) << what;
  };
  for (size_t i = 0; i < lines.size(); ++i) {
    const auto& line = lines[i];
    const ExpectedColumn& column = expected.columns[i % width];
    const ExpectedCell& cell = expected.cells[i];
    const std::string what = kRows[i / width].name + " | " + column.header;
    EXPECT_EQ(line.at("row"), kRows[i / width].name) << i;
    EXPECT_EQ(line.at("corpus"), kCorpora[column.corpus]) << what;
    EXPECT_EQ(line.at("scale"), kScales[column.scale]) << what;
    EXPECT_EQ(line.at("metric"), column.metric) << what;
    EXPECT_EQ(line.at("n"), std::to_string(cell.stats.n)) << what;
    EXPECT_EQ(line.at("missing"), cell.missing) << what;
    EXPECT_EQ(line.at("left_out"), cell.left_out) << what;
    if (cell.stats.n > 0 || cell.lossy()) {
      EXPECT_EQ(line.at("n_total"), std::to_string(cell.n_total)) << what;
    }
    std::vector<int64_t> trials;
    std::istringstream ids(line.at("trials"));
    for (int64_t id; ids >> id;) trials.push_back(id);
    std::sort(trials.begin(), trials.end());
    EXPECT_EQ(trials, cell.trials) << what;
    if (cell.stats.n == 0) {
      EXPECT_EQ(line.at("mean"), "") << what << ": a missing cell is never 0";
      continue;
    }
    near(line.at("mean"), cell.stats.mean, what + " mean");
    near(line.at("std"), cell.stats.std, what + " std");
    near(line.at("ci95_low"), cell.stats.low, what + " ci95_low");
    near(line.at("ci95_high"), cell.stats.high, what + " ci95_high");
  }
}

inline std::vector<std::string> SplitLines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The Markdown: the header, each row's printed cells with their marks, and the notes.
inline void ExpectMarkdown(const std::string& md, const ExpectedTable& expected) {
  const size_t width = expected.columns.size();
  std::vector<std::vector<int>> marks(width);  // per column, per row
  for (size_t c = 0; c < width; ++c) {
    std::vector<Stats> column;
    for (size_t r = 0; r < kRows.size(); ++r) column.push_back(expected.cells[r * width + c].stats);
    marks[c] = Marks(column, expected.columns[c].higher, expected.decimals);
  }
  const std::vector<std::string> lines = SplitLines(md);
  ASSERT_GT(lines.size(), kRows.size() + 2) << md;
  std::string header = "| method |";
  for (const auto& column : expected.columns) header += " " + column.header + " |";
  EXPECT_EQ(lines[0], header);
  for (size_t r = 0; r < kRows.size(); ++r) {
    std::string line = "| " + kRows[r].name + " |";
    for (size_t c = 0; c < width; ++c) {
      const ExpectedCell& cell = expected.cells[r * width + c];
      const std::string text = ShownText(cell, expected.decimals, marks[c][r] > 0);
      line += " " +
              (marks[c][r] == 2   ? "**" + text + "**"
               : marks[c][r] == 1 ? "<u>" + text + "</u>"
                                  : text) +
              " |";
    }
    EXPECT_EQ(lines[r + 2], line) << "row " << r;
  }
  int dashes = 0;
  for (const std::string& line : lines) dashes += line.rfind("– ", 0) == 0;
  EXPECT_EQ(dashes, static_cast<int>(expected.notes.size())) << md;
  for (const std::string& note : expected.notes) {
    EXPECT_NE(std::find(lines.begin(), lines.end(), note), lines.end()) << note << "\n" << md;
  }
  // Each filled cell that left seeds out is named in a note.
  for (size_t i = 0; i < expected.cells.size(); ++i) {
    const ExpectedCell& cell = expected.cells[i];
    if (!cell.lossy() || cell.stats.n == 0) continue;
    const ExpectedColumn& column = expected.columns[i % width];
    const std::string note = kRows[i / width].name + " at " + kCorpora[column.corpus] + " " +
                             kScales[column.scale] + ": " + std::to_string(cell.stats.n) + " of " +
                             std::to_string(cell.n_total) + " seeds counted; " + cell.left_out;
    EXPECT_NE(std::find(lines.begin(), lines.end(), note), lines.end()) << note << "\n" << md;
  }
}

inline void PaperKnownValuesTest::ExpectTable(const std::string& output,
                                              const ExpectedTable& expected) {
  const CliResult csv = Paper(output, {"--format", "csv"});
  ExpectCsv(csv.out, expected);
  const CliResult md = Paper(output, {"--format", "md"});
  ExpectMarkdown(md.out, expected);
}

// Spot checks written by hand from the formulas (not through Marks): the rows in bold and the
// rows underlined in one column of the Markdown.
inline void ExpectMarked(const std::string& md, const std::string& header,
                         const std::set<std::string>& bold,
                         const std::set<std::string>& underlined) {
  const std::vector<std::string> lines = SplitLines(md);
  const std::string head = lines.at(0);
  const size_t at = head.find("| " + header + " |");
  ASSERT_NE(at, std::string::npos) << header;
  // The '|'s before the column's: 1 for the first after the row names (cells[2] of a line).
  const long column = std::count(head.begin(), head.begin() + at, '|');
  std::set<std::string> got_bold, got_underlined;
  for (size_t r = 2; r < 2 + kRows.size(); ++r) {
    std::vector<std::string> cells;
    std::istringstream in(lines.at(r));
    for (std::string cell; std::getline(in, cell, '|');) cells.push_back(cell);
    const std::string cell = cells.at(column + 1);
    const std::string name = cells.at(1).substr(1, cells.at(1).size() - 2);
    if (cell.rfind(" **", 0) == 0) got_bold.insert(name);
    if (cell.rfind(" <u>", 0) == 0) got_underlined.insert(name);
  }
  EXPECT_EQ(got_bold, bold) << header;
  EXPECT_EQ(got_underlined, underlined) << header;
}

}  // namespace spheret::known
