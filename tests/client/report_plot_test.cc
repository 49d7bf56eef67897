// Figures: the gnuplot script a panel gets, run through the real gnuplot, alone and in batches.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "client/render/figures.h"
#include "client/report/geometry.h"
#include "client/report/stats.h"

namespace spheret::client {
namespace {

namespace fs = std::filesystem;

std::string ReadText(const fs::path& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

CurveInput Curve(int64_t id, const std::string& method, std::vector<int64_t> steps,
                 std::vector<double> values) {
  const std::string config =
      R"({"method":")" + method + R"(","scale":"xs","seed":1,"dataset":"fortunes"})";
  return {id, TrialConfig(config), std::move(steps), std::move(values)};
}

fs::path FreshDir(const std::string& name) {
  const fs::path dir = fs::path(testing::TempDir()) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// A per-layer field only the model row has (one point at layer 0, as the demo's bound_max): gnuplot
// used to warn "empty x range" / "empty y range" and draw nothing; now the ranges are set and the
// point is drawn, and gnuplot says nothing.
TEST(Plot, AOnePointPanelGetsItsRangesAndAPointAndGnuplotStaysQuiet) {
  const fs::path dir = FreshDir("plot_one_point");
  PlotOptions options;
  options.metric = "bound_max";
  options.out = (dir / "one.png").string();
  testing::internal::CaptureStderr();
  absl::StatusOr<PlotFiles> files = WritePlot({Curve(1, "geonorm", {0}, {100.0})}, options);
  const std::string said = testing::internal::GetCapturedStderr();
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_EQ(said, "");
  const std::string script = ReadText(files->script);
  EXPECT_NE(script.find("set xrange [-1:1]\n"), std::string::npos) << script;
  EXPECT_NE(script.find("set yrange [99:101]\n"), std::string::npos) << script;
  EXPECT_NE(script.find("with points"), std::string::npos) << script;
  EXPECT_GT(fs::file_size(files->figure), 0u);
}

// Curves that vary keep gnuplot's automatic ranges (reset after a panel that set them).
TEST(Plot, VaryingCurvesKeepAutomaticRangesAndLines) {
  const fs::path dir = FreshDir("plot_lines");
  PlotOptions options;
  options.out = (dir / "lines.svg").string();
  absl::StatusOr<PlotFiles> files = WritePlot({Curve(1, "pre_ln", {0, 50, 100}, {4.0, 3.0, 2.5}),
                                               Curve(2, "geonorm", {0, 50, 100}, {4.0, 2.9, 2.4})},
                                              options);
  ASSERT_TRUE(files.ok()) << files.status();
  const std::string script = ReadText(files->script);
  EXPECT_NE(script.find("set autoscale x\nset autoscale y\n"), std::string::npos) << script;
  EXPECT_EQ(script.find("set xrange"), std::string::npos) << script;
  EXPECT_EQ(script.find("with points"), std::string::npos) << script;
  EXPECT_EQ(files->lines, 2);
}

// Issue 44, item 12: `spheret plot --diag theta` over finite values near DBL_MAX said "no trial
// has diag values of 'theta'": the mean over training overflowed to inf and the series was
// dropped. The means are taken without overflow, and the figure is drawn (scaled: gnuplot draws no
// coordinate near DBL_MAX).
TEST(Plot, DiagValuesNearDblMaxAreAveragedWithoutOverflowAndDrawn) {
  const TrialConfig seed1(R"({"method":"geonorm","scale":"xs","seed":1,"dataset":"fortunes"})");
  const TrialConfig seed2(R"({"method":"geonorm","scale":"xs","seed":2,"dataset":"fortunes"})");
  const std::vector<DiagSeries> series = {{1, seed1, 1, "attn", {0, 10}, {1e308, 1.5e308}},
                                          {1, seed1, 1, "mlp", {0, 10}, {-1e308, -1.7e308}},
                                          {2, seed2, 1, "attn", {0, 10}, {1.5e308, 1.7e308}},
                                          {2, seed2, 1, "mlp", {0, 10}, {-1.5e308, -1e308}}};
  absl::StatusOr<std::vector<CurveInput>> profiles = DepthProfiles(series, "mean");
  ASSERT_TRUE(profiles.ok()) << profiles.status();
  ASSERT_EQ(profiles->size(), 2u) << "both trials keep their series";
  EXPECT_EQ((*profiles)[0].steps, (std::vector<int64_t>{1, 2}));
  EXPECT_DOUBLE_EQ((*profiles)[0].values[0], 1.25e308);
  EXPECT_DOUBLE_EQ((*profiles)[0].values[1], -1.35e308);
  EXPECT_DOUBLE_EQ((*profiles)[1].values[0], 1.6e308);
  const Description over_seeds = Describe({1.25e308, 1.6e308});
  EXPECT_DOUBLE_EQ(over_seeds.mean, 1.425e308);
  EXPECT_NEAR(over_seeds.std / 1e308, 0.35 / std::sqrt(2.0), 1e-12);
  EXPECT_DOUBLE_EQ(FiniteMean({0.1, 0.2, 0.3}), (0.1 + 0.2 + 0.3) / 3) << "the usual figure";
  const fs::path dir = FreshDir("plot_dbl_max");
  PlotOptions options;
  options.metric = "theta";
  options.xlabel = "sublayer";
  options.out = (dir / "theta.png").string();
  absl::StatusOr<PlotFiles> files = WritePlot(*profiles, options);
  ASSERT_TRUE(files.ok()) << files.status();
  ASSERT_EQ(files->data_files.size(), 1u);
  const std::string data = ReadText(files->data_files[0]);
  EXPECT_EQ(data.find("inf"), std::string::npos) << data;
  const size_t row = data.find("\n1 ");  // depth 1: step mean std n
  ASSERT_NE(row, std::string::npos) << data;
  EXPECT_DOUBLE_EQ(std::strtod(data.c_str() + row + 3, nullptr), 1.425e308) << data;
  // gnuplot takes coordinates past a quarter of DBL_MAX for undefined: the figure draws them
  // divided by a power of ten, and says so on its y axis.
  const std::string script = ReadText(files->script);
  EXPECT_NE(script.find("set ylabel 'theta (values / 1e+308)'"), std::string::npos) << script;
  EXPECT_NE(script.find("using 1:($2/1e+308)"), std::string::npos) << script;
  EXPECT_GT(fs::file_size(files->figure), 0u);
}

// A report's figures drawn together (FigureBatch: a gnuplot process per core, `reset` between
// scripts) come out as each drawn alone, settings of one (log x, y range) not leaking into the
// next; nothing is drawn before Finish.
TEST(Plot, ABatchDrawsEachFigureAsItIsDrawnAlone) {
  const fs::path together = FreshDir("plot_batch"), alone = FreshDir("plot_alone");
  const std::vector<CurveInput> curves = {Curve(1, "pre_ln", {1, 50, 100}, {4.0, 3.0, 2.5}),
                                          Curve(2, "geonorm", {1, 50, 100}, {4.0, 2.9, 2.4})};
  FigureBatch batch("gnuplot");
  std::vector<std::string> names;
  for (int i = 0; i < 6; ++i) {
    PlotOptions options;
    options.log_x = i == 1;
    options.ylim = i == 2 ? "0:10" : "";
    options.title = "figure " + std::to_string(i);
    const std::string name = "f" + std::to_string(i) + (i % 2 == 0 ? ".png" : ".svg");
    names.push_back(name);
    options.out = (together / name).string();
    ASSERT_TRUE(WritePlot(curves, options, &batch).ok());
    options.out = (alone / name).string();
    ASSERT_TRUE(WritePlot(curves, options).ok());
    EXPECT_FALSE(fs::exists(together / name)) << "drawn by Finish only";
  }
  EXPECT_EQ(batch.queued(), 6u);
  ASSERT_TRUE(batch.Finish().ok());
  EXPECT_EQ(batch.queued(), 0u);
  for (const std::string& name : names) {
    ASSERT_TRUE(fs::exists(together / name)) << name;
    EXPECT_EQ(ReadText(together / name), ReadText(alone / name)) << name;
  }
}

// A gnuplot stand-in in `dir` that fails on a script titled "broken figure" and draws nothing.
fs::path FakeGnuplot(const fs::path& dir) {
  const fs::path fake = dir / "fake-gnuplot";
  {
    std::ofstream script(fake);
    script << "#!/bin/sh\ngrep -q 'broken figure' \"$1\" && { echo fake: error >&2; exit 1; }\n"
              "exit 0\n";
  }
  fs::permissions(fake, fs::perms::owner_all);
  return fake;
}

// A batch whose gnuplot fails draws its figures again one at a time, and the error names the
// script that failed; a gnuplot that is not there says how to install it.
TEST(Plot, ABatchNamesTheScriptThatFailedAndAMissingGnuplot) {
  const fs::path dir = FreshDir("plot_batch_fails");
  const fs::path fake = FakeGnuplot(dir);
  FigureBatch batch(fake.string());
  for (const std::string title : {"one", "broken figure", "three"}) {
    PlotOptions options;
    options.title = title;
    options.out = (dir / (title.substr(0, 3) + ".png")).string();
    ASSERT_TRUE(WritePlot({Curve(1, "pre_ln", {0, 1}, {2.0, 1.0})}, options, &batch).ok());
  }
  testing::internal::CaptureStderr();
  const absl::Status failed = batch.Finish();
  testing::internal::GetCapturedStderr();
  EXPECT_EQ(failed.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(failed.message(),
            "gnuplot failed on " + (dir / "bro.gp").string() + " (its message is above)");
  FigureBatch missing((dir / "no-such-gnuplot").string());
  PlotOptions options;
  options.out = (dir / "x.svg").string();
  ASSERT_TRUE(WritePlot({Curve(1, "pre_ln", {0, 1}, {2.0, 1.0})}, options, &missing).ok());
  const absl::Status absent = missing.Finish();
  EXPECT_EQ(absent.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(absent.message().find("not found: install gnuplot"), std::string::npos) << absent;
}

// Start draws what is queued so far in the background (a report's figures while it fetches the
// next fields, issue 47): figures queued in parts, each part started, come out as each drawn
// alone once Finish returns; a failure in an early part is Finish's error, naming its script.
TEST(Plot, ABatchStartedInPartsDrawsEveryFigureAndNamesAFailedScript) {
  const fs::path together = FreshDir("plot_parts"), alone = FreshDir("plot_parts_alone");
  const std::vector<CurveInput> curves = {Curve(1, "pre_ln", {1, 50, 100}, {4.0, 3.0, 2.5})};
  FigureBatch batch("gnuplot");
  for (int i = 0; i < 5; ++i) {
    PlotOptions options;
    options.title = "part figure " + std::to_string(i);
    options.log_x = i == 1;
    const std::string name = "p" + std::to_string(i) + (i % 2 == 0 ? ".png" : ".svg");
    options.out = (together / name).string();
    ASSERT_TRUE(WritePlot(curves, options, &batch).ok());
    options.out = (alone / name).string();
    ASSERT_TRUE(WritePlot(curves, options).ok());
    if (i == 1 || i == 2) batch.Start();  // parts {0, 1}, {2}, then {3, 4} by Finish
  }
  EXPECT_EQ(batch.queued(), 2u);
  ASSERT_TRUE(batch.Finish().ok());
  for (int i = 0; i < 5; ++i) {
    const std::string name = "p" + std::to_string(i) + (i % 2 == 0 ? ".png" : ".svg");
    ASSERT_TRUE(fs::exists(together / name)) << name;
    EXPECT_EQ(ReadText(together / name), ReadText(alone / name)) << name;
  }
  const fs::path dir = FreshDir("plot_parts_fails");
  const fs::path fake = FakeGnuplot(dir);
  FigureBatch failing(fake.string());
  for (const std::string title : {"one", "broken figure", "three"}) {
    PlotOptions options;
    options.title = title;
    options.out = (dir / (title.substr(0, 3) + ".png")).string();
    ASSERT_TRUE(WritePlot({Curve(1, "pre_ln", {0, 1}, {2.0, 1.0})}, options, &failing).ok());
    if (title == "broken figure") failing.Start();
  }
  testing::internal::CaptureStderr();
  const absl::Status failed = failing.Finish();
  testing::internal::GetCapturedStderr();
  EXPECT_EQ(failed.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(failed.message(),
            "gnuplot failed on " + (dir / "bro.gp").string() + " (its message is above)");
}

}  // namespace
}  // namespace spheret::client
