// What every `vllm-cpp bench` command shares: summary statistics, the progress bar
// on stderr, the table on stdout, the --output-json file, the --plot image, the
// comma-separated sweep values, and the description of the run (device, dtype,
// weight format, commit) that goes into every JSON file.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "vllm/core/scheduler.h"
#include "vllm/engine/structured_output_manager.h"
#include "vllm/entrypoints/cli_args.h"

namespace vllm::bench {

using Clock = std::chrono::steady_clock;
double SecondsBetween(Clock::time_point a, Clock::time_point b);

// Mean, median and percentiles of a sample (percentiles interpolate linearly
// between order statistics, as numpy's default, which vLLM's benchmarks use).
struct Summary {
  int64_t count = 0;
  double mean = 0, median = 0, p90 = 0, p99 = 0, min = 0, max = 0;
};
Summary Summarize(std::vector<double> values);
double Percentile(const std::vector<double>& sorted, double q);  // q in [0, 100]
nlohmann::json SummaryJson(const Summary& s, double scale = 1.0);  // every figure times `scale`

// "1,16,64" -> {1, 16, 64}; each value must be a whole number >= `min`. `flag` names
// the option in errors.
std::vector<int64_t> ParseSweep(const std::string& text, const std::string& flag, int64_t min = 1);

// A one-line bar on stderr, redrawn at most every 100 ms and at the end:
//   "latency batch 16 [##########          ] 3/6"
class ProgressBar {
 public:
  ProgressBar(std::string label, int64_t total);
  void Update(int64_t done);
  void Finish();  // draws the final state and ends the line

 private:
  void Draw();
  std::string label_;
  int64_t total_, done_ = 0;
  bool finished_ = false;
  Clock::time_point last_draw_{};
};

// A table printed on stdout with columns right-aligned to their widest cell.
class Table {
 public:
  explicit Table(std::vector<std::string> header) : header_(std::move(header)) {}
  void AddRow(std::vector<std::string> cells);
  std::string Render() const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};
std::string Fixed(double value, int decimals);  // "%.*f"

// A line chart of one or more series (y against the swept x) written as PNG by
// gnuplot, which runs as a separate process: the engine does not link a plotter.
struct PlotSeries {
  std::string name;
  std::vector<double> x, y;
};
struct Plot {
  std::string title, x_label, y_label;
  std::vector<PlotSeries> series;
  // Adds one sweep point: x and the value of each series, in order.
  void AddPoint(double x, const std::vector<double>& ys);
};
// Throws CliError when --plot is given but gnuplot cannot be started, so that a
// benchmark never runs for minutes and then fails to draw.
void CheckPlotterAvailable();
void WritePlot(const Plot& plot, const std::string& path);

// The bench flags every subcommand takes: --output-json, --plot, --help.
void AddReportArgs(CliArgs& cli);
// Writes `report` to --output-json and `plot` to --plot when they were given.
void WriteOutputs(const CliArgs& cli, const nlohmann::json& report, const Plot& plot);

// Speculative decoding over a measured stretch (the engine's counters after minus
// before): {"num_drafts", "num_draft_tokens", "num_accepted_tokens",
// "acceptance_rate", "mean_acceptance_length", "acceptance_rate_per_pos"}; null
// without speculative decoding. The line printed under a result table.
nlohmann::json SpecDecodingJson(const SpecDecodingStats& before, const SpecDecodingStats& after, bool enabled);
std::string SpecDecodingSummary(const nlohmann::json& spec);

// The grammar bitmasks' host cost over a measured stretch: {"steps", "rows",
// "seconds", "ms_per_step", "us_per_row", "fraction_of_elapsed"}; null when no row
// was filled. The line printed under a result table.
nlohmann::json GrammarBitmaskJson(const StructuredOutputStats& before, const StructuredOutputStats& after,
                                  double elapsed_s);
std::string GrammarBitmaskSummary(const nlohmann::json& bitmask);
// The reach counters of a run (vt::reach::Snapshot as JSON) on stderr, one line each,
// under "kernels reached, <what>:" (--print-kernels of bench latency and throughput).
void PrintKernels(const nlohmann::json& kernels, const std::string& what);

// {"version", "commit", "date"}: what built this binary and when it ran (UTC).
nlohmann::json BuildJson();

}  // namespace vllm::bench
