// Bring your own text: documents from plain text files and directories
// (docs/data.md).
//
// Each input is a file or a directory (read recursively, files in sorted
// path order; hidden entries, symbolic links and binary files, those with a
// NUL byte in their first 8 KiB, skipped: a directory such as Debian's
// fortunes holds .dat indexes and .u8 links beside its text). Without a separator a file is
// one document; with separator S, lines holding only S (a trailing '\r'
// tolerated; S "" means a blank line) separate documents, as `%` separates
// fortunes. Documents that are empty or only whitespace are dropped. Every
// path is checked before any is read: a missing path, an unreadable file,
// or no documents at all is an Error naming the path.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tessel {

// The whole file; throws naming it if it cannot be read.
std::string read_text_file(const std::string& path);
// Empty or only whitespace.
bool is_blank_text(std::string_view text);

// The files the inputs name, in the order their documents are read; the
// files of directories skipped go to `skipped` (if given).
std::vector<std::string> list_text_files(const std::vector<std::string>& inputs,
                                         std::vector<std::string>* skipped = nullptr);

// Calls `document(text, source)` for every document of `files` in order
// (source: "FILE" or "FILE (document K)"). Returns how many there were;
// throws if none.
int64_t for_each_document(
    const std::vector<std::string>& files, const std::optional<std::string>& separator,
    const std::function<void(std::string_view text, const std::string& source)>& document);

}  // namespace tessel
