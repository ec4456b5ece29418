// mkbench: mkernel's benchmark driver. Run one process per GPU:
//   tools/mkrun -n <GPUs> build/bin/mkbench [benchmarks...]
// See --help.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <optional>
#include <set>

#include "bench/baselines/nccl_util.hpp"
#include "bench/bench.hpp"
#include "bench/gpu_clocks.hpp"

namespace {

void usage() {
  std::cout << "usage: mkbench [options] [benchmark...]\n"
               "Runs mkernel's benchmarks, one process per GPU (launch with tools/mkrun -n N or torchrun),\n"
               "prints each table and writes markdown + JSON results under MK_BENCH_OUT.\n\n"
               "options:\n"
               "  --help            this text and the knob table\n"
               "  --print-config    the knob table (environment variables) with current values\n"
               "  --list            the benchmarks\n"
               "  --out DIR         results directory (default: MK_BENCH_OUT)\n"
               "  --iters N         timed calls per measurement (default 20; median reported)\n"
               "  --warmup N        untimed calls first (default 5)\n"
               "  --lead-cycles N   a GPU spin as long as N cycles at the GPU's top clock (timed on the global\n"
               "                    timer) before each call of the interleaved tables (default 0: back to back;\n"
               "                    2000000 is the Python benches' default lead)\n"
               "  --fixed-order     the interleaved tables run their calls in one order every round (default: a\n"
               "                    balanced order per round, so every call follows every other equally often)\n"
               "  --quick           fewer shapes (smoke run)\n\n"
               "benchmarks (default: all):\n";
  for (auto& b : mkb::benches()) std::cout << "  " << b.name << "  " << b.doc << "\n";
  std::cout << "\n";
}

int positive(const char* flag, const char* v) {
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  if (!*v || *end || x < 1 || x > 100000) {
    std::cerr << "mkbench: " << flag << " needs a positive integer, got '" << v << "'\n";
    std::exit(2);
  }
  return static_cast<int>(x);
}

}  // namespace

int main(int argc, char** argv) {
  mkb::TimingOpts opts;
  std::string out;
  bool quick = false;
  std::vector<std::string> wanted;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::cerr << "mkbench: " << a << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--help" || a == "-h") {
      usage();
      std::cout << mk::print_config();
      return 0;
    } else if (a == "--print-config") {
      std::cout << mk::print_config();
      return 0;
    } else if (a == "--list") {
      for (auto& b : mkb::benches()) std::cout << b.name << "\n";
      return 0;
    } else if (a == "--out") {
      out = next();
    } else if (a == "--iters") {
      opts.iters = positive("--iters", next());
    } else if (a == "--warmup") {
      opts.warmup = positive("--warmup", next()) ;
    } else if (a == "--lead-cycles") {
      const char* v = next();
      char* end = nullptr;
      const long long x = std::strtoll(v, &end, 10);
      if (!*v || *end || x < 0 || x > 1000000000LL) {  // (1e9 cycles: ~0.5 s a call; more drifts the ranks apart)
        std::cerr << "mkbench: --lead-cycles needs an integer in [0, 1e9], got '" << v << "'\n";
        return 2;
      }
      opts.lead_cycles = x;
    } else if (a == "--fixed-order") {
      opts.rotate = false;
    } else if (a == "--quick") {
      quick = true;
    } else if (!a.empty() && a[0] == '-') {
      std::cerr << "mkbench: unknown option " << a << " (see --help)\n";
      return 2;
    } else {
      bool known = false;
      for (auto& b : mkb::benches()) known |= a == b.name;
      if (!known) {
        std::cerr << "mkbench: unknown benchmark '" << a << "' (see --list)\n";
        return 2;
      }
      wanted.push_back(a);
    }
  }

  // The results directory first: a path that cannot be written is refused before anything runs, not after the
  // run's numbers exist.
  std::vector<std::string> made_dirs;  // (removed again if no GPU is found: a run that measures nothing leaves none)
  try {
    if (out.empty()) out = mk::knob_str(mk::Knob::MK_BENCH_OUT);
    made_dirs = mkb::prepare_out_dir(out);
  } catch (const std::exception& ex) {
    std::cerr << ex.what() << "\n";
    return 2;
  }
  int ngpu = 0;
  cudaError_t e = cudaGetDeviceCount(&ngpu);
  if (e != cudaSuccess || ngpu == 0) {
    std::cerr << "mkbench: no CUDA GPU on this machine (" << (e == cudaSuccess ? "0 devices" : cudaGetErrorString(e))
              << "). mkernel's benchmarks need NVIDIA Hopper GPUs (sm_90a); nothing was measured.\n";
    mkb::unmake_out_dir(made_dirs);
    return 2;
  }
  std::unique_ptr<mk::Communicator> comm;
  std::optional<mkb::Report> report;
  try {
    comm = mk::Communicator::from_env();
    // One rank: the TP benchmarks' diagnosis tables time the fused kernels' machinery without communication
    // (unless the caller set MK_TP_SINGLE_RANK); gemm_rs's table times the plain path beside it.
    if (comm->world() == 1) setenv("MK_TP_SINGLE_RANK", "fused", 0);
    report.emplace(comm.get(), argc, argv);
    report->set_meta("timing", std::string(opts.rotate ? "call order balanced over the rounds (each call after "
                                                         "each other equally often); "
                                                       : "one call order every round (--fixed-order); ") +
                                   (opts.lead_cycles > 0
                                        ? "each interleaved call after its table's barrier and a GPU spin of " +
                                              std::to_string(opts.lead_cycles) +
                                              " cycles at the top clock, timed (--lead-cycles)"
                                        : "each interleaved call right after its table's barrier (back to back)"));
    report->set_meta("gpu_clocks", mkb::ClockSampler::instance().status());
    // A rested GPU (--lead-cycles) is another regime than back to back (bench/gpu_clocks.hpp): its own config,
    // so that tools/issue_targets.py judges it beside, not instead of, the back-to-back report.
    if (opts.lead_cycles > 0) report->set_meta("config", report->config() + " rested");
    const bool shared = mkb::ranks_share_a_gpu(*comm);  // (collective)
    if (shared) {  // a correctness run: no table of it is a measurement (tools/issue_targets.py leaves it out)
      report->set_meta("config", report->config() + " shared-GPU");
      report->set_meta("shared_gpus", "yes: ranks time-slice one GPU (MK_SHARE_GPUS), a correctness run; the "
                                      "times are not measurements, and the TP baselines use mkernel's collectives");
    }
    cudaStream_t stream;
    MK_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    mkb::BenchContext bc{comm.get(), &*report, opts, stream, quick, shared};
    for (auto& b : mkb::benches()) {
      if (!wanted.empty() && std::find(wanted.begin(), wanted.end(), b.name) == wanted.end()) continue;
      b.run(bc);
      comm->barrier();
    }
    std::string path = report->write(out);
    if (comm->rank() == 0) std::cout << "\nresults written to " << path << " (and .json)\n";
    cudaStreamDestroy(stream);
    return 0;
  } catch (const std::exception& ex) {
    std::cerr << ex.what() << "\n";
    // A kernel that gave up on a wait left a record of who waited for what.
    if (comm && !comm->device_failure().empty()) std::cerr << "device: " << comm->device_failure() << "\n";
    // The tables finished before the failure are kept (rank 0 writes, no collective): a scarce device call's
    // numbers are not lost with the table that failed; the report says the run failed, and why.
    if (report) {
      try {
        report->set_meta("failed", ex.what());
        const std::string path = report->write(out);
        if (!path.empty()) std::cerr << "partial results (the run failed) written to " << path << " (and .json)\n";
      } catch (const std::exception& w) {
        std::cerr << "mkbench: the partial report could not be written: " << w.what() << "\n";
      }
    }
    return 1;
  }
}
