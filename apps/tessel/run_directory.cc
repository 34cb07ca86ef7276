#include "run_directory.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "tessel/base/error.h"

namespace tessel::cli {
namespace fs = std::filesystem;
namespace {

std::string errno_text() { return std::strerror(errno); }

// Creates `path` (and removes it again unless it existed), or throws naming it.
void check_creatable(const std::string& path, const std::string& what) {
  std::error_code ec;
  const bool existed = fs::exists(path, ec);
  if (existed && fs::is_directory(path, ec))
    TS_THROW(what, " '", path, "' is a directory, not a file");
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) TS_THROW("cannot write ", what, " '", path, "': ", errno_text());
  ::close(fd);
  if (!existed) ::unlink(path.c_str());
}

void remove_stale_temporaries(const fs::path& out) {
  const fs::path checkpoint = out / "checkpoint";
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(out, ec)) {
    const std::string name = e.path().filename().string();
    const bool tmp = name.starts_with("checkpoint.tmp-");
    const bool old = name.starts_with("checkpoint.old-");
    if (!tmp && !old) continue;
    // An interrupted two-step swap (older builds) may have left the last
    // complete checkpoint only under .old-*: put it back.
    if (old && !fs::exists(checkpoint) && fs::exists(e.path() / "manifest.json")) {
      fs::rename(e.path(), checkpoint);
      std::fprintf(stderr, "tessel train: restored '%s' from an interrupted save ('%s')\n",
                   checkpoint.c_str(), e.path().c_str());
      continue;
    }
    fs::remove_all(e.path(), ec);
    if (ec) TS_THROW("cannot remove the stale temporary '", e.path().string(), "': ", ec.message());
    std::fprintf(stderr, "tessel train: removed '%s', left by an interrupted save\n",
                 e.path().c_str());
  }
}

}  // namespace

int launcher_rank() {
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"})
    if (const char* v = std::getenv(var); v != nullptr && *v != '\0') return std::atoi(v);
  return 0;
}

RunDirectory::RunDirectory(const RunDirectoryOptions& opt) {
  if (launcher_rank() != 0) return;
  if (opt.out.empty()) TS_THROW("--out must name a directory");
  const fs::path out(opt.out);
  std::error_code ec;
  if (fs::exists(out, ec) && !fs::is_directory(out, ec))
    TS_THROW("--out '", opt.out, "' exists and is not a directory");
  fs::create_directories(out, ec);
  if (ec) TS_THROW("cannot create the output directory --out '", opt.out, "': ", ec.message());

  const std::string lock_path = (out / ".lock").string();
  lock_fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd_ < 0)
    TS_THROW("cannot write in --out '", opt.out, "': ", lock_path, ": ", errno_text());
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    char holder[32] = {0};
    ssize_t n = ::pread(lock_fd_, holder, sizeof(holder) - 1, 0);
    ::close(lock_fd_);
    lock_fd_ = -1;
    TS_THROW("--out '", opt.out, "' is in use by another run",
             n > 0 ? str_cat(" (pid ", std::string(holder, static_cast<size_t>(n)), ")") : "",
             "; give each run its own --out");
  }
  const std::string pid = std::to_string(getpid());
  if (::ftruncate(lock_fd_, 0) != 0 || ::pwrite(lock_fd_, pid.data(), pid.size(), 0) < 0)
    TS_THROW("cannot write '", lock_path, "': ", errno_text());

  const fs::path metrics = out / "metrics.jsonl", checkpoint = out / "checkpoint";
  const bool has_run = fs::exists(metrics) || fs::exists(checkpoint);
  if (has_run && !opt.resume) {
    if (!opt.overwrite)
      TS_THROW("--out '", opt.out, "' already holds a run (",
               fs::exists(checkpoint) ? "checkpoint/" : "metrics.jsonl",
               "); pass --overwrite to replace it, or choose another --out");
    for (const fs::path& p : {metrics, checkpoint, out / "summary.json"}) {
      fs::remove_all(p, ec);
      if (ec) TS_THROW("--overwrite: cannot remove '", p.string(), "': ", ec.message());
    }
  }
  remove_stale_temporaries(out);
  check_creatable((out / "metrics.jsonl").string(), "metrics file");
  if (!opt.trace.empty()) check_creatable(opt.trace, "--trace file");
}

RunDirectory::~RunDirectory() {
  if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the flock
}

}  // namespace tessel::cli
