// tessel.Builder: GraphBuilder with named dims from Python.
//
// Values are the graph's integer ids, as in C++. Every method adds one node
// and checks its shape at once, so a wrong dim name or size raises
// tessel.Error naming the op, its label and the dims. `with b.scope("attn"):`
// prefixes labels and parameter names like GraphBuilder::Scope.
#include <pybind11/stl.h>

#include <memory>

#include "bindings.h"
#include "tessel/base/error.h"

namespace tessel::python {

PyBuilder::PyBuilder()
    : graph(std::make_shared<Graph>()),
      owned(std::make_shared<GraphBuilder>(*graph)),
      builder(owned.get()) {}

PyBuilder::PyBuilder(GraphBuilder& lent) : builder(&lent) {}

GraphBuilder& PyBuilder::get() const {
  if (!*alive)
    TS_THROW("this Builder was lent to a model function that has returned; build only inside it");
  return *builder;
}

namespace {

// A `with` block around GraphBuilder::Scope (Python guarantees LIFO exits).
struct PyScope {
  std::shared_ptr<PyBuilder> builder;
  std::string name;
  std::unique_ptr<GraphBuilder::Scope> scope;
};

ParamInit to_init(const std::string& kind, float stddev) {
  if (kind == "normal") return ParamInit{ParamInit::kNormal, stddev};
  if (kind == "zeros") return ParamInit{ParamInit::kZeros, stddev};
  if (kind == "ones") return ParamInit{ParamInit::kOnes, stddev};
  TS_THROW("param init must be \"normal\", \"zeros\" or \"ones\", got \"", kind, "\"");
}

using B = PyBuilder;
using Cls = py::class_<B, std::shared_ptr<B>>;

// GraphBuilder's method Fn as a Python method with the same parameters:
// call(b, args...) is b.get().*Fn(args...).
template <auto Fn>
struct Forward;
template <class R, class... A, R (GraphBuilder::*Fn)(A...)>
struct Forward<Fn> {
  static R call(const B& b, A... a) { return (b.get().*Fn)(std::forward<A>(a)...); }
};

// Binds a unary op `fn(x, name)`.
template <auto Fn>
void unary(Cls& c, const char* op) {
  c.def(op, &Forward<Fn>::call, py::arg("x"), py::arg("name") = op);
}

template <auto Fn>
void binary(Cls& c, const char* op, const char* label) {
  c.def(op, &Forward<Fn>::call, py::arg("a"), py::arg("b"), py::arg("name") = label);
}

template <auto Fn>
void reduce(Cls& c, const char* op, const char* label) {
  c.def(op, &Forward<Fn>::call, py::arg("x"), py::arg("dims"), py::arg("name") = label);
}

// The elementwise maps, and the Llama family's row ops.
void bind_maps_and_llama_ops(Cls& c) {
  unary<&GraphBuilder::gelu>(c, "gelu");
  unary<&GraphBuilder::relu>(c, "relu");
  unary<&GraphBuilder::exp>(c, "exp");
  unary<&GraphBuilder::log>(c, "log");
  unary<&GraphBuilder::tanh>(c, "tanh");
  unary<&GraphBuilder::silu>(c, "silu");
  unary<&GraphBuilder::sigmoid>(c, "sigmoid");
  unary<&GraphBuilder::sqrt>(c, "sqrt");
  unary<&GraphBuilder::rsqrt>(c, "rsqrt");
  c.def("rmsnorm", &Forward<&GraphBuilder::rmsnorm>::call, py::arg("x"), py::arg("gamma"),
        py::arg("dim"), py::arg("eps") = 1e-5f, py::arg("name") = "rmsnorm",
        "x / sqrt(mean(x^2 over dim) + eps) * gamma (dim last).");
  c.def(
      "rotary",
      [](const B& b, ValueId x, const std::string& dim, const std::string& position_dim,
         float theta, const std::string& name, double factor, double low, double high,
         double context) {
        return b.get().rotary(x, dim, position_dim, theta,
                              RotaryScaling{factor, low, high, context}, name);
      },
      py::arg("x"), py::arg("dim"), py::arg("position_dim"), py::arg("theta") = 10000.0f,
      py::arg("name") = "rotary", py::arg("scale_factor") = 0.0, py::arg("low_freq_factor") = 1.0,
      py::arg("high_freq_factor") = 4.0, py::arg("original_context") = 8192.0,
      "Rotary positions: pairs (2i, 2i+1) of dim (last, even) turned by "
      "pos * theta^(-2i/size(dim)), pos the index along position_dim; scale_factor > 0 "
      "rescales the frequencies as Llama 3.1.");
}

// Shape changes (expand, split, merge, rename) and the neural-network ops
// with dims of their own (softmax, layernorm, embedding, cross-entropy).
void bind_shape_and_nn_ops(Cls& c) {
  c.def(
       "expand",
       [](const B& b, ValueId x, const py::object& target, const std::string& name) {
         return b.get().expand(x, to_shape(target), name);
       },
       py::arg("x"), py::arg("target"), py::arg("name") = "expand")
      .def("softmax", &Forward<&GraphBuilder::softmax>::call, py::arg("x"), py::arg("dim"),
           py::arg("scale") = 1.0f, py::arg("causal_query_dim") = "", py::arg("name") = "softmax",
           "Softmax of scale*x over dim; with causal_query_dim, later keys are masked.")
      .def("layernorm", &Forward<&GraphBuilder::layernorm>::call, py::arg("x"), py::arg("gamma"),
           py::arg("beta"), py::arg("dim"), py::arg("eps") = 1e-5f, py::arg("name") = "layernorm")
      .def("embedding", &Forward<&GraphBuilder::embedding>::call, py::arg("table"), py::arg("ids"),
           py::arg("vocab_dim"), py::arg("name") = "embedding")
      .def("cross_entropy", &Forward<&GraphBuilder::cross_entropy>::call, py::arg("logits"),
           py::arg("labels"), py::arg("vocab_dim"), py::arg("name") = "cross_entropy",
           "Mean cross-entropy over every other dim (a scalar).")
      .def("linear_cross_entropy", &Forward<&GraphBuilder::linear_cross_entropy>::call,
           py::arg("h"), py::arg("w"), py::arg("labels"), py::arg("vocab_dim"),
           py::arg("embed_dim"), py::arg("name") = "linear_cross_entropy",
           "cross_entropy(einsum(h, w over embed_dim), labels) without storing the logits "
           "(docs/memory.md): the loss.")
      .def(
          "split_dim",
          [](const B& b, ValueId x, const std::string& dim, const py::object& parts,
             const std::string& name) { return b.get().split_dim(x, dim, to_shape(parts), name); },
          py::arg("x"), py::arg("dim"), py::arg("parts"), py::arg("name") = "split")
      .def("merge_dims", &Forward<&GraphBuilder::merge_dims>::call, py::arg("x"), py::arg("dims"),
           py::arg("merged"), py::arg("name") = "merge")
      .def("rename", &Forward<&GraphBuilder::rename>::call, py::arg("x"), py::arg("from_dim"),
           py::arg("to_dim"), py::arg("name") = "rename");
}

}  // namespace

void bind_graph(py::module_& m) {
  py::class_<PyScope>(m, "Scope")
      .def("__enter__",
           [](PyScope& s) -> PyScope& {
             s.scope = std::make_unique<GraphBuilder::Scope>(s.builder->get(), s.name);
             return s;
           })
      .def("__exit__", [](PyScope& s, py::args) {
        s.scope.reset();
        return false;
      });

  Cls c(m, "Builder", "Builds a graph with named dims (C++: GraphBuilder).");
  c.def(py::init<>(), "A builder over a new, empty graph.")
      .def(
          "scope",
          [](std::shared_ptr<B> b, const std::string& name) {
            return PyScope{std::move(b), name, nullptr};
          },
          py::arg("name"), "Labels of nodes added inside `with b.scope(name):` get 'name.' first.")
      .def("label", [](const B& b, const std::string& name) { return b.get().label(name); })
      .def(
          "shape", [](const B& b, ValueId v) { return from_shape(b.get().shape(v)); },
          py::arg("value"), "The value's shape: [(name, size), ...] in storage order.")
      .def(
          "dtype",
          [](const B& b, ValueId v) {
            return std::string(dtype_name(b.get().graph().node(v).dtype));
          },
          py::arg("value"))
      .def("__len__", [](const B& b) { return b.get().graph().size(); })
      .def(
          "graph_text", [](const B& b) { return b.get().graph().to_string(); },
          "One line per node, as `tessel inspect --graph` prints.")
      .def(
          "params",
          [](const B& b) {
            py::dict out;
            const Graph& g = b.get().graph();
            for (ValueId p : g.params()) out[py::str(g.node(p).name)] = from_shape(g.node(p).shape);
            return out;
          },
          "Parameter names and shapes, in the graph's order.")
      .def(
          "input",
          [](const B& b, const std::string& name, const py::object& shape,
             const std::string& dtype) {
            return b.get().input(name, to_shape(shape), to_dtype(dtype));
          },
          py::arg("name"), py::arg("shape"), py::arg("dtype") = "f32")
      .def(
          "param",
          [](const B& b, const std::string& name, const py::object& shape, const std::string& init,
             float stddev) { return b.get().param(name, to_shape(shape), to_init(init, stddev)); },
          py::arg("name"), py::arg("shape"), py::arg("init") = "normal", py::arg("stddev") = 0.02f,
          "A trained parameter; init 'normal' (stddev), 'zeros' or 'ones'.")
      .def(
          "fill",
          [](const B& b, const py::object& shape, float value) {
            return b.get().fill(to_shape(shape), value);
          },
          py::arg("shape"), py::arg("value"))
      .def("einsum", &Forward<&GraphBuilder::einsum>::call, py::arg("a"), py::arg("b"),
           py::arg("out_dims"), py::arg("name") = "einsum",
           "Contracts every dim in both operands that is absent from out_dims.")
      .def("scale", &Forward<&GraphBuilder::scale>::call, py::arg("x"), py::arg("alpha"),
           py::arg("name") = "scale")
      .def("bias_gelu", &Forward<&GraphBuilder::bias_gelu>::call, py::arg("x"), py::arg("bias"),
           py::arg("name") = "bias_gelu")
      .def(
          "dropout",
          [](const B& b, ValueId x, float p, uint64_t seed, const std::string& key) {
            return b.get().dropout(x, p, seed, key);
          },
          py::arg("x"), py::arg("p"), py::arg("seed"), py::arg("key"));
  bind_shape_and_nn_ops(c);
  binary<&GraphBuilder::add>(c, "add", "add");
  binary<&GraphBuilder::sub>(c, "sub", "sub");
  binary<&GraphBuilder::mul>(c, "mul", "mul");
  binary<&GraphBuilder::div>(c, "div", "div");
  bind_maps_and_llama_ops(c);
  reduce<&GraphBuilder::reduce_sum>(c, "reduce_sum", "sum");
  reduce<&GraphBuilder::reduce_mean>(c, "reduce_mean", "mean");
  reduce<&GraphBuilder::reduce_max>(c, "reduce_max", "max");
}

// Multi-output ops (ir/tuple.h), on the Builder bind_graph made: fused
// attention returns its output and log-sum-exp; tuple_get reads an element.
void bind_tuple_ops(py::module_& m) {
  auto c = py::reinterpret_borrow<Cls>(m.attr("Builder"));
  c.def(
       "attention",
       [](const B& b, ValueId q, ValueId k, ValueId v, const std::string& query,
          const std::string& key, const std::string& head, bool causal, float scale,
          const std::string& name, float dropout, uint64_t seed, const std::string& stream) {
         const GraphBuilder::Attention a = b.get().attention(q, k, v, query, key, head, causal,
                                                             scale, name, {dropout, seed, stream});
         return py::make_tuple(a.out, a.lse);
       },
       py::arg("q"), py::arg("k"), py::arg("v"), py::arg("query"), py::arg("key"), py::arg("head"),
       py::arg("causal"), py::arg("scale"), py::arg("name") = "attention",
       py::arg("dropout") = 0.0f, py::arg("seed") = 0, py::arg("stream") = "",
       "Fused softmax(scale * q.k over head) . v, causal if asked (docs/attention.md), the "
       "probabilities dropped out at rate `dropout` (0: none) on stream (seed, stream) as "
       "dropout() draws: returns (output, log-sum-exp).")
      .def("tuple_get", &Forward<&GraphBuilder::tuple_get>::call, py::arg("tuple"),
           py::arg("index"), py::arg("name") = "get");
}

}  // namespace tessel::python
