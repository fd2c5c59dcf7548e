// seqmix bench: times an op (fused and naive), a mixer, or the language model of a text config, forward and
// forward+backward. Each case runs in a
// child process (this binary re-executed with --child-case) so that its peak resident memory is its own.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <thread>

#include "commands.h"
#include "seqmix/dist/communicator.h"
#include "seqmix/dist/launcher.h"
#include "seqmix/io/atomic_file.h"
#include "seqmix/io/child_process.h"
#include "seqmix/io/error.h"
#include "seqmix/ops/impl.h"
#include "seqmix/io/runtime.h"
#include "seqmix/io/spec.h"
#include "seqmix/models/registry.h"
#include "seqmix/train/benchmark.h"
#include "seqmix/train/device.h"

namespace seqmix::cli {
namespace {

struct BenchArgs {
  std::string op, model, shape, impl;
  std::string dtype = "fp32";  // bf16: each case in fp32 and in bf16, side by side
  std::vector<std::string> configs;
  int repeats = 5, warmup = 2, threads = 0;
  bool backward = false, json = false, child_case = false;
  std::string nproc;         // --nproc 1,2: data-parallel training of the --model mixer at each world size
  bool child_dist = false;   // a worker of one of those jobs (started by bench itself)
  std::string child_result;  // where rank 0 of that job writes its timings (JSON)
  std::string device = "cpu";  // cuda: the GPU table of bench/gpu_bench.py
};

// One (op or mixer, impl, dtype) to time: impl is "fused", "naive", "torch" or "" (a mixer without the option, a
// config); spec is the mixer's spec with its impl (--model only), op the op's name (--op only; --op may list
// several), config the run config's path (--config only, possibly several); dtype fp32 or bf16.
struct PlannedCase {
  std::string impl, spec, op, config;
  Precision dtype = Precision::fp32;
};

// What the first case is compared with: the same op or config (the mixer cases share the empty key).
std::string compared_key(const PlannedCase& c) { return c.op.empty() ? c.config : c.op; }

struct BenchPlan {
  std::vector<int64_t> shape;  // B,T,H,dk,dv (--op), B,T,D (--model) or B,T (--config)
  std::vector<PlannedCase> cases;
};

struct CaseResult {
  BenchTimes times;
  double peak_mb = 0;
};

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> items;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, sep)) items.push_back(item);
  return items;
}


std::vector<int64_t> parse_shape(const std::string& text, const BenchArgs& a) {
  const size_t rank = !a.op.empty() ? 5 : !a.model.empty() ? 3 : 2;
  const std::string expected = std::string("--shape expects ") +
                               (rank == 5   ? "5 positive integers B,T,H,dk,dv for --op"
                                : rank == 3 ? "3 positive integers B,T,D for --model"
                                            : "2 positive integers B,T for --config");
  std::vector<int64_t> shape;
  try {
    shape = parse_integer_list(text, "--shape");
  } catch (const Error&) {
    throw Error(expected + ", got '" + text + "'");
  }
  if (shape.size() != rank || std::any_of(shape.begin(), shape.end(), [](int64_t d) { return d < 1; }))
    throw Error(expected + ", got '" + text + "'");
  return shape;
}

std::vector<std::string> parse_impls(const std::string& text) {
  std::vector<std::string> impls;
  for (const auto& i : split(text, ',')) {
    ops::parse_impl(i);  // throws on an unknown name, listing the valid ones
    if (std::find(impls.begin(), impls.end(), i) != impls.end()) throw Error("--impl lists '" + i + "' twice");
    impls.push_back(i);
  }
  if (impls.empty()) throw Error("--impl expects a comma-separated list of fused, naive, torch");
  return impls;
}

// --model: the spec's own impl= wins (a different --impl is an error); otherwise one case per --impl, by
// default those of fused and naive the mixer's impl option offers (the delta rule: naive only), else the spec as
// it is.
std::vector<PlannedCase> model_cases(const std::string& spec_text, const std::string& impl_flag) {
  Spec spec = Spec::parse(spec_text);
  for (const auto& [key, value] : spec.options) {
    if (key != "impl") continue;
    if (!impl_flag.empty() && impl_flag != value)
      throw Error("--impl " + impl_flag + " conflicts with impl=" + value + " in the spec '" + spec_text +
                  "'; give one of them");
    component_options(mixer_infos(), "mixer", spec_text);
    return {{value, spec_text}};
  }
  const ComponentInfo& info = find_component(mixer_infos(), "mixer", spec.name);
  const auto impl_option =
      std::find_if(info.options.begin(), info.options.end(), [](const OptionInfo& o) { return o.key == "impl"; });
  const bool has_impl = impl_option != info.options.end();
  if (!has_impl && !impl_flag.empty())
    throw Error("mixer " + spec.name + " has no fused and naive implementations (no 'impl' option); drop --impl");
  component_options(mixer_infos(), "mixer", spec_text);
  if (!has_impl) return {{"", spec_text}};
  std::vector<std::string> offered;
  for (const std::string impl : {"fused", "naive"})
    if (std::find(impl_option->choices.begin(), impl_option->choices.end(), impl) != impl_option->choices.end())
      offered.push_back(impl);
  std::vector<PlannedCase> cases;
  for (const auto& impl : parse_impls(impl_flag.empty() ? join(offered, ",") : impl_flag)) {
    Spec with_impl = spec;
    with_impl.options.emplace_back("impl", impl);
    cases.push_back({impl, with_impl.str()});
  }
  return cases;
}

BenchPlan make_plan(const BenchArgs& a) {
  if (!a.op.empty() + !a.model.empty() + !a.configs.empty() != 1)
    throw Error("bench needs exactly one of --op NAME, --model SPEC and --config FILE");
  if (!a.configs.empty() && !a.impl.empty())
    throw Error("--impl does not apply to --config; a config's mixer specs choose their impl");
  std::vector<std::string> op_names;
  for (const auto& name : a.op.empty() ? std::vector<std::string>{} : split(a.op, ',')) {
    const auto& ops = bench_op_names();
    if (std::find(ops.begin(), ops.end(), name) == ops.end())
      throw Error("unknown op '" + name + "'; valid ops: " + join(ops));
    if (std::find(op_names.begin(), op_names.end(), name) != op_names.end())
      throw Error("--op lists '" + name + "' twice");
    op_names.push_back(name);
  }
  if (a.shape.empty()) throw Error("bench needs --shape");
  if (a.repeats < 1) throw Error("--repeats must be at least 1");
  if (a.warmup < 0) throw Error("--warmup must not be negative");
  if (a.threads < 0) throw Error("--threads must not be negative");
  BenchPlan plan;
  plan.shape = parse_shape(a.shape, a);
  if (!a.op.empty()) {
    for (const auto& name : op_names)
      for (const auto& impl : parse_impls(a.impl.empty() ? "fused,naive" : a.impl)) plan.cases.push_back({impl, "", name, ""});
  } else if (!a.configs.empty()) {
    for (const auto& path : a.configs) {
      for (const auto& c : plan.cases)
        if (c.config == path) throw Error("--config lists '" + path + "' twice");
      language_model_setup(path);  // a config that is not a text LM fails here, before any case runs
      plan.cases.push_back({"", "", "", path});
    }
  } else {
    plan.cases = model_cases(a.model, a.impl);
  }
  // --dtype bf16: each case in bf16 right after its fp32 twin, the baseline it is compared with (a child process
  // times the one dtype it is given).
  if (parse_precision(a.dtype, "--dtype") == Precision::bf16) {
    if (!a.nproc.empty()) throw Error("--nproc times float32 training; drop --dtype bf16");
    std::vector<PlannedCase> both;
    for (const auto& c : plan.cases) {
      if (!a.child_case) both.push_back(c);
      both.push_back(c);
      both.back().dtype = Precision::bf16;
    }
    plan.cases = both;
  }
  return plan;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::vector<std::string> dims;
  for (int64_t d : shape) dims.push_back(std::to_string(d));
  return join(dims, ",");
}

OpShape op_shape(const std::vector<int64_t>& s) { return {s[0], s[1], s[2], s[3], s[4]}; }

std::string case_name(const BenchArgs& a, const BenchPlan& plan, const PlannedCase& c) {
  const std::string what = !c.op.empty()     ? "op " + c.op + " (" + c.impl + ")"
                           : !c.config.empty() ? "config " + c.config
                                               : "mixer " + c.spec;
  return what + " at shape " + shape_text(plan.shape) + (c.dtype == Precision::bf16 ? " in bf16" : "");
}

// The child's side: time the one case and print its timings and peak resident memory as one JSON line.
int run_child_case(const BenchArgs& a, const BenchPlan& plan) {
  if (plan.cases.size() != 1) throw Error("--child-case runs exactly one case");
  const PlannedCase& c = plan.cases.front();
  const auto& s = plan.shape;
  BenchCase bench_case = !c.op.empty() ? make_op_case(c.op, c.impl, op_shape(s), c.dtype)
                         : !c.config.empty()
                             ? make_language_model_case(language_model_setup(c.config), s[0], s[1], c.dtype)
                             : make_mixer_case(c.spec, s[0], s[1], s[2], c.dtype);
  const BenchTimes times = time_case(bench_case, {a.warmup, a.repeats, a.backward}, case_name(a, plan, c));
  nlohmann::json j = {{"fwd_ms", times.fwd_ms}, {"peak_mb", peak_resident_mib()}};
  if (times.fwdbwd_ms) j["fwdbwd_ms"] = *times.fwdbwd_ms;
  std::printf("%s\n", j.dump().c_str());
  return 0;
}

CaseResult run_case_in_child(const BenchArgs& a, const BenchPlan& plan, const PlannedCase& c) {
  std::vector<std::string> args = {"seqmix", "bench", "--child-case", "--shape", shape_text(plan.shape)};
  args.insert(args.end(), {"--repeats", std::to_string(a.repeats), "--warmup", std::to_string(a.warmup)});
  args.insert(args.end(), {"--threads", std::to_string(a.threads), "--dtype", precision_name(c.dtype)});
  if (!c.op.empty()) {
    args.insert(args.end(), {"--op", c.op, "--impl", c.impl});
  } else if (!c.config.empty()) {
    args.insert(args.end(), {"--config", c.config});
  } else {
    args.insert(args.end(), {"--model", c.spec});
  }
  if (a.backward) args.push_back("--backward");
  const ChildResult child = run_child("/proc/self/exe", args, {.capture_output = true});
  const std::string what = case_name(a, plan, c);
  if (WIFSIGNALED(child.status)) throw Error(what + " " + child.how_it_ended());
  const auto err_lines = split(child.err, '\n');
  if (!child.succeeded()) {
    const std::string prefix = "seqmix: error: ";
    for (auto line = err_lines.rbegin(); line != err_lines.rend(); ++line)
      if (line->rfind(prefix, 0) == 0) {
        const std::string message = line->substr(prefix.size());
        throw Error(message.rfind(what, 0) == 0 ? message : what + ": " + message);
      }
    throw Error(what + " failed" + (err_lines.empty() ? "" : ": " + err_lines.front()));
  }
  for (const auto& line : err_lines)
    if (!line.empty()) std::fprintf(stderr, "%s\n", line.c_str());  // the child's warnings
  const auto out_lines = split(child.out, '\n');
  const auto j = nlohmann::json::parse(out_lines.empty() ? "" : out_lines.back(), nullptr, false);
  if (!j.is_object() || !j.contains("fwd_ms") || !j.contains("peak_mb"))
    throw Error(what + ": the benchmark process printed no timings");
  CaseResult r;
  r.times.fwd_ms = j["fwd_ms"].get<double>();
  if (j.contains("fwdbwd_ms")) r.times.fwdbwd_ms = j["fwdbwd_ms"].get<double>();
  r.peak_mb = j["peak_mb"].get<double>();
  return r;
}

// x rounded to `decimals` decimal places (printed by JSON without binary noise).
double rounded(double x, int decimals) {
  const double scale = std::pow(10.0, decimals);
  return std::round(x * scale) / scale;
}

// GFLOP/s of factor x the op's forward flops in ms; nullopt for mixers and ops without a flop count.
std::optional<double> gflops(const BenchPlan& plan, const PlannedCase& c, double factor, double ms) {
  if (c.op.empty()) return std::nullopt;
  const std::optional<double> flops = op_forward_flops(c.op, op_shape(plan.shape));
  if (!flops) return std::nullopt;
  return factor * *flops / (ms / 1e3) / 1e9;
}

nlohmann::ordered_json json_or_null(const std::optional<double>& x, int decimals) {
  return x ? nlohmann::ordered_json(rounded(*x, decimals)) : nlohmann::ordered_json();
}

std::string fixed(double x, int decimals) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", decimals, x);
  return text;
}

void print_json(const BenchArgs& a, const BenchPlan& plan, const std::vector<CaseResult>& results, double ref_gflops) {
  const double tokens = static_cast<double>(plan.shape[0] * plan.shape[1]);
  for (size_t i = 0; i < results.size(); ++i) {
    const auto& c = plan.cases[i];
    const auto& t = results[i].times;
    nlohmann::ordered_json j;
    if (!c.op.empty()) {
      j["op"] = c.op;
    } else if (!c.config.empty()) {
      j["config"] = c.config;
    } else {
      j["model"] = c.spec;
    }
    j["impl"] = c.impl.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(c.impl);
    j["dtype"] = precision_name(c.dtype);
    j["shape"] = plan.shape;
    j["fwd_ms"] = rounded(t.fwd_ms, 4);
    if (t.fwdbwd_ms) j["fwdbwd_ms"] = rounded(*t.fwdbwd_ms, 4);
    j["tokens_per_s"] = std::llround(tokens / (t.fwd_ms / 1e3));
    if (t.fwdbwd_ms) j["fwdbwd_tokens_per_s"] = std::llround(tokens / (*t.fwdbwd_ms / 1e3));
    j["peak_mb"] = rounded(results[i].peak_mb, 1);
    j["ref_gflops"] = rounded(ref_gflops, 2);
    j["gflops"] = json_or_null(gflops(plan, c, 1, t.fwd_ms), 2);
    if (t.fwdbwd_ms) j["fwdbwd_gflops"] = json_or_null(gflops(plan, c, kForwardBackwardFlopFactor, *t.fwdbwd_ms), 2);
    std::printf("%s\n", j.dump().c_str());
  }
}

// "X is 3.1x faster than Y (fwd)".
void print_speedup(const std::string& x, double x_ms, const std::string& y, double y_ms, const char* pass) {
  const double ratio = y_ms / x_ms;
  if (ratio >= 1)
    std::printf("%s is %.1fx faster than %s (%s)\n", x.c_str(), ratio, y.c_str(), pass);
  else
    std::printf("%s is %.1fx slower than %s (%s)\n", x.c_str(), 1 / ratio, y.c_str(), pass);
}

// Ratios measured in this run: fused against each other impl (naive, torch) of the same op or mixer, with several
// ops or configs the first against each later one with the same impl ("ela (fused) is 6.1x faster than
// attention (fused)"), each in the same dtype; and with --dtype bf16 each case in bf16 against itself in fp32.
void print_ratios(const BenchPlan& plan, const std::vector<CaseResult>& results, bool backward) {
  auto compare = [&](size_t i, size_t j, const std::string& x, const std::string& y) {
    print_speedup(x, results[i].times.fwd_ms, y, results[j].times.fwd_ms, "fwd");
    if (backward) print_speedup(x, *results[i].times.fwdbwd_ms, y, *results[j].times.fwdbwd_ms, "fwd+bwd");
  };
  const auto& cases = plan.cases;
  const bool several_ops = !cases.empty() && compared_key(cases.back()) != compared_key(cases.front());
  const bool several_dtypes = !cases.empty() && cases.back().dtype != cases.front().dtype;
  const auto in_dtype = [&](const PlannedCase& c, const std::string& label) {
    return several_dtypes ? label + " " + precision_name(c.dtype) : label;
  };
  for (size_t i = 0; i < cases.size(); ++i)
    for (size_t j = 0; j < cases.size(); ++j) {
      if (cases[i].op != cases[j].op || cases[i].dtype != cases[j].dtype || cases[i].impl != "fused" ||
          cases[j].impl.empty() || cases[j].impl == "fused")
        continue;
      compare(i, j, in_dtype(cases[i], several_ops ? cases[i].op + " fused" : "fused"),
              in_dtype(cases[j], several_ops ? cases[j].op + " " + cases[j].impl : cases[j].impl));
    }
  auto label = [](const PlannedCase& c) { return c.impl.empty() ? compared_key(c) : c.op + " (" + c.impl + ")"; };
  if (several_ops)
    for (size_t j = 0; j < cases.size(); ++j)
      for (size_t i = 0; i < cases.size(); ++i) {
        const std::string first = compared_key(cases.front());
        if (compared_key(cases[i]) != first || compared_key(cases[j]) == first || cases[i].impl != cases[j].impl ||
            cases[i].dtype != cases[j].dtype)
          continue;
        compare(i, j, in_dtype(cases[i], label(cases[i])), in_dtype(cases[j], label(cases[j])));
      }
  // make_plan puts each bf16 case right after its fp32 twin.
  for (size_t i = 1; i < cases.size(); ++i)
    if (cases[i].dtype == Precision::bf16 && cases[i - 1].dtype == Precision::fp32) {
      const std::string what = cases[i].spec.empty() ? label(cases[i]) : cases[i].spec;
      compare(i, i - 1, what + " bf16", "fp32");
    }
}

void print_table(const BenchArgs& a, const BenchPlan& plan, const std::vector<CaseResult>& results, double ref_gflops) {
  const double tokens = static_cast<double>(plan.shape[0] * plan.shape[1]);
  std::vector<std::vector<std::string>> rows;
  rows.push_back({!a.op.empty() ? "op" : !a.configs.empty() ? "config" : "mixer", "impl", "dtype", "shape", "fwd ms",
                  "tokens/s", "GFLOP/s"});
  if (a.backward) rows.back().insert(rows.back().end(), {"fwd+bwd ms", "tokens/s", "GFLOP/s"});
  rows.back().push_back("peak MiB");
  for (size_t i = 0; i < results.size(); ++i) {
    const auto& t = results[i].times;
    auto gflops_text = [&](double factor, double ms) {
      const std::optional<double> g = gflops(plan, plan.cases[i], factor, ms);
      return g ? fixed(*g, 1) : "-";
    };
    const auto& c = plan.cases[i];
    std::vector<std::string> row = {!c.op.empty() ? c.op : !c.config.empty() ? c.config : c.spec,
                                    plan.cases[i].impl.empty() ? "-" : plan.cases[i].impl,
                                    precision_name(c.dtype),
                                    shape_text(plan.shape),
                                    fixed(t.fwd_ms, 3),
                                    fixed(tokens / (t.fwd_ms / 1e3), 0),
                                    gflops_text(1, t.fwd_ms)};
    if (t.fwdbwd_ms)
      row.insert(row.end(), {fixed(*t.fwdbwd_ms, 3), fixed(tokens / (*t.fwdbwd_ms / 1e3), 0),
                             gflops_text(kForwardBackwardFlopFactor, *t.fwdbwd_ms)});
    row.push_back(fixed(results[i].peak_mb, 1));
    rows.push_back(row);
  }
  std::vector<size_t> width(rows.front().size(), 0);
  for (const auto& row : rows)
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      const size_t pad = width[c] - row[c].size();
      line += c < 4 ? row[c] + std::string(pad, ' ') : std::string(pad, ' ') + row[c];  // text left, numbers right
      if (c + 1 < row.size()) line += "  ";
    }
    std::printf("%s\n", line.c_str());
  }
  print_ratios(plan, results, a.backward);
  std::printf("reference matmul: %.1f GFLOP/s (1024x1024 fp32, median of 7)\n", ref_gflops);
}

// --nproc: the one mixer case to time, fused when the mixer has both implementations and --impl names none.
const PlannedCase& data_parallel_case(const BenchArgs& a, const BenchPlan& plan) {
  if (a.model.empty()) throw Error("--nproc times data-parallel training of a mixer; give --model SPEC (not --op or --config)");
  if (plan.cases.size() > 1 && !a.impl.empty()) throw Error("--nproc times one implementation; give --impl fused or --impl naive");
  return plan.cases.front();
}

// A worker of a data-parallel bench job: joins it (the launcher's environment), times the step, and rank 0
// writes the timings to --child-result.
int run_data_parallel_worker(const BenchArgs& a, const BenchPlan& plan) {
  const PlannedCase& c = data_parallel_case(a, plan);
  const auto communicator = dist::Communicator::join(dist::InitOptions{});
  int threads = a.threads;
  if (threads == 0) {
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    threads = std::max(1, cores / communicator->local_world_size());
  }
  set_threads(threads);
  const auto& s = plan.shape;
  const DataParallelStepTimes times =
      time_data_parallel_step(c.spec, s[0], s[1], s[2], *communicator, {a.warmup, a.repeats, true});
  if (communicator->rank() == 0) {
    const nlohmann::json j = {{"step_ms", times.step_ms}, {"all_reduce_ms", times.all_reduce_ms},
                              {"parameters", times.parameters}, {"threads", threads}};
    write_file_atomically(a.child_result, j.dump() + "\n");
  }
  return 0;
}

struct DataParallelResult {
  int64_t processes = 0, threads = 0, parameters = 0;
  double step_ms = 0, all_reduce_ms = 0;
};

// --nproc N,M,...: one job of N local workers per count, then the table and each count's throughput
// against the first count's, all measured in this run.
int run_data_parallel_bench(const BenchArgs& a, const BenchPlan& plan) {
  const PlannedCase& c = data_parallel_case(a, plan);
  std::vector<int64_t> counts;
  try {
    counts = parse_integer_list(a.nproc, "--nproc");
  } catch (const Error&) {
    throw Error("--nproc expects process counts separated by commas, e.g. 1,2; got '" + a.nproc + "'");
  }
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] < 1 || counts[i] > 256) throw Error("--nproc " + std::to_string(counts[i]) + " must be in 1..256");
    if (std::find(counts.begin(), counts.begin() + static_cast<long>(i), counts[i]) != counts.begin() + static_cast<long>(i))
      throw Error("--nproc lists " + std::to_string(counts[i]) + " twice");
  }
  char path_template[] = "/tmp/seqmix-bench-XXXXXX";
  const int fd = mkstemp(path_template);
  if (fd < 0) throw Error(std::string("bench: cannot create a temporary file: ") + std::strerror(errno));
  close(fd);
  const std::string result_path = path_template;
  std::vector<DataParallelResult> results;
  for (int64_t n : counts) {
    std::vector<std::string> args = {"bench", "--child-dist", "--child-result", result_path, "--model", c.spec,
                                     "--shape", shape_text(plan.shape), "--repeats", std::to_string(a.repeats),
                                     "--warmup", std::to_string(a.warmup), "--threads", std::to_string(a.threads)};
    std::remove(result_path.c_str());
    const int code = dist::run_local_workers("bench", args, static_cast<int>(n));
    const auto j = nlohmann::json::parse(code == 0 ? read_file(result_path) : "", nullptr, false);
    std::remove(result_path.c_str());
    if (code != 0 || !j.is_object())
      throw Error("bench: the data-parallel job of " + std::to_string(n) + " processes failed (its message is above)");
    results.push_back({n, j["threads"].get<int64_t>(), j["parameters"].get<int64_t>(), j["step_ms"].get<double>(),
                       j["all_reduce_ms"].get<double>()});
  }
  const double per_process_tokens = static_cast<double>(plan.shape[0] * plan.shape[1]);
  auto tokens_per_s = [&](const DataParallelResult& r) { return per_process_tokens * r.processes / (r.step_ms / 1e3); };
  if (a.json) {
    for (const auto& r : results) {
      nlohmann::ordered_json j;
      j["model"] = c.spec;
      j["impl"] = c.impl.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(c.impl);
      j["shape"] = plan.shape;
      j["processes"] = r.processes;
      j["threads_per_process"] = r.threads;
      j["parameters"] = r.parameters;
      j["step_ms"] = rounded(r.step_ms, 4);
      j["all_reduce_ms"] = rounded(r.all_reduce_ms, 4);
      j["tokens_per_s"] = std::llround(tokens_per_s(r));
      std::printf("%s\n", j.dump().c_str());
    }
    return 0;
  }
  std::printf("mixer %s: data-parallel training step on [%s] per process (forward, backward, averaging of %lld "
              "parameter gradients)\n",
              c.spec.c_str(), shape_text(plan.shape).c_str(), static_cast<long long>(results.front().parameters));
  std::printf("processes  threads each   step ms  all-reduce ms  tokens/s (all processes)\n");
  for (const auto& r : results)
    std::printf("%9lld  %12lld  %8.3f  %13.3f  %24.0f\n", static_cast<long long>(r.processes),
                static_cast<long long>(r.threads), r.step_ms, r.all_reduce_ms, tokens_per_s(r));
  for (size_t i = 1; i < results.size(); ++i)
    std::printf("%lld processes: %.2fx the tokens/s of %lld\n", static_cast<long long>(results[i].processes),
                tokens_per_s(results[i]) / tokens_per_s(results.front()), static_cast<long long>(results.front().processes));
  return 0;
}

// --device cuda: the GPU benchmark table (bench/gpu_bench.py: seqmix's ops against PyTorch's SDPA and the naive
// twins, timed with CUDA events), which has its own fixed cases; an option that would choose other cases is refused
// rather than ignored.
[[noreturn]] void run_gpu_bench(const BenchArgs& a) {
  parse_device(a.device, "--device");  // a GPU this build or machine lacks is one line here
  const BenchArgs plain;
  if (!a.op.empty() || !a.model.empty() || !a.configs.empty() || !a.shape.empty() || !a.impl.empty() ||
      !a.nproc.empty() || a.dtype != plain.dtype || a.repeats != plain.repeats || a.warmup != plain.warmup)
    throw Error("--device " + a.device + " prints the GPU table of bench/gpu_bench.py (its ops, shapes and bf16 are "
                "fixed); drop --op, --model, --config, --shape, --impl, --dtype, --repeats, --warmup and --nproc");
  std::vector<std::string> arguments = {SEQMIX_GPU_BENCH};
  if (a.json) arguments.insert(arguments.end(), {"--json", "-"});
  exec_project_python("seqmix bench --device " + a.device, arguments);
}

int run_bench(const BenchArgs& a) {
  if (a.device != "cpu") run_gpu_bench(a);
  const BenchPlan plan = make_plan(a);
  set_threads(a.threads);
  if (a.child_case) return run_child_case(a, plan);
  if (a.child_dist) return run_data_parallel_worker(a, plan);
  if (!a.nproc.empty()) return run_data_parallel_bench(a, plan);
  const double ref_gflops = matmul_gflops(1024);
  std::vector<CaseResult> results;
  for (const auto& c : plan.cases) results.push_back(run_case_in_child(a, plan, c));
  if (a.json)
    print_json(a, plan, results, ref_gflops);
  else
    print_table(a, plan, results, ref_gflops);
  return 0;
}

}  // namespace

void add_bench_command(CLI::App& app, Action& action) {
  auto a = std::make_shared<BenchArgs>();
  auto* sub = app.add_subcommand(
      "bench", "time an op (fused vs naive), a mixer or a text config's language model: forward, forward+backward, memory");
  sub->add_option("--op", a->op, "op, or several separated by commas (the first is compared with the others): " +
                                     join(bench_op_names()));
  sub->add_option("--model", a->model, "mixer spec, e.g. gla:heads=4 (times the mixer on randn [B,T,D])");
  sub->add_option("--config", a->configs,
                  "run config of the text task, or several separated by commas (the first is compared with the "
                  "others): times its language model on random token ids [B,T]")
      ->delimiter(',');
  sub->add_option("--shape", a->shape,
                  "B,T,H,dk,dv for --op (aft and ssm use C = H*dv channels, ssm N = dk states; aft and lrnn_decay "
                  "ignore dk), B,T,D for --model, B,T for --config");
  sub->add_option("--impl", a->impl,
                  "comma-separated impls: fused, naive, torch (PyTorch's own kernel: attention and softmax only); "
                  "default fused,naive (for --model, when the mixer has an impl option)");
  sub->add_flag("--backward", a->backward, "also time forward+backward");
  sub->add_option("--dtype", a->dtype,
                  "fp32 (default), or bf16: each case also in bfloat16 next to its fp32 row (ops: bf16 inputs; "
                  "--model and --config: bfloat16 autocast over fp32 weights, as train --dtype bf16)");
  sub->add_flag("--json", a->json, "one JSON object per line");
  sub->add_option("--repeats", a->repeats, "timed runs (the median is reported)")->capture_default_str();
  sub->add_option("--warmup", a->warmup, "untimed runs first")->capture_default_str();
  sub->add_option("--threads", a->threads, "intra-op threads (0 = all hardware threads)");
  sub->add_option("--device", a->device,
                  "cpu (default), or cuda / cuda:N: the GPU table (bench/gpu_bench.py: seqmix's ops against "
                  "PyTorch's SDPA and the naive twins, bf16, CUDA events; docs/gpu.md)");
  sub->add_option("--nproc", a->nproc,
                  "with --model: time data-parallel training steps with each of these process counts, e.g. 1,2 "
                  "(docs/distributed.md)");
  sub->add_flag("--child-case", a->child_case, "run one case in this process (used by bench itself)")->group("");
  sub->add_flag("--child-dist", a->child_dist, "be a worker of a --nproc job (used by bench itself)")->group("");
  sub->add_option("--child-result", a->child_result, "where a --nproc job's rank 0 writes its timings")->group("");
  sub->callback([&action, a] { action = [a] { return run_bench(*a); }; });
}

}  // namespace seqmix::cli
