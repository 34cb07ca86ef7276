#include "tessel/train/data/token_dataset.h"

#include <algorithm>
#include <cmath>

#include "tessel/base/error.h"

namespace tessel {

TokenStream::TokenStream(const TokenFile& file, std::vector<int64_t> documents)
    : file_(&file), documents_(std::move(documents)) {
  starts_.reserve(documents_.size() + 1);
  int64_t at = 0;
  for (int64_t d : documents_) {
    starts_.push_back(at);
    at += file.document_end(d) - file.document_begin(d);
  }
  starts_.push_back(at);
}

void TokenStream::copy(int64_t begin, int64_t count, int32_t* out) const {
  TS_CHECK(begin >= 0 && count >= 0 && begin + count <= size(), "stream range [", begin, ", ",
           begin + count, ") of ", size());
  // The document holding `begin`, then on through the following ones.
  size_t i = std::upper_bound(starts_.begin(), starts_.end(), begin) - starts_.begin() - 1;
  while (count > 0) {
    const int64_t d = documents_[i], offset = begin - starts_[i];
    const int64_t n = std::min(count, starts_[i + 1] - begin);
    file_->copy(file_->document_begin(d) + offset, n, out);
    out += n, begin += n, count -= n, ++i;
  }
}

TokenStream TokenDataset::split(const TokenFile& file, double val_fraction, uint64_t seed,
                                bool val) {
  const int64_t docs = file.documents();
  if (docs < 2)
    TS_THROW("token file '", file.path(),
             "' holds 1 document; the validation split takes whole documents, so it needs at "
             "least 2 (encode with a --separator, or more files)");
  const int64_t n_val =
      std::clamp<int64_t>(std::llround(static_cast<double>(docs) * val_fraction), 1, docs - 1);
  const SampleOrder order(seed, "val_documents", static_cast<uint64_t>(docs));
  std::vector<int64_t> picked;
  for (int64_t d = 0; d < docs; ++d)
    if ((static_cast<int64_t>(order.at(0, d)) < n_val) == val) picked.push_back(d);
  return TokenStream(file, std::move(picked));
}

TokenDataset::TokenDataset(TokenFile file, int64_t context, double val_fraction, uint64_t seed)
    : file_(std::move(file)),
      context_(context),
      train_(split(file_, val_fraction, seed, false)),
      val_(split(file_, val_fraction, seed, true)),
      order_(seed, "train_samples", std::max<int64_t>(1, samples(train_))) {
  for (const TokenStream* s : {&train_, &val_})
    if (samples(*s) < 1)
      TS_THROW("token file '", file_.path(), "': its ", s == &train_ ? "training" : "validation",
               " split (", s->documents(), " documents) has ", s->size(),
               " tokens; one sample of 'context' ", context_, " needs ", context_ + 1,
               " (a smaller context, more text, or another val_fraction)");
}

int64_t TokenDataset::train_window(int64_t global_sample) const {
  TS_CHECK(global_sample >= 0, "global sample ", global_sample);
  const uint64_t n = static_cast<uint64_t>(train_samples()),
                 g = static_cast<uint64_t>(global_sample);
  return static_cast<int64_t>(order_.at(g / n, g % n));
}

void TokenDataset::fill(const TokenStream& split, int64_t window, int32_t* tokens,
                        int32_t* targets) const {
  TS_CHECK(window >= 0 && window < samples(split), "window ", window, " of ", samples(split));
  split.copy(window * context_, context_, tokens);
  split.copy(window * context_ + 1, context_, targets);
}

}  // namespace tessel
