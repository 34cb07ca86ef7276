// Tessel's public API for model writers, in one include (docs/library.md).
//
// What is here is the stable surface: build a model with named dims
// (GraphBuilder, Shape/Dim, parameters and their initialisation, the op
// set), register it under a name with the data that feeds it and its own
// config keys (register_model, ModelSpec, DataKind, model_option), read a
// config (TrainConfig), describe a mesh and a layout (Mesh, Layout), and
// train or evaluate it in-process (Trainer: step, evaluate, checkpoints).
// Errors are tessel::Error, naming the dim, axis, key or file. The whole
// command line for a program with its own models is tessel::run_cli in
// <tessel/run_cli.h> (target Tessel::cli). The other installed headers are
// internal: they may change between 0.x versions.
#pragma once

#include "tessel/base/error.h"
#include "tessel/base/shape.h"
#include "tessel/compile/config.h"
#include "tessel/compile/model_registry.h"
#include "tessel/ir/builder.h"
#include "tessel/sharding/layout.h"
#include "tessel/sharding/mesh.h"
#include "tessel/train/trainer.h"
