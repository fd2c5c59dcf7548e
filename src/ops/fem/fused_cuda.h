#pragma once
// The fused FEM softmax read on CUDA (fused_cuda.cu): the raw kernels' arguments and launchers, free of torch's
// headers so that nvcc compiles only this family's device code. fused_cuda.cpp makes the tensors, checks them and
// calls these; the derivation and the tiling are in README.md ("The CUDA kernels").
#include <cstdint>
#include <string>

namespace seqmix::ops::fem_cuda {

// Every pointer is a contiguous device array. bf16 arrays hold bfloat16 bit patterns (the kernels read every matrix
// operand in bfloat16; float16 inputs are converted first, see README.md).
struct Visibility {
  bool causal = true;
  const bool* key_mask = nullptr;       // [B,S] (true: a real key) or null
  const int64_t* first_real = nullptr;  // [B]: the first real key of each batch row (S if none), with key_mask
};

struct ForwardArgs {
  const uint16_t* q = nullptr;  // [B,T,H,dk] bf16
  const uint16_t* k = nullptr;  // [B,S,H,dk] bf16
  const uint16_t* v = nullptr;  // [B,S,H,dv] bf16
  const float* beta = nullptr;  // [H*dv] > 0
  Visibility visibility;
  float* mean = nullptr;         // [B,T,H,dv]: mu
  float* free_energy = nullptr;  // [B,T,H,dv]: F = L / beta
  float* lse = nullptr;          // [B,H,T]: the row log-sum-exp of the scores (-inf for a row that sees nothing)
  int64_t B = 0, T = 0, S = 0, H = 0;
  float scale = 0, cap = 0, shift_floor = 0;
};

struct BackwardArgs {
  const uint16_t* q = nullptr;       // [B,T,H,dk] bf16
  const uint16_t* k = nullptr;       // [B,S,H,dk] bf16
  const uint16_t* clipped = nullptr;  // [B,S,H,dv] bf16: c = clamp(v, +-cap/beta)
  const uint16_t* exp_cap = nullptr;  // [B,S,H,dv] bf16: exp(u - cap), u = beta c
  const uint16_t* g_mean = nullptr;   // [B,T,H,dv] bf16: dmu
  const uint16_t* g_exp = nullptr;    // [B,T,H,dv] bf16: dL exp(cap - L)
  const float* lse = nullptr;         // [B,H,T]
  const float* delta = nullptr;       // [B,H,T]: dmu . mu + sum_j dL_j
  Visibility visibility;
  float* dq = nullptr;      // [B,T,H,dk], zeroed: key blocks add their share atomically
  float* dk = nullptr;      // [B,S,H,dk]: every key row written
  float* dc = nullptr;      // [B,S,H,dv]: sum_t P_ti dmu_t
  float* du_raw = nullptr;  // [B,S,H,dv]: sum_t P_ti G_t (du = exp(u - cap) times this)
  int64_t B = 0, T = 0, S = 0, H = 0;
  float scale = 0;
};

// Whether the kernels are compiled for these head widths (each of dk and dv: 32, 64 or 128).
bool supports_head_dims(int64_t dk, int64_t dv);
// Shared memory one block of each kernel needs, and what the current device grants a block (opt-in maximum).
int64_t forward_shared_bytes(int64_t dk, int64_t dv);
int64_t backward_shared_bytes(int64_t dk, int64_t dv);
int64_t device_shared_bytes_limit();
// Launch on `stream` (a cudaStream_t); an empty string when the launch succeeded, else CUDA's reason.
std::string launch_forward(const ForwardArgs& args, int64_t dk, int64_t dv, void* stream);
std::string launch_backward(const BackwardArgs& args, int64_t dk, int64_t dv, void* stream);

}  // namespace seqmix::ops::fem_cuda
