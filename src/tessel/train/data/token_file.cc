#include "tessel/train/data/token_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "tessel/base/error.h"
#include "tessel/base/philox.h"

namespace tessel {
namespace {

struct Header {
  char magic[8];
  uint32_t version, width;
  uint64_t vocab, tokens, documents, tokenizer_hash, reserved[2];
};
static_assert(sizeof(Header) == kTokenFileHeaderBytes);

uint64_t padded(uint64_t bytes) { return (bytes + 7) / 8 * 8; }

int width_for(int64_t vocab) { return vocab <= 65536 ? 2 : 4; }

// The header's fields, each against the file's size; throws naming `path`.
void check_header(const Header& h, const std::string& path, uint64_t size) {
  auto fail = [&](const auto&... why) { TS_THROW("token file '", path, "': ", why...); };
  if (std::memcmp(h.magic, kTokenFileMagic, 8) != 0)
    fail(
        "not a Tessel token file (no \"TSLTOKEN\" magic; write one with `tessel tokenize encode`)");
  if (h.version != kTokenFileVersion)
    fail("format version ", h.version, ", this build reads version ", kTokenFileVersion);
  if (h.vocab < 1 || h.vocab > (uint64_t{1} << 31))
    fail("vocabulary size ", h.vocab, " is outside [1, 2^31]");
  if (h.width != static_cast<uint32_t>(width_for(static_cast<int64_t>(h.vocab))))
    fail(h.width, " bytes per token for vocabulary ", h.vocab, " (expected ",
         width_for(static_cast<int64_t>(h.vocab)), ": uint16 up to 65536, else uint32)");
  if (h.reserved[0] != 0 || h.reserved[1] != 0) fail("reserved header bytes are not zero");
  if (h.documents < 1) fail("holds no documents");
  // Each count is bounded by the file's size before any product is formed.
  if (h.tokens > size || h.documents > size / 8 || h.documents > h.tokens)
    fail("truncated or damaged: the header claims ", h.tokens, " tokens in ", h.documents,
         " documents, but the file has ", size, " bytes");
  const uint64_t want = kTokenFileHeaderBytes + padded(h.tokens * h.width) + h.documents * 8;
  if (size < want)
    fail("truncated: ", size, " bytes, but ", h.tokens, " tokens and ", h.documents,
         " documents need ", want);
  if (size > want)
    fail(size - want, " bytes past the end of the document index (", want,
         " expected): not a complete token file");
}

}  // namespace

uint64_t tokenizer_file_hash(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) TS_THROW("cannot read tokenizer model '", path, "'");
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) TS_THROW("error while reading tokenizer model '", path, "'");
  const uint64_t h = hash_name(bytes);
  return h == 0 ? 1 : h;
}

TokenFile TokenFile::open(const std::string& path) {
  TokenFile f;
  f.path_ = path;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) TS_THROW("cannot open token file '", path, "': ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    TS_THROW("token file '", path, "' is not a regular file");
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size < static_cast<uint64_t>(kTokenFileHeaderBytes)) {
    ::close(fd);
    TS_THROW("token file '", path, "': truncated: ", size, " bytes, the header alone needs ",
             kTokenFileHeaderBytes);
  }
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) TS_THROW("cannot map token file '", path, "': ", std::strerror(errno));
  f.map_ = std::unique_ptr<void, Unmap>(map, Unmap{size});
  Header h;
  std::memcpy(&h, map, sizeof h);
  check_header(h, path, size);  // f's destructor unmaps on a throw
  f.vocab_ = static_cast<int64_t>(h.vocab);
  f.tokens_ = static_cast<int64_t>(h.tokens);
  f.documents_ = static_cast<int64_t>(h.documents);
  f.tokenizer_hash_ = h.tokenizer_hash;
  f.width_ = static_cast<int>(h.width);
  f.data_ = static_cast<const unsigned char*>(map) + kTokenFileHeaderBytes;
  f.ends_ = reinterpret_cast<const uint64_t*>(f.data_ + padded(h.tokens * h.width));
  uint64_t previous = 0;
  for (int64_t d = 0; d < f.documents_; ++d) {
    if (f.ends_[d] <= previous || f.ends_[d] > h.tokens)
      TS_THROW("token file '", path, "': the document index disagrees with the data: document ", d,
               " ends at token ", f.ends_[d], " after ", previous, " (of ", h.tokens,
               " tokens; ends must increase)");
    previous = f.ends_[d];
  }
  if (previous != h.tokens)
    TS_THROW("token file '", path, "': the document index covers ", previous, " of its ", h.tokens,
             " tokens");
  for (int64_t i = 0; i < f.tokens_; ++i)
    if (f.raw_token(i) >= h.vocab)
      TS_THROW("token file '", path, "': token ", i, " has id ", f.raw_token(i),
               ", past its vocabulary of ", f.vocab_);
  return f;
}

void TokenFile::Unmap::operator()(void* map) const { ::munmap(map, bytes); }

uint32_t TokenFile::raw_token(int64_t i) const {
  if (width_ == 2) {
    uint16_t v;
    std::memcpy(&v, data_ + 2 * i, 2);
    return v;
  }
  uint32_t v;
  std::memcpy(&v, data_ + 4 * i, 4);
  return v;
}

void TokenFile::copy(int64_t begin, int64_t count, int32_t* out) const {
  if (begin < 0 || count < 0 || begin > tokens_ - count)
    TS_THROW("token file '", path_, "': tokens [", begin, ", ", begin + count, ") are outside its ",
             tokens_, " tokens");
  // Every id is below vocab <= 2^31 (checked on open): int32 holds it.
  for (int64_t i = 0; i < count; ++i) out[i] = static_cast<int32_t>(raw_token(begin + i));
}

TokenFileWriter::TokenFileWriter(const std::string& path, int64_t vocab, uint64_t tokenizer_hash)
    : path_(path),
      partial_(path + ".partial"),
      vocab_(vocab),
      tokenizer_hash_(tokenizer_hash),
      width_(width_for(vocab)) {
  if (vocab < 1 || vocab > (int64_t{1} << 31))
    TS_THROW("token file '", path, "': vocabulary size ", vocab, " is outside [1, 2^31]");
  file_ = std::fopen(partial_.c_str(), "wb");
  if (!file_) TS_THROW("cannot write token file '", partial_, "': ", std::strerror(errno));
  const Header blank{};
  write(&blank, sizeof blank);  // the real header goes in last
}

TokenFileWriter::~TokenFileWriter() {
  if (!file_) return;
  std::fclose(file_);
  std::remove(partial_.c_str());
}

void TokenFileWriter::write(const void* bytes, size_t n) {
  if (n > 0 && std::fwrite(bytes, 1, n, file_) != n)
    TS_THROW("cannot write token file '", partial_, "': ", std::strerror(errno),
             " (is the disk full?)");
}

void TokenFileWriter::add_document(const std::vector<int32_t>& tokens, const std::string& source) {
  if (!file_) TS_THROW("token file '", path_, "' is already finished");
  if (tokens.empty()) TS_THROW("token file '", path_, "': document from ", source, " is empty");
  std::vector<unsigned char> bytes(tokens.size() * width_);
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= vocab_)
      TS_THROW("token file '", path_, "': document from ", source, " has token id ", tokens[i],
               ", outside the vocabulary of ", vocab_);
    const uint32_t v = static_cast<uint32_t>(tokens[i]);
    std::memcpy(bytes.data() + i * width_, &v, width_);  // little-endian: the low bytes
  }
  write(bytes.data(), bytes.size());
  tokens_ += static_cast<int64_t>(tokens.size());
  ends_.push_back(static_cast<uint64_t>(tokens_));
}

void TokenFileWriter::finish() {
  if (!file_) TS_THROW("token file '", path_, "' is already finished");
  if (ends_.empty()) TS_THROW("token file '", path_, "': no documents to write");
  const uint64_t data_bytes = static_cast<uint64_t>(tokens_) * width_;
  const uint64_t zeros = 0;
  write(&zeros, padded(data_bytes) - data_bytes);
  write(ends_.data(), ends_.size() * sizeof(uint64_t));
  Header h{};
  std::memcpy(h.magic, kTokenFileMagic, 8);
  h.version = kTokenFileVersion;
  h.width = static_cast<uint32_t>(width_);
  h.vocab = static_cast<uint64_t>(vocab_);
  h.tokens = static_cast<uint64_t>(tokens_);
  h.documents = ends_.size();
  h.tokenizer_hash = tokenizer_hash_;
  if (std::fseek(file_, 0, SEEK_SET) != 0)
    TS_THROW("cannot write token file '", partial_, "': ", std::strerror(errno));
  write(&h, sizeof h);
  const bool closed = std::fclose(file_) == 0;
  file_ = nullptr;
  if (!closed) {
    std::remove(partial_.c_str());
    TS_THROW("cannot write token file '", partial_, "': ", std::strerror(errno));
  }
  std::error_code ec;
  std::filesystem::rename(partial_, path_, ec);
  if (ec) TS_THROW("cannot move token file into place at '", path_, "': ", ec.message());
}

}  // namespace tessel
