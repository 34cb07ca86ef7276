#include "tessel/plan/calibrate/calibrate_links.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tessel/base/error.h"
#include "tessel/comm/mpi/mpi_runtime.h"
#include "tessel/plan/calibrate/calibrate_corun.h"
#include "tessel/plan/calibrate/calibrate_progress.h"
#include "tessel/plan/calibrate/collective_timing.h"

namespace tessel::plan {
namespace {

namespace fs = std::filesystem;

std::string quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

int iterations_for(int64_t bytes, bool quick) {
  const int n = bytes <= (64 << 10) ? 20 : bytes <= (1 << 20) ? 10 : 5;
  return quick ? (n + 1) / 2 : n;
}

}  // namespace

LinkCalibration measure_links(const std::string& tessel_binary, int ranks, bool quick) {
  TS_CHECK(ranks >= 2, "ranks ", ranks);
  const char* mpirun_env = std::getenv("TESSEL_MPIRUN");
  const std::string mpirun = mpirun_env && *mpirun_env ? mpirun_env : "mpirun";
  const fs::path base =
      fs::temp_directory_path() /
      ("tessel-calibrate-" + std::to_string(getpid()) + "-" + std::to_string(ranks));
  const std::string out = base.string() + ".json", log = base.string() + ".log";
  // Defaults for the launched job only (this process's environment is left
  // alone); a value already set wins.
  std::string cmd;
  for (const char* kv : {"OMPI_MCA_btl=self,vader", "OMPI_MCA_mpi_yield_when_idle=1",
                         "OMPI_MCA_btl_vader_single_copy_mechanism=none", "OMP_NUM_THREADS=1"}) {
    const std::string s(kv);
    const size_t eq = s.find('=');
    cmd += s.substr(0, eq) + "=\"${" + s.substr(0, eq) + ":-" + s.substr(eq + 1) + "}\" ";
  }
  cmd += quoted(mpirun) + (geteuid() == 0 ? " --allow-run-as-root" : "") + " --oversubscribe -n " +
         std::to_string(ranks) + " " + quoted(tessel_binary) + " calibrate --collectives-out " +
         quoted(out) + (quick ? " --quick" : "") + " >" + quoted(log) + " 2>&1";
  const int status = std::system(cmd.c_str());
  std::stringstream log_text;
  log_text << std::ifstream(log).rdbuf();
  fs::remove(log);
  if (status != 0 || !fs::exists(out)) {
    fs::remove(out);
    TS_THROW("calibrate: measuring collectives on ", ranks, " ranks failed (`", cmd,
             "` exited with status ", status, "):\n", log_text.str());
  }
  const nlohmann::json j = nlohmann::json::parse(std::ifstream(out));
  fs::remove(out);
  if (!j.is_object() || !j.contains("links") || !j["links"].is_array())
    TS_THROW("calibrate: ", out, " is not an object with a 'links' array");
  LinkCalibration result;
  for (size_t i = 0; i < j["links"].size(); ++i)
    result.links.push_back(link_fit_from_json(j["links"][i], out, str_cat("links[", i, "]")));
  if (j.contains("progress")) {
    result.has_progress = true;
    result.progress = progress_from_json(j["progress"], out, "progress");
  }
  if (j.contains("co_run")) {
    result.has_co_run = true;
    result.co_run = co_run_from_json(j["co_run"], out, "co_run");
  }
  return result;
}

void measure_links_on_world(const std::string& out_path, bool quick) {
  MpiRuntime& mpi = MpiRuntime::instance();
  mpi.init(nullptr, nullptr);
  auto world = mpi.world("calibrate");
  const int p = world->size();
  if (p < 2) TS_THROW("calibrate --collectives-out needs at least 2 ranks under mpirun, got ", p);
  const std::vector<int64_t> sizes =
      quick ? std::vector<int64_t>{4 << 10, 256 << 10, 4 << 20}
            : std::vector<int64_t>{4 << 10, 64 << 10, 1 << 20, 8 << 20};
  const int64_t max_floats = sizes.back() / 4 * p;  // all-gather's output
  std::vector<float> in(max_floats, 1.0f), out(max_floats, 0.0f);
  auto barrier = [&] { mpi.barrier(); };
  nlohmann::json fits = nlohmann::json::array();
  for (CollectiveKind kind : {CollectiveKind::kAllReduce, CollectiveKind::kAllGather,
                              CollectiveKind::kReduceScatter, CollectiveKind::kAllToAll}) {
    LinkFit fit{collective_name(kind), p, Link::kIntraNode, {}, {}};
    for (int64_t bytes : sizes) {
      // The payload in HardwareModel's convention: all-gather's is one shard.
      const int64_t floats = kind == CollectiveKind::kAllGather ? bytes / 4 / p : bytes / 4;
      const double t = median_seconds(barrier, iterations_for(bytes, quick), [&] {
        run_collective(*world, kind, in.data(), out.data(), floats);
      });
      fit.samples.emplace_back(double(floats) * 4, t);
    }
    fit.fit = fit_alpha_beta(fit.samples);
    fits.push_back(link_fit_to_json(fit));
  }
  // Ping-pong between ranks 0 and 1, on the 2-rank launch only (one
  // send/recv entry per profile).
  if (p == 2) {
    LinkFit p2p{"send_recv", 2, Link::kIntraNode, {}, {}};
    const int rank = world->rank();
    for (int64_t bytes : sizes) {
      const int64_t floats = bytes / 4;
      int tag = 0;
      const double round_trip = median_seconds(barrier, iterations_for(bytes, quick), [&] {
        ++tag;
        if (rank == 0) {
          world->start_send(in.data(), floats, 1, tag, "calibrate")->wait();
          world->recv(out.data(), floats, 1, tag, "calibrate");
        } else if (rank == 1) {
          world->recv(out.data(), floats, 0, tag, "calibrate");
          world->start_send(in.data(), floats, 0, tag, "calibrate")->wait();
        }
      });
      p2p.samples.emplace_back(double(bytes), round_trip / 2);
    }
    p2p.fit = fit_alpha_beta(p2p.samples);
    fits.push_back(link_fit_to_json(p2p));
  }
  nlohmann::json result = {{"links", fits}};
  // How far a non-blocking all-reduce and a send get while the ranks
  // compute and poll (2-rank launch only).
  if (p == 2) result["progress"] = progress_to_json(measure_progress(*world, barrier, quick));
  // How much slower a rank's training program runs beside a busy rank.
  if (p == 2) result["co_run"] = co_run_to_json(measure_co_run(*world, barrier, quick));
  if (mpi.world_rank() == 0) {
    std::ofstream file(out_path);
    file << result.dump(2) << "\n";
    if (!file) TS_THROW("calibrate: cannot write ", out_path);
  }
  mpi.barrier();
}

}  // namespace tessel::plan
