#pragma once
// Process-wide compute settings: ATen's intra-op threads and the BLAS library's own threads.
// OpenBLAS (pthreads) spawns workers of its own; next to ATen's busy OpenMP pool they oversubscribe
// the cores (measured here: a training step twice as slow). seqmix parallelises in ATen and keeps BLAS
// calls single-threaded, except where a measurement asks for the library's full speed.
#include <cstdint>
#include <set>
#include <string>

namespace seqmix {

// ATen intra-op threads = n (0 = all hardware threads); BLAS threads = 1.
void set_threads(int n);
// OpenBLAS thread count (no effect when the loaded BLAS is not OpenBLAS); returns false then.
bool set_blas_threads(int n);
int blas_threads();  // 0 when unknown
// Which BLAS implementation is loaded, e.g. "OpenBLAS (OpenBLAS 0.3.21 ...)" or "reference BLAS (...)".
std::string blas_description();
// Paths of the loaded shared objects whose file name mentions "blas".
std::set<std::string> loaded_blas_libraries();
// The machine's reference speed: an n x n fp32 matmul, median of 7 after warm-up, in GFLOP/s, with the
// BLAS library's own threads (as many as ATen's) for its full speed; BLAS threads are 1 again afterwards.
double matmul_gflops(int64_t n);

}  // namespace seqmix
