#include "triton_launch.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "seqmix/io/error.h"

namespace seqmix::triton {
namespace {

// The few CUDA driver types and constants used here (the wheel's LibTorch headers ship no cuda.h; values from the
// CUDA 13 toolkit's cuda.h, stable across drivers).
using CUresult = int;
using CUdevice = int;
using CUcontext = struct DriverContext*;
using CUmodule = struct DriverModule*;
using CUfunction = struct DriverFunction*;
using CUstream = struct DriverStream*;
constexpr CUresult kSuccess = 0;
constexpr int kComputeCapabilityMajor = 75;      // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
constexpr int kComputeCapabilityMinor = 76;      // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR
constexpr int kMaxSharedPerBlockOptin = 97;      // CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
constexpr int kMaxDynamicSharedSizeBytes = 8;    // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
constexpr int kDefaultSharedLimit = 48 * 1024;   // a block may use more only after opting in
constexpr unsigned kMaxGridY = 65535, kMaxGridZ = 65535;

// The driver's entry points, resolved once from libcuda.so.1 (the unversioned names cuda.h maps them to).
struct Driver {
  CUresult (*cuInit)(unsigned);
  CUresult (*cuGetErrorName)(CUresult, const char**);
  CUresult (*cuGetErrorString)(CUresult, const char**);
  CUresult (*cuDeviceGet)(CUdevice*, int);
  CUresult (*cuDeviceGetAttribute)(int*, int, CUdevice);
  CUresult (*cuDeviceGetName)(char*, int, CUdevice);
  CUresult (*cuCtxGetCurrent)(CUcontext*);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuCtxGetDevice)(CUdevice*);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*cuModuleLoadData)(CUmodule*, const void*);
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*);
  CUresult (*cuFuncSetAttribute)(CUfunction, int, int);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             CUstream, void**, void**);
};

[[noreturn]] void fail(const std::string& message) { throw Error(message); }

// This thread's innermost DryRun, if any.
thread_local DryRun* dry_run = nullptr;

template <typename F>
void resolve(void* library, F& function, const char* name) {
  void* symbol = dlsym(library, name);
  if (symbol == nullptr) {
    fail(std::string("the CUDA driver (libcuda.so.1) has no ") + name + ", which seqmix's GPU kernels need (update "
         "the NVIDIA driver)");
  }
  function = reinterpret_cast<F>(symbol);
}

std::string error_text(const Driver& d, CUresult result) {
  const char* name = nullptr;
  const char* text = nullptr;
  d.cuGetErrorName(result, &name);
  d.cuGetErrorString(result, &text);
  return std::string(name ? name : "CUDA error " + std::to_string(result)) + " (" + (text ? text : "no description") +
         ")";
}

Driver load_driver() {
  // The library stays loaded for the process's life, as Triton's launcher keeps it.
  void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* reason = dlerror();
    fail(std::string("no CUDA driver (libcuda.so.1) could be loaded, which seqmix's GPU kernels need: ") +
         (reason ? reason : "dlopen failed"));
  }
  Driver d{};
  resolve(library, d.cuInit, "cuInit");
  resolve(library, d.cuGetErrorName, "cuGetErrorName");
  resolve(library, d.cuGetErrorString, "cuGetErrorString");
  resolve(library, d.cuDeviceGet, "cuDeviceGet");
  resolve(library, d.cuDeviceGetAttribute, "cuDeviceGetAttribute");
  resolve(library, d.cuDeviceGetName, "cuDeviceGetName");
  resolve(library, d.cuCtxGetCurrent, "cuCtxGetCurrent");
  resolve(library, d.cuCtxSetCurrent, "cuCtxSetCurrent");
  resolve(library, d.cuCtxGetDevice, "cuCtxGetDevice");
  resolve(library, d.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
  resolve(library, d.cuModuleLoadData, "cuModuleLoadData");
  resolve(library, d.cuModuleGetFunction, "cuModuleGetFunction");
  resolve(library, d.cuFuncSetAttribute, "cuFuncSetAttribute");
  resolve(library, d.cuLaunchKernel, "cuLaunchKernel");
  CUresult result = d.cuInit(0);
  if (result != kSuccess) fail("the CUDA driver did not initialise: " + error_text(d, result));
  return d;
}

// The driver, loaded at first use; a failed load throws, and the next use tries again.
const Driver& driver() {
  static const Driver d = load_driver();
  return d;
}

void check(CUresult result, const char* call, const std::string& what) {
  if (result != kSuccess) fail(std::string(call) + " failed " + what + ": " + error_text(driver(), result));
}

std::string describe(const KernelEntry& entry) {
  std::string text = std::string(entry.kernel) + " " + entry.dtype + " sm_" + std::to_string(entry.arch) +
                     (entry.arch_specific ? "a" : "");
  for (int i = 0; i < entry.num_constexprs; ++i) {
    text += std::string(" ") + entry.constexprs[i].name + "=" + std::to_string(entry.constexprs[i].value);
  }
  return text;
}

std::string type_of(const Arg& arg) {
  switch (arg.ctype()) {
    case CType::kPointer: return std::string("*") + (arg.element() ? arg.element() : "?");
    case CType::kInt32: return "i32";
    case CType::kInt64: return "i64";
    case CType::kFloat: return "fp32";
    case CType::kDouble: return "fp64";
  }
  return "?";
}

struct DeviceFacts {
  CUdevice device;
  int capability;  // major * 10 + minor
  std::string name;
};

DeviceFacts device_facts(int ordinal) {
  const Driver& d = driver();
  DeviceFacts facts{};
  check(d.cuDeviceGet(&facts.device, ordinal), "cuDeviceGet", "for CUDA device " + std::to_string(ordinal));
  int major = 0, minor = 0;
  check(d.cuDeviceGetAttribute(&major, kComputeCapabilityMajor, facts.device), "cuDeviceGetAttribute",
        "reading the compute capability");
  check(d.cuDeviceGetAttribute(&minor, kComputeCapabilityMinor, facts.device), "cuDeviceGetAttribute",
        "reading the compute capability");
  facts.capability = major * 10 + minor;
  char name[256] = {};
  check(d.cuDeviceGetName(name, sizeof(name) - 1, facts.device), "cuDeviceGetName", "naming the GPU");
  facts.name = name;
  return facts;
}

bool runs_on(const KernelEntry& entry, int capability) {
  if (entry.arch_specific) return entry.arch == capability;
  return entry.arch / 10 == capability / 10 && entry.arch <= capability;
}

// The loaded kernels, by entry and context, and each device's retained primary context.
struct Loaded {
  std::mutex mutex;
  std::map<std::pair<const KernelEntry*, CUcontext>, CUfunction> functions;
  std::map<CUdevice, CUcontext> primary;
};

Loaded& loaded() {
  static Loaded state;
  return state;
}

// The context to launch in: the thread's current one (torch's, on the device it guards), else the device's
// primary context made current, as Triton's launcher does. A current context of another device is an error.
CUcontext current_context(const Driver& d, CUdevice device, int ordinal) {
  CUcontext context = nullptr;
  check(d.cuCtxGetCurrent(&context), "cuCtxGetCurrent", "finding the current context");
  if (context == nullptr) {
    Loaded& state = loaded();
    std::lock_guard<std::mutex> lock(state.mutex);
    auto found = state.primary.find(device);
    if (found == state.primary.end()) {
      check(d.cuDevicePrimaryCtxRetain(&context, device), "cuDevicePrimaryCtxRetain",
            "for CUDA device " + std::to_string(ordinal));
      found = state.primary.emplace(device, context).first;
    }
    context = found->second;
    check(d.cuCtxSetCurrent(context), "cuCtxSetCurrent", "for CUDA device " + std::to_string(ordinal));
    return context;
  }
  CUdevice current = 0;
  check(d.cuCtxGetDevice(&current), "cuCtxGetDevice", "finding the current context's device");
  if (current != device) {
    fail("the current CUDA context is device " + std::to_string(current) + "'s, but the launch is on device " +
         std::to_string(ordinal) + " (guard the launch with the device, e.g. c10::cuda::CUDAGuard)");
  }
  return context;
}

CUfunction load_function(const Driver& d, const KernelEntry& entry, CUcontext context, CUdevice device) {
  Loaded& state = loaded();
  std::lock_guard<std::mutex> lock(state.mutex);
  auto key = std::make_pair(&entry, context);
  auto found = state.functions.find(key);
  if (found != state.functions.end()) return found->second;
  int optin = 0;
  check(d.cuDeviceGetAttribute(&optin, kMaxSharedPerBlockOptin, device), "cuDeviceGetAttribute",
        "reading the shared memory limit");
  if (entry.shared > optin) {
    fail(describe(entry) + " needs " + std::to_string(entry.shared) + " bytes of shared memory, more than this GPU's " +
         std::to_string(optin));
  }
  const std::string what = "for " + describe(entry);
  CUmodule module = nullptr;  // kept for the process's life, like the function it holds
  check(d.cuModuleLoadData(&module, entry.cubin), "cuModuleLoadData", what);
  CUfunction function = nullptr;
  check(d.cuModuleGetFunction(&function, module, entry.function), "cuModuleGetFunction", what);
  if (entry.shared > kDefaultSharedLimit) {
    check(d.cuFuncSetAttribute(function, kMaxDynamicSharedSizeBytes, entry.shared), "cuFuncSetAttribute", what);
  }
  state.functions.emplace(key, function);
  return function;
}

}  // namespace

Arg Arg::pointer(const void* address, const char* element) {
  Arg arg(CType::kPointer, element);
  arg.value_.pointer = reinterpret_cast<std::uintptr_t>(address);
  return arg;
}

Arg Arg::i32(std::int32_t value) {
  Arg arg(CType::kInt32, nullptr);
  arg.value_.i32 = value;
  return arg;
}

Arg Arg::i64(std::int64_t value) {
  Arg arg(CType::kInt64, nullptr);
  arg.value_.i64 = value;
  return arg;
}

Arg Arg::f32(float value) {
  Arg arg(CType::kFloat, nullptr);
  arg.value_.f32 = value;
  return arg;
}

Arg Arg::f64(double value) {
  Arg arg(CType::kDouble, nullptr);
  arg.value_.f64 = value;
  return arg;
}

int arch_for_device(const KernelTable& table, int device) {
  if (dry_run != nullptr) return dry_run->arch();
  // Asked at every launch: the driver is asked once per table and device.
  static std::mutex mutex;
  static std::map<std::pair<const KernelEntry*, int>, int> known;
  {
    std::lock_guard<std::mutex> lock(mutex);
    const auto found = known.find({table.entries, device});
    if (found != known.end()) return found->second;
  }
  const DeviceFacts facts = device_facts(device);
  int best = -1;
  std::vector<std::string> compiled;
  for (std::size_t i = 0; i < table.size; ++i) {
    const KernelEntry& entry = table.entries[i];
    std::string arch = "sm_" + std::to_string(entry.arch) + (entry.arch_specific ? "a" : "");
    if (std::find(compiled.begin(), compiled.end(), arch) == compiled.end()) compiled.push_back(arch);
    if (runs_on(entry, facts.capability)) best = std::max(best, entry.arch);
  }
  if (best < 0) {
    std::string list;
    for (const auto& arch : compiled) list += (list.empty() ? "" : ", ") + arch;
    fail("seqmix's Triton kernels are compiled for " + (list.empty() ? std::string("no GPU") : list) + ", none of "
         "which runs on the GPU " + facts.name + " (CUDA device " + std::to_string(device) + ", sm_" +
         std::to_string(facts.capability) + ")");
  }
  std::lock_guard<std::mutex> lock(mutex);
  known[{table.entries, device}] = best;
  return best;
}

const KernelEntry& find_kernel(const KernelTable& table, std::string_view kernel, std::string_view dtype, int arch,
                               std::initializer_list<Constexpr> constexprs) {
  int same_kernel = 0;
  const KernelEntry* found = nullptr;
  int matches = 0;
  for (std::size_t i = 0; i < table.size; ++i) {
    const KernelEntry& entry = table.entries[i];
    if (kernel != entry.kernel || dtype != entry.dtype || entry.arch != arch) continue;
    ++same_kernel;
    bool match = std::all_of(constexprs.begin(), constexprs.end(), [&](const Constexpr& wanted) {
      for (int j = 0; j < entry.num_constexprs; ++j) {
        if (std::strcmp(entry.constexprs[j].name, wanted.name) == 0) return entry.constexprs[j].value == wanted.value;
      }
      return false;
    });
    if (match) {
      found = &entry;
      ++matches;
    }
  }
  std::string wanted;
  for (const Constexpr& c : constexprs) wanted += std::string(" ") + c.name + "=" + std::to_string(c.value);
  const std::string what = std::string(kernel) + " for " + std::string(dtype) + " on sm_" + std::to_string(arch) +
                           " with" + (wanted.empty() ? std::string(" no constexprs") : wanted);
  if (matches > 1) {
    fail("the build compiled " + std::to_string(matches) + " Triton kernels " + what + "; name more constexprs");
  }
  if (found == nullptr) {
    fail("the build compiled no Triton kernel " + what + " (it has " + std::to_string(same_kernel) +
         " other configurations of it there; scripts/triton_aot.py compiles those of launch_configs())");
  }
  return *found;
}

std::int64_t constexpr_of(const KernelEntry& entry, std::string_view name) {
  for (int j = 0; j < entry.num_constexprs; ++j) {
    if (name == entry.constexprs[j].name) return entry.constexprs[j].value;
  }
  fail(describe(entry) + " has no constexpr " + std::string(name));
}

DryRun::DryRun(int arch) : arch_(arch), outer_(dry_run) { dry_run = this; }
DryRun::~DryRun() { dry_run = outer_; }

void check_args(const KernelEntry& entry, const Arg* args, std::size_t num_args) {
  std::size_t expected = 0;
  std::string names;
  for (int i = 0; i < entry.num_args; ++i) {
    if (entry.args[i].scratch) continue;
    ++expected;
    names += (names.empty() ? "" : ", ") + std::string(entry.args[i].name);
  }
  if (num_args != expected) {
    fail(describe(entry) + " takes " + std::to_string(expected) + " arguments (" + names + "), got " +
         std::to_string(num_args));
  }
  std::size_t next = 0;
  for (int i = 0; i < entry.num_args; ++i) {
    const ArgSpec& spec = entry.args[i];
    if (spec.scratch) continue;
    const Arg& arg = args[next++];
    if (type_of(arg) != spec.type) {
      fail("argument " + std::to_string(next) + " (" + spec.name + ") of " + describe(entry) + " is " + spec.type +
           " in the compiled kernel, got " + type_of(arg));
    }
  }
}

void launch(const KernelEntry& entry, int device, Grid grid, void* stream, const Arg* args, std::size_t num_args) {
  check_args(entry, args, num_args);
  // The cubins are compiled for 16-byte aligned pointers (scripts/triton_aot.py's specialisation).
  for (std::size_t i = 0; i < num_args; ++i) {
    if (args[i].ctype() != CType::kPointer) continue;
    const auto address = *static_cast<const std::uint64_t*>(args[i].storage());
    if (address % 16 != 0) {
      fail("argument " + std::to_string(i + 1) + " of " + describe(entry) + " is not 16-byte aligned (the compiled "
           "kernels read aligned pointers; pass a contiguous copy)");
    }
  }
  if (entry.num_ctas != 1) fail(describe(entry) + " has " + std::to_string(entry.num_ctas) + " CTAs per program; "
                                "the launcher launches single-CTA kernels");
  if (grid.x == 0 || grid.y == 0 || grid.z == 0) return;
  if (grid.x > 0x7fffffffu || grid.y > kMaxGridY || grid.z > kMaxGridZ) {
    fail("the grid (" + std::to_string(grid.x) + ", " + std::to_string(grid.y) + ", " + std::to_string(grid.z) +
         ") of " + describe(entry) + " exceeds CUDA's limits (x below 2^31, y and z at most 65535)");
  }
  if (dry_run != nullptr) {
    dry_run->record({&entry, grid});
    return;
  }
  const Driver& d = driver();
  CUdevice handle = 0;
  check(d.cuDeviceGet(&handle, device), "cuDeviceGet", "for CUDA device " + std::to_string(device));
  CUcontext context = current_context(d, handle, device);
  CUfunction function = load_function(d, entry, context, handle);
  // The parameter array: each argument's storage in the entry's order, null for the scratch pointers.
  static const std::uint64_t null_pointer = 0;
  std::vector<void*> params(entry.num_args);
  std::size_t next = 0;
  for (int i = 0; i < entry.num_args; ++i) {
    const void* storage = entry.args[i].scratch ? &null_pointer : args[next++].storage();
    params[i] = const_cast<void*>(storage);
  }
  check(d.cuLaunchKernel(function, grid.x, grid.y, grid.z, 32u * entry.num_warps, 1, 1,
                         static_cast<unsigned>(entry.shared), static_cast<CUstream>(stream), params.data(), nullptr),
        "cuLaunchKernel", "for " + describe(entry));
}

}  // namespace seqmix::triton
