#include "bench_report.h"

#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <numeric>
#include <sstream>

#include "vllm/version.h"

namespace vllm::bench {

double SecondsBetween(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

double Percentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0.0;
  const double rank = q / 100.0 * static_cast<double>(sorted.size() - 1);
  const auto below = static_cast<size_t>(std::floor(rank));
  const size_t above = std::min(below + 1, sorted.size() - 1);
  const double frac = rank - static_cast<double>(below);
  return sorted[below] + (sorted[above] - sorted[below]) * frac;
}

Summary Summarize(std::vector<double> values) {
  Summary s;
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  s.count = static_cast<int64_t>(values.size());
  s.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
  s.median = Percentile(values, 50);
  s.p90 = Percentile(values, 90);
  s.p99 = Percentile(values, 99);
  s.min = values.front();
  s.max = values.back();
  return s;
}

nlohmann::json SummaryJson(const Summary& s, double scale) {
  return {{"count", s.count},           {"mean", s.mean * scale}, {"median", s.median * scale},
          {"p90", s.p90 * scale},       {"p99", s.p99 * scale},   {"min", s.min * scale},
          {"max", s.max * scale}};
}

std::vector<int64_t> ParseSweep(const std::string& text, const std::string& flag, int64_t min) {
  std::vector<int64_t> values;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size() || v < min) {
      throw CliError("bench: --" + flag + " takes comma-separated whole numbers >= " + std::to_string(min) +
                     ", got '" + item + "' in '" + text + "'");
    }
    values.push_back(v);
  }
  if (values.empty()) throw CliError("bench: --" + flag + " is empty");
  return values;
}

ProgressBar::ProgressBar(std::string label, int64_t total) : label_(std::move(label)), total_(std::max<int64_t>(total, 1)) {
  Draw();
}

void ProgressBar::Update(int64_t done) {
  done_ = std::min(done, total_);
  if (SecondsBetween(last_draw_, Clock::now()) >= 0.1) Draw();
}

void ProgressBar::Finish() {
  if (finished_) return;
  Draw();
  std::fprintf(stderr, "\n");
  finished_ = true;
}

void ProgressBar::Draw() {
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(kWidth * done_ / total_);
  std::fprintf(stderr, "\r%s [%s%s] %lld/%lld", label_.c_str(), std::string(filled, '#').c_str(),
               std::string(kWidth - filled, ' ').c_str(), static_cast<long long>(done_),
               static_cast<long long>(total_));
  std::fflush(stderr);
  last_draw_ = Clock::now();
}

void Table::AddRow(std::vector<std::string> cells) {
  cells.resize(header_.size());
  rows_.push_back(std::move(cells));
}

std::string Table::Render() const {
  std::vector<size_t> width(header_.size());
  for (size_t c = 0; c < header_.size(); ++c) {
    width[c] = header_[c].size();
    for (const auto& row : rows_) width[c] = std::max(width[c], row[c].size());
  }
  std::string out;
  const auto line = [&](const std::vector<std::string>& cells) {
    for (size_t c = 0; c < cells.size(); ++c) {
      out += std::string(width[c] - cells[c].size() + (c ? 2 : 0), ' ') + cells[c];
    }
    out += "\n";
  };
  line(header_);
  for (const auto& row : rows_) line(row);
  return out;
}

std::string Fixed(double value, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, value);
  return buf;
}

void Plot::AddPoint(double x, const std::vector<double>& ys) {
  for (size_t i = 0; i < series.size() && i < ys.size(); ++i) {
    series[i].x.push_back(x);
    series[i].y.push_back(ys[i]);
  }
}

void CheckPlotterAvailable() {
  FILE* probe = popen("gnuplot --version 2>/dev/null", "r");
  char line[128] = {};
  const bool read = probe && std::fgets(line, sizeof line, probe) != nullptr;
  const int status = probe ? pclose(probe) : -1;
  if (!read || status != 0) {
    throw CliError("bench: --plot draws with gnuplot, which could not be started (Debian: apt-get install gnuplot-nox)");
  }
}

namespace {

// gnuplot's string syntax: single quotes, a quote written twice.
std::string GnuplotString(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

std::string GnuplotScript(const Plot& plot, const std::string& path) {
  std::ostringstream s;
  s << "set terminal pngcairo noenhanced size 900,600\nset output " << GnuplotString(path) << "\n";
  s << "set title " << GnuplotString(plot.title) << "\nset xlabel " << GnuplotString(plot.x_label)
    << "\nset ylabel " << GnuplotString(plot.y_label) << "\nset grid\nset key left top\n";
  double lo = INFINITY, hi = 0;
  for (const auto& series : plot.series) {
    for (double x : series.x) lo = std::min(lo, x), hi = std::max(hi, x);
  }
  if (lo > 0 && hi / lo >= 8) s << "set logscale x 2\n";  // sweeps such as 1,16,64,256
  for (size_t i = 0; i < plot.series.size(); ++i) {
    s << "$d" << i << " << EOD\n";
    for (size_t j = 0; j < plot.series[i].x.size(); ++j) s << plot.series[i].x[j] << " " << plot.series[i].y[j] << "\n";
    s << "EOD\n";
  }
  s << "plot ";
  for (size_t i = 0; i < plot.series.size(); ++i) {
    s << (i ? ", " : "") << "$d" << i << " using 1:2 with linespoints lw 2 pt 7 title "
      << GnuplotString(plot.series[i].name);
  }
  s << "\n";
  return s.str();
}

}  // namespace

void WritePlot(const Plot& plot, const std::string& path) {
  FILE* gnuplot = popen("gnuplot", "w");
  if (!gnuplot) throw CliError("bench: --plot could not start gnuplot");
  const std::string script = GnuplotScript(plot, path);
  std::fwrite(script.data(), 1, script.size(), gnuplot);
  const int status = pclose(gnuplot);
  if (status != 0) {
    throw CliError("bench: gnuplot failed to write --plot " + path + " (exit status " +
                   std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : status) + ")");
  }
}

void AddReportArgs(CliArgs& cli) {
  cli.AddOption("output-json", "write every figure and the configuration to this JSON file");
  cli.AddOption("plot", "PNG file: tokens/s against the swept value (drawn by gnuplot)");
  cli.AddFlag("help", "show this help");
}

void WriteOutputs(const CliArgs& cli, const nlohmann::json& report, const Plot& plot) {
  if (cli.WasGiven("output-json")) {
    const std::string path = cli.GetString("output-json");
    std::ofstream out(path);
    out << report.dump(2) << "\n";
    if (!out) throw CliError("bench: cannot write --output-json " + path);
    std::fprintf(stderr, "wrote %s\n", path.c_str());
  }
  if (cli.WasGiven("plot")) {
    WritePlot(plot, cli.GetString("plot"));
    std::fprintf(stderr, "wrote %s\n", cli.GetString("plot").c_str());
  }
}

nlohmann::json SpecDecodingJson(const SpecDecodingStats& before, const SpecDecodingStats& after, bool enabled) {
  if (!enabled) return nullptr;
  const int64_t drafts = after.num_drafts - before.num_drafts;
  const int64_t drafted = after.num_draft_tokens - before.num_draft_tokens;
  const int64_t accepted = after.num_accepted_tokens - before.num_accepted_tokens;
  nlohmann::json per_pos = nlohmann::json::array();
  for (size_t i = 0; i < after.num_accepted_tokens_per_pos.size(); ++i) {
    const int64_t earlier = i < before.num_accepted_tokens_per_pos.size() ? before.num_accepted_tokens_per_pos[i] : 0;
    per_pos.push_back(drafts > 0 ? static_cast<double>(after.num_accepted_tokens_per_pos[i] - earlier) / drafts : 0.0);
  }
  return {{"num_drafts", drafts},
          {"num_draft_tokens", drafted},
          {"num_accepted_tokens", accepted},
          {"acceptance_rate", drafted > 0 ? static_cast<double>(accepted) / drafted : 0.0},
          {"mean_acceptance_length", drafts > 0 ? 1.0 + static_cast<double>(accepted) / drafts : 0.0},
          {"acceptance_rate_per_pos", per_pos}};
}

std::string SpecDecodingSummary(const nlohmann::json& spec) {
  if (spec.is_null()) return "";
  std::string per_pos;
  for (const nlohmann::json& r : spec["acceptance_rate_per_pos"]) per_pos += (per_pos.empty() ? "" : ", ") + Fixed(r, 3);
  return "speculative decoding: " + std::to_string(spec["num_drafts"].get<int64_t>()) + " drafts, " +
         std::to_string(spec["num_accepted_tokens"].get<int64_t>()) + " of " +
         std::to_string(spec["num_draft_tokens"].get<int64_t>()) + " draft tokens accepted (" +
         Fixed(100 * spec["acceptance_rate"].get<double>(), 1) + "%), mean acceptance length " +
         Fixed(spec["mean_acceptance_length"], 2) + ", per position " + per_pos + "\n";
}

nlohmann::json GrammarBitmaskJson(const StructuredOutputStats& before, const StructuredOutputStats& after,
                                  double elapsed_s) {
  const int64_t steps = after.num_bitmask_steps - before.num_bitmask_steps;
  const int64_t rows = after.num_bitmask_rows - before.num_bitmask_rows;
  const double seconds = after.bitmask_seconds - before.bitmask_seconds;
  const double waited = after.bitmask_wait_seconds - before.bitmask_wait_seconds;
  const int64_t accepted = after.num_accepted_tokens - before.num_accepted_tokens;
  const double accept_s = after.accept_seconds - before.accept_seconds;
  if (rows <= 0) return nullptr;
  return {{"steps", steps},
          {"accepted_tokens", accepted},
          {"accept_seconds", accept_s},
          {"accept_ms_per_step", 1e3 * accept_s / static_cast<double>(steps)},
          {"accept_us_per_token", accepted > 0 ? 1e6 * accept_s / static_cast<double>(accepted) : 0.0},
          {"rows", rows},
          {"seconds", seconds},
          {"wait_seconds", waited},
          {"ms_per_step", 1e3 * seconds / static_cast<double>(steps)},
          {"wait_ms_per_step", 1e3 * waited / static_cast<double>(steps)},
          {"us_per_row", 1e6 * seconds / static_cast<double>(rows)},
          {"fraction_of_elapsed", elapsed_s > 0 ? seconds / elapsed_s : 0.0}};
}

std::string GrammarBitmaskSummary(const nlohmann::json& bitmask) {
  if (bitmask.is_null()) return "";
  return "grammar bitmasks: " + std::to_string(bitmask["rows"].get<int64_t>()) + " rows in " +
         std::to_string(bitmask["steps"].get<int64_t>()) + " steps, " + Fixed(bitmask["ms_per_step"], 3) +
         " ms a step (the step waited " + Fixed(bitmask["wait_ms_per_step"], 3) + " ms for them), " +
         Fixed(bitmask["us_per_row"], 1) + " us a row, " +
         Fixed(100 * bitmask["fraction_of_elapsed"].get<double>(), 1) + "% of the elapsed time; matchers advanced " +
         Fixed(bitmask["accept_ms_per_step"], 3) + " ms a step (" + Fixed(bitmask["accept_us_per_token"], 1) +
         " us a token)\n";
}

void PrintKernels(const nlohmann::json& kernels, const std::string& what) {
  std::fprintf(stderr, "kernels reached, %s:\n", what.c_str());
  for (const auto& [name, count] : kernels.items()) {
    std::fprintf(stderr, "  %10llu  %s\n", static_cast<unsigned long long>(count.get<uint64_t>()), name.c_str());
  }
}

nlohmann::json BuildJson() {
  const std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return {{"version", Version()}, {"commit", GitCommit()}, {"date", date}};
}

}  // namespace vllm::bench
