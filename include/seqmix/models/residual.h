#pragma once
// Residual schemes: how a stack threads its hidden state through the sublayers. Each sublayer is
// given as a function (its norm included) so one scheme serves the full forward and token-by-token
// decoding alike.
#include <torch/nn/module.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace seqmix {

using Sublayer = std::function<torch::Tensor(const torch::Tensor&)>;  // [B,T,D] -> [B,T,D]

struct BlockSublayers {
  Sublayer mixer;    // norm then mixer
  Sublayer channel;  // norm then channel mixer; empty when the block has no channel mixer
  // The same sublayers without their input norm, and the norms alone (for post-norm schemes).
  Sublayer raw_mixer, raw_channel, mixer_norm, channel_norm;
  // The block's Memory Lobe (Hyper-Link only): an ELA read over the block's increment; empty if none.
  Sublayer lobe;
};

class ResidualSchemeImpl : public torch::nn::Module {
 public:
  virtual torch::Tensor forward(const torch::Tensor& x, const std::vector<BlockSublayers>& blocks) = 0;
};
using ResidualScheme = std::shared_ptr<ResidualSchemeImpl>;

// The standard pre-norm residual: x <- x + f(x) for every sublayer f in order.
class PreNormResidualImpl : public ResidualSchemeImpl {
 public:
  torch::Tensor forward(const torch::Tensor& x, const std::vector<BlockSublayers>& blocks) override;
};

// MomenMHA / NagMHA (energy paper §3.1): the sublayer outputs f act as negated gradients of an implicit
// energy, and one momentum tensor m (per token, m = 0 at the input) threads through every sublayer in
// order (mixer 1, channel 1, mixer 2, ...):
//   momentum:  m <- beta m + f(z),                 z <- z + eta m
//   nesterov:  m <- beta m + f(z + beta m),        z <- z + eta m   (the sublayer sees the look-ahead)
// beta and eta are learnable (init 0.9 and 1.0), one pair per sublayer, per block or for the whole stack.
// With norm = pre the sublayer normalises its input (pre-LN, the paper's GPT); with norm = post the
// stack state is renormalised after each update, z <- norm(z + eta m), and the sublayer sees it directly.
// beta = 0, eta = 1, norm = pre is exactly the pre-norm residual. (With one pair per sublayer, the first
// sublayer's beta multiplies m = 0 and has no effect; it is kept so that pairs and sublayers line up.)
struct MomentumResidualOptions {
  bool nesterov = false;
  enum class Sharing { sublayer, layer, global } sharing = Sharing::sublayer;
  bool post_norm = false;
  double beta = 0.9, eta = 1.0;
  bool learnable = true;
};

class MomentumResidualImpl : public ResidualSchemeImpl {
 public:
  MomentumResidualImpl(const MomentumResidualOptions& options, int64_t blocks, int64_t sublayers_per_block);
  torch::Tensor forward(const torch::Tensor& x, const std::vector<BlockSublayers>& blocks) override;
  torch::Tensor beta, eta;  // [groups]

 private:
  int64_t group_of(int64_t block, int64_t sublayer_index) const;
  MomentumResidualOptions options_;
};

// Hyper-Link (ELA paper §V-C): every block is one residual unit, with no attention residual branch:
//   a = mixer(norm(x)),   F = a + channel(a)   (attention_skip; channel(a) alone without it; a when the
//                                               block has no channel mixer),
//   x <- x + F + lobe(F)  (lobe: the Memory Lobe over the transformation flow F, when the block has one).
// The channel mixer reads a directly (no second norm), so its gate (SwiGLU, MoE experts) modulates what
// each layer adds to the stream.
// Hyper-Link's options (ELA paper): the attention skip in F = a + channel(a), and the block's Memory Lobe.
struct HyperLinkOptions {
  bool skip = true;                      // F = a + channel(a) (false: F = channel(a))
  std::string lobe = "none";             // none | auto | causal | bidirectional
  std::string lobe_kernel = "hadamard_exp";  // the Memory Lobe's ELA kernel (ops::exact_kernel_names())
};

class HyperLinkResidualImpl : public ResidualSchemeImpl {
 public:
  explicit HyperLinkResidualImpl(bool attention_skip) : attention_skip_(attention_skip) {}
  torch::Tensor forward(const torch::Tensor& x, const std::vector<BlockSublayers>& blocks) override;

 private:
  bool attention_skip_;
};

}  // namespace seqmix
