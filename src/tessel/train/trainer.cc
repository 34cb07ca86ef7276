#include "tessel/train/trainer.h"

#include <omp.h>

#include "tessel/autodiff/backward.h"
#include "tessel/base/error.h"

namespace tessel {

TrainingGraph build_training_graph(const TrainConfig& config, int64_t batch) {
  TrainingGraph t;
  GraphBuilder b(t.graph);
  t.outputs = build_model(config, b, batch, /*training=*/true);
  std::map<ValueId, ValueId> grads = build_backward(b, t.outputs.loss, t.graph.params());
  for (ValueId p : t.graph.params()) t.grads.push_back(grads.at(p));
  return t;
}

Trainer::Trainer(const TrainConfig& config) : config_(config) {
  config_.validate();
  if (config_.threads > 0) omp_set_num_threads(config_.threads);
  task_ = make_task(config_);

  TrainingGraph train = build_training_graph(config_, config_.batch);
  train_out_ = train.outputs;
  std::vector<ValueId> outputs = {train.outputs.loss};
  outputs.insert(outputs.end(), train.grads.begin(), train.grads.end());
  train_ = std::make_unique<Program>(train.graph, outputs);
  grad_of_param_ = train.grads;

  Graph eval_graph;
  GraphBuilder eb(eval_graph);
  eval_out_ = build_model(config_, eb, config_.batch, /*training=*/false);
  eval_ =
      std::make_unique<Program>(eval_graph, std::vector<ValueId>{eval_out_.loss, eval_out_.logits});

  params_ = std::make_unique<ParamStore>(train_->graph(), config_.seed);
  for (ParamEntry& e : params_->entries()) {
    train_->bind_param(e.name, e.value.f32());
    eval_->bind_param(e.name, e.value.f32());
  }
  for (ValueId g : grad_of_param_) grad_ptrs_.push_back(train_->f32(g));
}

StepResult Trainer::step() {
  task_->fill_batch(*train_, Split::kTrain, step_, config_.batch);
  train_->run();
  StepResult r;
  r.step = step_;
  r.loss = *train_->f32(train_out_.loss);
  UpdateStats u = apply_update(config_, *params_, grad_ptrs_, step_);
  r.grad_norm = u.grad_norm;
  r.lr = u.lr;
  ++step_;
  return r;
}

EvalResult Trainer::evaluate() {
  EvalResult r;
  double loss = 0, accuracy = 0;
  for (int64_t i = 0; i < config_.eval_batches; ++i) {
    task_->fill_batch(*eval_, Split::kVal, i, config_.batch);
    eval_->run();
    loss += *eval_->f32(eval_out_.loss);
    accuracy += task_->accuracy(*eval_, eval_out_.logits);
  }
  r.loss = loss / config_.eval_batches;
  r.accuracy = accuracy < 0 ? -1 : accuracy / config_.eval_batches;
  return r;
}

}  // namespace tessel
