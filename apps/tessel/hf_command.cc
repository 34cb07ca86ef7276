// `tessel export --format hf CKPT --out DIR` and `tessel import --format hf
// DIR --out CKPT`: Llama checkpoints in Hugging Face's layout
// (train/checkpoint/hf_llama.h).
#include <cstdio>
#include <memory>
#include <string>

#include "commands.h"
#include "tessel/train/checkpoint/hf_llama.h"

namespace tessel::cli {
namespace {

struct ConvertOptions {
  std::string format = "hf", from, out;
};

Command add_convert(CLI::App& app, bool to_hf) {
  auto opt = std::make_shared<ConvertOptions>();
  CLI::App* sub = app.add_subcommand(to_hf ? "export" : "import",
                                     to_hf ? "write a llama checkpoint as Hugging Face's layout"
                                           : "read a Hugging Face Llama into a Tessel checkpoint");
  sub->add_option("--format", opt->format, "the other tool's layout: hf (Hugging Face)")
      ->check(CLI::IsMember({"hf"}));
  // export also takes --checkpoint, as sample and eval do
  sub->add_option(to_hf ? "from,--checkpoint" : "from", opt->from,
                  to_hf ? "the Tessel checkpoint"
                        : "the Hugging Face directory (config.json, model.safetensors)")
      ->required();
  sub->add_option("--out", opt->out, "the directory to write")->required();
  return {sub, [opt, to_hf] {
            const char* from = opt->from.c_str();
            const char* out = opt->out.c_str();
            if (to_hf) {
              export_hf_llama(opt->from, opt->out);
              std::printf("exported %s to %s (LlamaForCausalLM)\n", from, out);
            } else {
              import_hf_llama(opt->from, opt->out, TrainConfig{});
              std::printf(
                  "imported %s to %s (step 0); continue with: tessel train --config "
                  "%s/tessel_config.json --resume %s\n",
                  from, out, out, out);
            }
            return 0;
          }};
}

}  // namespace

Command add_export_command(CLI::App& app) { return add_convert(app, true); }
Command add_import_command(CLI::App& app) { return add_convert(app, false); }

}  // namespace tessel::cli
