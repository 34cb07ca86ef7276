// `tessel export --format hf CKPT --out DIR` and `tessel import --format hf
// DIR --out CKPT`: Llama checkpoints in Hugging Face's layout
// (train/checkpoint/hf_llama.h). The import writes a checkpoint at step 0
// that `tessel train --config CKPT/tessel_config.json --resume CKPT`
// continues from.
#include <cstdio>
#include <memory>
#include <string>

#include "commands.h"
#include "tessel/base/error.h"
#include "tessel/train/checkpoint/hf_llama.h"

namespace tessel::cli {
namespace {

struct ConvertOptions {
  std::string format = "hf", from, out;
};

CLI::App* add_convert(CLI::App& app, const char* name, const char* what, const char* from_help,
                      ConvertOptions& opt) {
  CLI::App* sub = app.add_subcommand(name, what);
  sub->add_option("--format", opt.format, "the other tool's layout: hf (Hugging Face)")
      ->check(CLI::IsMember({"hf"}));
  sub->add_option("from", opt.from, from_help)->required();
  sub->add_option("--out", opt.out, "the directory to write")->required();
  return sub;
}

}  // namespace

Command add_export_command(CLI::App& app) {
  auto opt = std::make_shared<ConvertOptions>();
  CLI::App* sub = add_convert(app, "export", "write a llama checkpoint as Hugging Face's layout",
                              "the Tessel checkpoint directory", *opt);
  return {sub, [opt] {
            export_hf_llama(opt->from, opt->out);
            std::printf("exported %s to %s (LlamaForCausalLM)\n", opt->from.c_str(),
                        opt->out.c_str());
            return 0;
          }};
}

Command add_import_command(CLI::App& app) {
  auto opt = std::make_shared<ConvertOptions>();
  CLI::App* sub = add_convert(app, "import", "read a Hugging Face Llama into a Tessel checkpoint",
                              "the Hugging Face directory (config.json, *.safetensors)", *opt);
  return {sub, [opt] {
            import_hf_llama(opt->from, opt->out, TrainConfig{});
            std::printf(
                "imported %s to %s (step 0); continue with: tessel train --config "
                "%s/tessel_config.json --resume %s\n",
                opt->from.c_str(), opt->out.c_str(), opt->out.c_str(), opt->out.c_str());
            return 0;
          }};
}

}  // namespace tessel::cli
