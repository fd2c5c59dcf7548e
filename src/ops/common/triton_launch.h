#pragma once
// Launching the Triton kernels compiled ahead of time (scripts/triton_aot.py) through the CUDA driver API, which is
// loaded at first use from the driver's libcuda.so.1 as Triton's own launcher does: nothing here needs Triton, the
// CUDA toolkit or torch at run time. The build generates the table of kernels (cubins and, per entry, the argument
// list of the compiled kernel's signature); a caller finds the entry of its launch configuration and launches it on
// torch's current stream:
//
//   int arch = triton::arch_for_device(triton::kTritonKernels, device);
//   const auto& entry = triton::find_kernel(triton::kTritonKernels, triton::kChunkGlaFwdKernel, "float16", arch,
//                                           {{"BT", 16}, {"BK", 64}, {"BV", 64}, {"PER_KEY", 0}, {"EXACT", 0}});
//   triton::launch(entry, device, {nv, n * h}, at::cuda::getCurrentCUDAStream(device).stream(),
//                  {triton::Arg::pointer(q.data_ptr(), "fp16"), ..., triton::Arg::i32(h), triton::Arg::f32(scale)});
//
// Errors are seqmix::Error with one sentence: no driver, no kernel for the GPU, arguments that differ from the
// kernel's, a driver call that fails.
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string_view>
#include <vector>

namespace seqmix::triton {

// How an argument is passed to the kernel (Triton's launcher's C types): a device pointer (CUdeviceptr), int32_t,
// int64_t, float or double.
enum class CType : std::uint8_t { kPointer, kInt32, kInt64, kFloat, kDouble };

// One runtime argument of a compiled kernel, in the order of its signature.
struct ArgSpec {
  const char* name;  // the kernel's parameter: "q", "H"; the scratch pointers "global_scratch", "profile_scratch"
  const char* type;  // Triton's type: "*fp16" (a pointer to fp16), "*i64", "i32", "fp32"
  CType ctype;
  bool scratch;  // one of the two pointers Triton appends to every kernel: the launcher passes null
};

// A constexpr of a launch configuration; bools are 0 or 1.
struct Constexpr {
  const char* name;
  std::int64_t value;
};

// One kernel compiled for one launch configuration and architecture.
struct KernelEntry {
  const char* kernel;    // the Python kernel, e.g. "chunk_gla_fwd_kernel"
  const char* function;  // the cubin's entry point
  const char* module;    // the kernel file, e.g. "gla_triton"
  const char* dtype;     // the inputs' dtype the configuration is for: "float32", "float16" or "bfloat16"
  int arch;              // 80, 90: the compute capability compiled for
  bool arch_specific;    // sm_90a: runs on that architecture only (sm_80 also runs on 8.6 and 8.9)
  const Constexpr* constexprs;
  int num_constexprs;
  int num_warps;  // the block is 32 * num_warps threads
  int num_stages;
  int num_ctas;  // 1: the launcher launches single-CTA kernels
  int shared;    // dynamic shared memory, bytes
  const ArgSpec* args;  // including the two scratch pointers last
  int num_args;
  const unsigned char* cubin;
  std::size_t cubin_size;
};

struct KernelTable {
  const KernelEntry* entries;
  std::size_t size;
};

// One argument a caller passes, typed: checked against the entry's ArgSpec before the launch.
class Arg {
 public:
  // A device pointer to elements of Triton's type `element` ("fp16", "bf16", "fp32", "i8", "i32", "i64").
  static Arg pointer(const void* address, const char* element);
  static Arg i32(std::int32_t value);
  static Arg i64(std::int64_t value);
  static Arg f32(float value);
  static Arg f64(double value);

  CType ctype() const { return ctype_; }
  const char* element() const { return element_; }
  // The argument's storage, which the kernel's parameter array points to.
  const void* storage() const { return &value_; }

 private:
  Arg(CType ctype, const char* element) : ctype_(ctype), element_(element) {}
  CType ctype_;
  const char* element_;  // a pointer's element type; null for a scalar
  union {
    std::uint64_t pointer;  // CUdeviceptr
    std::int32_t i32;
    std::int64_t i64;
    float f32;
    double f64;
  } value_{};
};

struct Grid {
  unsigned x = 1, y = 1, z = 1;
};

// The table architecture device `device` (a CUDA ordinal) runs: the highest compiled one its GPU can run (sm_90 on
// 9.0, sm_80 on 8.x). Throws naming the GPU and the compiled architectures when there is none.
int arch_for_device(const KernelTable& table, int device);

// The entry of `kernel` for inputs of `dtype` on `arch` whose constexprs include `constexprs` (any order): the
// caller names the ones it chooses (e.g. the head-width blocks) and reads the rest, the geometry launch_configs()
// compiled, with constexpr_of. Throws naming the configuration when the build compiled none, or several.
const KernelEntry& find_kernel(const KernelTable& table, std::string_view kernel, std::string_view dtype, int arch,
                               std::initializer_list<Constexpr> constexprs);

// The value of constexpr `name` of `entry` (BLOCK_M, BT, ...); throws when the entry has none.
std::int64_t constexpr_of(const KernelEntry& entry, std::string_view name);

// Launches `entry` on `stream` (a CUstream: torch's current stream of `device`) over `grid`, with 32 * num_warps
// threads and the entry's shared memory. `args` are the kernel's arguments in order, without the scratch pointers;
// their number and types must be the entry's. The cubin is loaded into the device's context at its first launch
// there; an empty grid launches nothing.
void launch(const KernelEntry& entry, int device, Grid grid, void* stream, const Arg* args, std::size_t num_args);
inline void launch(const KernelEntry& entry, int device, Grid grid, void* stream, std::initializer_list<Arg> args) {
  launch(entry, device, grid, stream, args.begin(), args.size());
}

// Checks `args` against `entry` as launch does, without a driver (the argument list is the kernel's signature).
void check_args(const KernelEntry& entry, const Arg* args, std::size_t num_args);

// While a DryRun lives, this thread's launches check their arguments and grid as launch does and are recorded
// instead of reaching a driver, and arch_for_device answers `arch`: the C++ side of every kernel (the checks, the
// entries it finds, the arguments it passes) runs on CPU tensors, without a GPU (tests/ops/triton_dispatch_test.cpp).
struct DryLaunch {
  const KernelEntry* entry;
  Grid grid;
};
class DryRun {
 public:
  explicit DryRun(int arch);
  ~DryRun();
  DryRun(const DryRun&) = delete;
  DryRun& operator=(const DryRun&) = delete;
  int arch() const { return arch_; }
  const std::vector<DryLaunch>& launches() const { return launches_; }
  void record(const DryLaunch& launch) { launches_.push_back(launch); }

 private:
  int arch_;
  DryRun* outer_;
  std::vector<DryLaunch> launches_;
};

}  // namespace seqmix::triton
