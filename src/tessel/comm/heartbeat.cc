#include "tessel/comm/heartbeat.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace tessel {
namespace {

constexpr size_t kLabelBytes = 232;
constexpr size_t kHostBytes = 64;

size_t host_offset();  // of Slot::host, below

std::string host_name() {
  char name[kHostBytes] = {0};
  if (gethostname(name, sizeof(name) - 1) != 0) return "";
  return name;
}

std::string heartbeat_dir() {
  if (const char* dir = std::getenv("TESSEL_HEARTBEAT_DIR"); dir != nullptr && *dir != '\0')
    return dir;
  std::error_code ec;
  if (std::filesystem::is_directory("/dev/shm", ec) && access("/dev/shm", W_OK) == 0)
    return "/dev/shm";
  return "/tmp";
}

std::string slot_path(const std::string& job, int rank) {
  return heartbeat_dir() + "/tessel-heartbeat-" + job + "-rank" + std::to_string(rank);
}

// Removes heartbeat files whose owner process no longer exists (left by jobs
// that were aborted or killed). Only owners on this host can be checked: a
// file naming another host (a shared directory) is left alone.
void remove_dead_heartbeats(const std::string& dir) {
  std::error_code ec;
  const std::string here = host_name();
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with("tessel-heartbeat-")) continue;
    int fd = open(entry.path().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    int32_t pid = 0;
    char host[kHostBytes] = {0};
    const bool read_ok = pread(fd, &pid, sizeof(pid), 0) == static_cast<ssize_t>(sizeof(pid)) &&
                         pread(fd, host, sizeof(host), static_cast<off_t>(host_offset())) ==
                             static_cast<ssize_t>(sizeof(host));
    close(fd);
    host[kHostBytes - 1] = '\0';
    if (read_ok && here == host && pid > 0 && kill(pid, 0) != 0 && errno == ESRCH)
      unlink(entry.path().c_str());
  }
}

}  // namespace

// The file's layout. Fields are written by the owning rank only; readers may
// see a label mid-update (it is a diagnostic, and always NUL-terminated).
struct Heartbeat::Slot {
  std::atomic<int32_t> pid;  // the owner (for removing files of dead processes)
  std::atomic<int32_t> state;
  std::atomic<uint64_t> seq;
  std::atomic<double> since_s;
  std::atomic<double> alive_s;
  char what[kLabelBytes];
  char host[kHostBytes];  // the owner's host
  std::atomic<uint64_t> beats;
};

namespace {
size_t host_offset() { return offsetof(Heartbeat::Slot, host); }

// A new slot's owner fields: this process on this host, alive and running now.
void claim(Heartbeat::Slot* slot) {
  slot->since_s.store(Heartbeat::now_s());
  slot->alive_s.store(Heartbeat::now_s());
  slot->pid.store(static_cast<int32_t>(getpid()));
  const std::string host = host_name();
  std::memcpy(slot->host, host.data(), std::min(host.size(), kHostBytes - 1));
}
}  // namespace

double Heartbeat::now_s() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

std::string heartbeat_job_key() {
  for (const char* var : {"PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", "SLURM_JOB_ID"})
    if (const char* v = std::getenv(var); v != nullptr && *v != '\0') return v;
  return "local-" + std::to_string(getppid());
}

Heartbeat::Mode heartbeat_mode(int world_size) {
  if (const char* v = std::getenv("TESSEL_HEARTBEAT_SHARED"); v != nullptr && *v != '\0')
    return std::string(v) == "0" ? Heartbeat::Mode::kLocal : Heartbeat::Mode::kShared;
  if (const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE"); local != nullptr)
    if (std::atoi(local) < world_size) return Heartbeat::Mode::kShared;
  return Heartbeat::Mode::kLocal;
}

std::unique_ptr<Heartbeat> Heartbeat::create(const std::string& job, int rank, Mode mode) {
  static_assert(offsetof(Slot, pid) == 0, "remove_dead_heartbeats reads the pid at offset 0");
  std::error_code ec;
  std::filesystem::create_directories(heartbeat_dir(), ec);
  remove_dead_heartbeats(heartbeat_dir());
  std::string path = slot_path(job, rank);
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return nullptr;
  if (mode == Mode::kShared) {  // the slot in memory, the file written at every beat
    Slot* slot = new Slot();
    claim(slot);
    std::unique_ptr<Heartbeat> hb(new Heartbeat(job, std::move(path), slot, mode, fd));
    hb->beat();
    return hb;
  }
  if (ftruncate(fd, sizeof(Slot)) != 0) {
    close(fd);
    unlink(path.c_str());
    return nullptr;
  }
  void* mem = mmap(nullptr, sizeof(Slot), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (mem == MAP_FAILED) {
    unlink(path.c_str());
    return nullptr;
  }
  Slot* slot = new (mem) Slot;  // zero-filled by ftruncate
  claim(slot);
  return std::unique_ptr<Heartbeat>(new Heartbeat(job, std::move(path), slot, mode, -1));
}

Heartbeat::Heartbeat(std::string job, std::string path, Slot* slot, Mode mode, int fd)
    : job_(std::move(job)), path_(std::move(path)), slot_(slot), mode_(mode), fd_(fd) {}

Heartbeat::~Heartbeat() {
  if (mode_ == Mode::kShared) {
    delete slot_;
    close(fd_);
  } else {
    munmap(slot_, sizeof(Slot));
  }
  unlink(path_.c_str());
}

namespace {
void set_label(char* dst, const std::string& what) {
  size_t n = std::min(what.size(), kLabelBytes - 1);
  std::memcpy(dst, what.data(), n);
  dst[n] = '\0';
}

// The slot's label, up to its last byte (a reader may see it mid-update).
std::string label_of(const Heartbeat::Slot& s) {
  return {s.what, strnlen(s.what, kLabelBytes - 1)};
}
}  // namespace

void Heartbeat::begin_blocking(const std::string& what) {
  if (io_depth_ > 0) return;  // inside I/O: stay "in I/O"
  set_label(slot_->what, what);
  slot_->seq.fetch_add(1, std::memory_order_relaxed);
  slot_->since_s.store(now_s(), std::memory_order_relaxed);
  slot_->state.store(static_cast<int32_t>(State::kBlocked), std::memory_order_release);
}

void Heartbeat::end_blocking() {
  if (io_depth_ > 0) return;
  slot_->since_s.store(now_s(), std::memory_order_relaxed);
  slot_->state.store(static_cast<int32_t>(State::kRunning), std::memory_order_release);
}

void Heartbeat::begin_io(const std::string& what) {
  if (io_depth_++ > 0) return;
  set_label(slot_->what, what);
  slot_->since_s.store(now_s(), std::memory_order_relaxed);
  slot_->state.store(static_cast<int32_t>(State::kIo), std::memory_order_release);
}

void Heartbeat::end_io() {
  if (io_depth_ == 0 || --io_depth_ > 0) return;
  slot_->since_s.store(now_s(), std::memory_order_relaxed);
  slot_->state.store(static_cast<int32_t>(State::kRunning), std::memory_order_release);
}

void Heartbeat::beat() {
  slot_->alive_s.store(now_s(), std::memory_order_relaxed);
  slot_->beats.fetch_add(1, std::memory_order_relaxed);
  if (mode_ != Mode::kShared) return;
  // One write of the whole slot (a reader may see a label mid-update: it is
  // a diagnostic, and always NUL-terminated when read).
  if (pwrite(fd_, slot_, sizeof(Slot), 0) != static_cast<ssize_t>(sizeof(Slot))) {
    // Peers will see this rank as not beating; nothing better to do here.
  }
}

Heartbeat::View Heartbeat::read(int rank) const {
  View view;
  int fd = open(slot_path(job_, rank).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return view;
  if (mode_ == Mode::kShared) {
    // A copy of the file, read fresh; ages by this reader's clock.
    alignas(Slot) unsigned char bytes[sizeof(Slot)];
    const bool ok = pread(fd, bytes, sizeof(Slot), 0) == static_cast<ssize_t>(sizeof(Slot));
    close(fd);
    if (!ok) return view;
    const Slot* s = reinterpret_cast<const Slot*>(bytes);
    const double now = now_s();
    const uint64_t beats = s->beats.load(std::memory_order_relaxed);
    const uint64_t seq = s->seq.load(std::memory_order_relaxed);
    const int32_t state = s->state.load(std::memory_order_relaxed);
    Seen& seen = seen_[rank];
    if (seen.state < 0 || beats != seen.beats) seen.beats = beats, seen.beats_since = now;
    if (seen.state < 0 || seq != seen.seq || state != seen.state)
      seen.seq = seq, seen.state = state, seen.state_since = now;
    view.visible = true;
    view.state = static_cast<State>(state);
    view.seq = seq;
    view.state_age_s = now - seen.state_since;
    view.alive_age_s = now - seen.beats_since;
    view.what = label_of(*s);
    return view;
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) < sizeof(Slot)) {
    close(fd);
    return view;
  }
  void* mem = mmap(nullptr, sizeof(Slot), PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  if (mem == MAP_FAILED) return view;
  const Slot* s = static_cast<const Slot*>(mem);
  const double now = now_s();
  view.visible = true;
  view.state = static_cast<State>(s->state.load(std::memory_order_acquire));
  view.seq = s->seq.load(std::memory_order_relaxed);
  view.state_age_s = now - s->since_s.load(std::memory_order_relaxed);
  view.alive_age_s = now - s->alive_s.load(std::memory_order_relaxed);
  view.what = label_of(*s);
  munmap(mem, sizeof(Slot));
  return view;
}

}  // namespace tessel
