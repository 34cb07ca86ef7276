#include "tessel/train/data/text_documents.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "tessel/base/error.h"

namespace tessel {
namespace {

namespace fs = std::filesystem;

bool hidden(const fs::path& p) {
  const std::string name = p.filename().string();
  return !name.empty() && name[0] == '.';
}

// A NUL byte in the first 8 KiB: not text.
bool looks_binary(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char head[8192];
  in.read(head, sizeof head);
  return std::string_view(head, static_cast<size_t>(in.gcount())).find('\0') !=
         std::string_view::npos;
}

}  // namespace

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) TS_THROW("cannot open text file '", path, "' for reading");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) TS_THROW("error while reading text file '", path, "'");
  return text;
}

bool is_blank_text(std::string_view text) {
  return text.find_first_not_of(" \t\n\r\f\v") == std::string_view::npos;
}

std::vector<std::string> list_text_files(const std::vector<std::string>& inputs,
                                         std::vector<std::string>* skipped) {
  if (inputs.empty()) TS_THROW("no text inputs given (files or directories)");
  std::vector<std::string> files;
  for (const std::string& input : inputs) {
    std::error_code ec;
    if (fs::is_regular_file(input, ec)) {
      if (looks_binary(input))
        TS_THROW("text input '", input, "' is a binary file (it holds NUL bytes), not text");
      files.push_back(input);
      continue;
    }
    if (!fs::is_directory(input, ec))
      TS_THROW(
          "text input '", input, "' ",
          fs::exists(input, ec) ? "is neither a regular file nor a directory" : "does not exist");
    std::vector<std::string> found;
    auto options = fs::directory_options::skip_permission_denied;
    for (fs::recursive_directory_iterator it(input, options, ec), end; !ec && it != end;
         it.increment(ec)) {
      if (hidden(it->path())) {
        if (it->is_directory(ec)) it.disable_recursion_pending();
        continue;
      }
      const bool link = it->is_symlink(ec);
      if (!link && !it->is_regular_file(ec)) continue;  // directories, devices, ...
      if (link || looks_binary(it->path().string())) {
        if (skipped) skipped->push_back(it->path().string());
        continue;
      }
      found.push_back(it->path().string());
    }
    if (ec) TS_THROW("cannot list text directory '", input, "': ", ec.message());
    if (found.empty())
      TS_THROW("text directory '", input,
               "' holds no text files (hidden files, links and binary files are skipped)");
    std::sort(found.begin(), found.end());
    files.insert(files.end(), found.begin(), found.end());
  }
  return files;
}

int64_t for_each_document(
    const std::vector<std::string>& files, const std::optional<std::string>& separator,
    const std::function<void(std::string_view text, const std::string& source)>& document) {
  int64_t count = 0;
  for (const std::string& path : files) {
    const std::string text = read_text_file(path);
    if (!separator) {
      if (!is_blank_text(text)) document(text, path), ++count;
      continue;
    }
    // Documents between separator lines; each keeps its lines' newlines.
    size_t begin = 0, pos = 0;
    int64_t k = 0;
    auto emit = [&](size_t end) {
      std::string_view doc(text.data() + begin, end - begin);
      if (!is_blank_text(doc))
        document(doc, path + " (document " + std::to_string(++k) + ")"), ++count;
    };
    while (pos < text.size()) {
      size_t end = text.find('\n', pos);
      const size_t next = end == std::string::npos ? text.size() : end + 1;
      if (end == std::string::npos) end = text.size();
      std::string_view line(text.data() + pos, end - pos);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (line == *separator) {
        emit(pos);
        begin = next;
      }
      pos = next;
    }
    emit(text.size());
  }
  if (count == 0)
    TS_THROW("no documents in ", files.size() == 1 ? "'" + files[0] + "'" : "the text files given",
             " (every one empty or whitespace", separator ? " between separators" : "", ")");
  return count;
}

}  // namespace tessel
