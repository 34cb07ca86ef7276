// Token files: a tokenized corpus as one memory-mapped file (docs/data.md).
//
// Layout (little-endian), version 1:
//   0  char[8]  magic "TSLTOKEN"
//   8  u32      version (1)
//  12  u32      bytes per token: 2 (uint16) when vocab <= 65536, else 4 (uint32)
//  16  u64      vocab: every token id is below it
//  24  u64      tokens
//  32  u64      documents (>= 1)
//  40  u64      tokenizer hash: tokenizer_file_hash() of the model that cut
//               the tokens; 0 for byte-level tokens (no model)
//  48  u64[2]   reserved, zero
//  64  tokens, then zero padding to a multiple of 8 bytes
//      u64[documents]: the end (exclusive token index) of each document,
//      strictly increasing, the last equal to tokens (no empty documents).
//
// TokenFile::open checks all of it before returning (size, magic, version,
// width, the index against the data, every id against the vocabulary), so
// a truncated, damaged or mismatched file is an Error naming the path and
// what is wrong, before any compute. TokenFileWriter writes a partial file
// and renames it into place on finish(), so a reader never sees half a file.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace tessel {

inline constexpr char kTokenFileMagic[8] = {'T', 'S', 'L', 'T', 'O', 'K', 'E', 'N'};
inline constexpr uint32_t kTokenFileVersion = 1;
inline constexpr int64_t kTokenFileHeaderBytes = 64;

// The hash a token file records for the tokenizer model at `path` (64-bit
// FNV-1a of its bytes, never 0). Throws naming the path if it cannot be read.
uint64_t tokenizer_file_hash(const std::string& path);

class TokenFile {
 public:
  // Maps and validates `path`; throws an Error naming it on any defect.
  static TokenFile open(const std::string& path);

  const std::string& path() const { return path_; }
  int64_t vocab() const { return vocab_; }
  int64_t tokens() const { return tokens_; }
  int64_t documents() const { return documents_; }
  uint64_t tokenizer_hash() const { return tokenizer_hash_; }
  int bytes_per_token() const { return width_; }
  // Document d covers tokens [document_begin(d), document_end(d)).
  int64_t document_begin(int64_t d) const {
    return d == 0 ? 0 : static_cast<int64_t>(ends_[d - 1]);
  }
  int64_t document_end(int64_t d) const { return static_cast<int64_t>(ends_[d]); }
  // Tokens [begin, begin + count) as int32 (the bounds are checked).
  void copy(int64_t begin, int64_t count, int32_t* out) const;

 private:
  TokenFile() = default;
  uint32_t raw_token(int64_t i) const;
  struct Unmap {  // the file's mapping, `bytes` long
    size_t bytes;
    void operator()(void* map) const;
  };
  std::string path_;
  std::unique_ptr<void, Unmap> map_;
  const unsigned char* data_ = nullptr;  // the first token
  const uint64_t* ends_ = nullptr;
  int64_t vocab_ = 0, tokens_ = 0, documents_ = 0;
  uint64_t tokenizer_hash_ = 0;
  int width_ = 2;
};

// Writes a token file document by document (tokens streamed to disk, the
// index kept in memory until finish()).
class TokenFileWriter {
 public:
  TokenFileWriter(const std::string& path, int64_t vocab, uint64_t tokenizer_hash);
  ~TokenFileWriter();  // an unfinished file is removed
  TokenFileWriter(const TokenFileWriter&) = delete;
  TokenFileWriter& operator=(const TokenFileWriter&) = delete;
  // Appends one document; throws if it is empty or holds an id >= vocab
  // (`source` names where it came from, for the message).
  void add_document(const std::vector<int32_t>& tokens, const std::string& source);
  // Writes the index and the header and moves the file into place.
  void finish();
  int64_t tokens() const { return tokens_; }
  int64_t documents() const { return static_cast<int64_t>(ends_.size()); }

 private:
  void write(const void* bytes, size_t n);
  std::string path_, partial_;
  std::FILE* file_ = nullptr;
  int64_t vocab_ = 0, tokens_ = 0;
  uint64_t tokenizer_hash_ = 0;
  int width_ = 2;
  std::vector<uint64_t> ends_;
};

}  // namespace tessel
