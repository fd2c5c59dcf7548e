// The C++ half of tests/ops/triton_aot_check.sh, linked with a generated table (scripts/triton_aot.py) and
// src/ops/common/triton_launch.cpp; no GPU or driver needed.
//   triton_aot_check table DIR   prints the table as JSON lines and writes each cubin to DIR/<index>.cubin (the
//                                script compares both with the tool's manifest)
//   triton_aot_check args        checks that arguments which differ from a kernel's signature are one-line errors
//   triton_aot_check driver      prints the architecture device 0 runs, or the launcher's error (without a driver:
//                                the one line that says so)
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "seqmix/io/error.h"
#include "triton_kernels.h"
#include "triton_launch.h"

namespace triton = seqmix::triton;

namespace {

const char* ctype_name(triton::CType ctype) {
  switch (ctype) {
    case triton::CType::kPointer: return "kPointer";
    case triton::CType::kInt32: return "kInt32";
    case triton::CType::kInt64: return "kInt64";
    case triton::CType::kFloat: return "kFloat";
    case triton::CType::kDouble: return "kDouble";
  }
  return "?";
}

int dump_table(const std::string& dir) {
  const triton::KernelTable& table = triton::kTritonKernels;
  for (std::size_t i = 0; i < table.size; ++i) {
    const triton::KernelEntry& e = table.entries[i];
    std::cout << "{\"kernel\": \"" << e.kernel << "\", \"function\": \"" << e.function << "\", \"module\": \""
              << e.module << "\", \"dtype\": \"" << e.dtype << "\", \"arch\": " << e.arch
              << ", \"arch_specific\": " << (e.arch_specific ? "true" : "false") << ", \"num_warps\": " << e.num_warps
              << ", \"num_stages\": " << e.num_stages << ", \"num_ctas\": " << e.num_ctas << ", \"shared\": "
              << e.shared << ", \"cubin_bytes\": " << e.cubin_size << ", \"constexprs\": {";
    for (int j = 0; j < e.num_constexprs; ++j) {
      std::cout << (j ? ", " : "") << "\"" << e.constexprs[j].name << "\": " << e.constexprs[j].value;
    }
    std::cout << "}, \"args\": [";
    for (int j = 0; j < e.num_args; ++j) {
      const triton::ArgSpec& a = e.args[j];
      std::cout << (j ? ", " : "") << "{\"name\": \"" << a.name << "\", \"type\": \"" << a.type << "\", \"ctype\": \""
                << ctype_name(a.ctype) << "\", \"scratch\": " << (a.scratch ? "true" : "false") << "}";
    }
    std::cout << "]}\n";
    std::ofstream(dir + "/" + std::to_string(i) + ".cubin", std::ios::binary)
        .write(reinterpret_cast<const char*>(e.cubin), static_cast<std::streamsize>(e.cubin_size));
  }
  return 0;
}

// Runs f, which must throw seqmix::Error with one line containing `expected`.
template <typename F>
bool expect_error(const char* what, F f, const std::string& expected) {
  try {
    f();
  } catch (const seqmix::Error& error) {
    std::string message = error.what();
    bool ok = message.find('\n') == std::string::npos && message.find(expected) != std::string::npos;
    std::cout << (ok ? "ok   " : "FAIL ") << what << ": " << message << "\n";
    return ok;
  }
  std::cout << "FAIL " << what << ": no error\n";
  return false;
}

// chunk_gla_bwd_decay_kernel's arguments on float16 inputs (q, k, dq, dk, dg_final, dg, cu, H, DK): the shortest
// list; host addresses stand in for device pointers (nothing is launched).
int host_word = 0;

std::vector<triton::Arg> decay_args() {
  using triton::Arg;
  const int* x = &host_word;
  return {Arg::pointer(x, "fp16"), Arg::pointer(x, "fp16"), Arg::pointer(x, "fp32"), Arg::pointer(x, "fp32"),
          Arg::pointer(x, "fp32"), Arg::pointer(x, "fp32"), Arg::pointer(x, "i64"),  Arg::i32(4),
          Arg::i32(64)};
}

int check_args() {
  using triton::Arg;
  const triton::KernelTable& table = triton::kTritonKernels;
  const triton::KernelEntry& entry = triton::find_kernel(table, triton::kChunkGlaBwdDecayKernel, "float16", 90,
                                                         {{"PER_KEY", 0}, {"BT", 64}, {"BK", 64}});
  bool ok = true;
  try {
    auto args = decay_args();
    triton::check_args(entry, args.data(), args.size());
    std::cout << "ok   the kernel's own argument list passes\n";
  } catch (const seqmix::Error& error) {
    std::cout << "FAIL the kernel's own argument list: " << error.what() << "\n";
    ok = false;
  }
  ok &= expect_error("one argument short", [&] {
    auto args = decay_args();
    args.pop_back();
    triton::check_args(entry, args.data(), args.size());
  }, "takes 9 arguments (q, k, dq, dk, dg_final, dg, cu, H, DK), got 8");
  ok &= expect_error("a pointer of another dtype", [&] {
    auto args = decay_args();
    args[0] = Arg::pointer(&host_word, "bf16");
    triton::check_args(entry, args.data(), args.size());
  }, "argument 1 (q) of chunk_gla_bwd_decay_kernel float16 sm_90a BK=64 BT=64 PER_KEY=0 is *fp16 in the compiled "
     "kernel, got *bf16");
  ok &= expect_error("a 64-bit integer for an i32", [&] {
    auto args = decay_args();
    args[7] = Arg::i64(4);
    triton::check_args(entry, args.data(), args.size());
  }, "argument 8 (H) of chunk_gla_bwd_decay_kernel float16 sm_90a BK=64 BT=64 PER_KEY=0 is i32 in the compiled "
     "kernel, got i64");
  ok &= expect_error("a float for an i32", [&] {
    auto args = decay_args();
    args[8] = Arg::f32(64.0f);
    triton::check_args(entry, args.data(), args.size());
  }, "argument 9 (DK) of chunk_gla_bwd_decay_kernel float16 sm_90a BK=64 BT=64 PER_KEY=0 is i32 in the compiled "
     "kernel, got fp32");
  ok &= expect_error("a launch with the wrong arguments, before any driver call", [&] {
    auto args = decay_args();
    args.pop_back();
    triton::launch(entry, 0, {1, 1, 1}, nullptr, args.data(), args.size());
  }, "takes 9 arguments");
  ok &= expect_error("a configuration the build did not compile", [&] {
    triton::find_kernel(table, triton::kChunkGlaFwdKernel, "float16", 90,
                        {{"BT", 16}, {"BK", 64}, {"BV", 48}, {"PER_KEY", 0}, {"EXACT", 0}});
  }, "the build compiled no Triton kernel chunk_gla_fwd_kernel for float16 on sm_90 with BT=16 BK=64 BV=48 "
     "PER_KEY=0 EXACT=0");
  ok &= expect_error("a configuration named too loosely to be one", [&] {
    triton::find_kernel(table, triton::kChunkGlaFwdKernel, "float16", 90, {{"BK", 64}});
  }, "the build compiled 2 Triton kernels chunk_gla_fwd_kernel for float16 on sm_90 with BK=64; name more "
     "constexprs");
  ok &= expect_error("a constexpr the entry does not have", [&] { triton::constexpr_of(entry, "BLOCK_M"); },
                     "has no constexpr BLOCK_M");
  return ok ? 0 : 1;
}

int check_driver() {
  try {
    int arch = triton::arch_for_device(triton::kTritonKernels, 0);
    std::cout << "arch " << arch << "\n";
  } catch (const seqmix::Error& error) {
    std::cout << "error: " << error.what() << "\n";
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "table" && argc == 3) return dump_table(argv[2]);
  if (mode == "args") return check_args();
  if (mode == "driver") return check_driver();
  std::fprintf(stderr, "usage: triton_aot_check table DIR | args | driver\n");
  return 2;
}
