// Figures: the gnuplot script a panel gets, run through the real gnuplot.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "client/report/plot.h"

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
  return {id, config, std::move(steps), std::move(values)};
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

}  // namespace
}  // namespace spheret::client
