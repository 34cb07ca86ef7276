// An MLP-Mixer (Tolstikhin et al., 2021) for Fashion-MNIST, written against
// Tessel's public API: a model Tessel does not ship, registered under the
// name "mixer" so that `"model": "mixer"` in a config trains it.
//
// A 28x28 image is cut into (28/p)^2 patches of p x p pixels, each projected
// to `channels`; every block mixes across patches (token mixing: an MLP over
// the `patch` dim, width `token_hidden`) and then across channels (an MLP over
// `channel`, width `hidden`), each with a pre-LayerNorm and a residual. The
// head averages over patches and classifies. Named dims: batch, patch,
// channel, token_hidden, hidden, class (and prow, py, pcol, px while cutting
// patches), so a layout such as `batch=data,hidden=model,token_hidden=model`
// is data parallelism plus Megatron-style tensor parallelism of both MLPs.
#pragma once

namespace mixer {

// Registers "mixer" with its data (Fashion-MNIST images) and its options
// (config "model_options": patch, channels, token_hidden, hidden, blocks).
void register_mixer();

}  // namespace mixer
