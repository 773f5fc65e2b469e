// Small helpers for building and inspecting test models.
//
// Graphs are written as ONNX text (onnx::OnnxParser); weights are then added through the proto API with
// seeded random values, so every test states its graph literally and its numbers reproducibly.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "core/reference.h"
#include "tests/support/naive_executor.h"

namespace dwdeconv::test {

// Parses ONNX text into a model; throws std::runtime_error with the parser's message on failure.
onnx::ModelProto parse_model(const std::string& text);

// Seeded uniform values in [-1, 1).
std::vector<double> random_values(size_t count, uint32_t seed);

// A seeded random NCHW tensor with values in [-1, 1).
core::Tensor4 random_tensor4(int64_t n, int64_t c, int64_t h, int64_t w, uint32_t seed);

// Adds (or replaces) initializer `name` in `graph`: seeded random values of `data_type`, stored as raw_data
// when `raw`, else in the type's typed field.
onnx::TensorProto& set_random_initializer(onnx::GraphProto& graph, const std::string& name, int32_t data_type,
                                          const std::vector<int64_t>& dims, uint32_t seed, bool raw = true);

// Gives the node that produces `output` (searched in every graph) the name `name`; throws if none does.
void name_node(onnx::ModelProto& model, const std::string& output, const std::string& name);

// Nodes of `op_type` in `graph` alone, or in every graph of the model.
int count_ops(const onnx::GraphProto& graph, const std::string& op_type);
int count_ops_everywhere(const onnx::ModelProto& model, const std::string& op_type);

// Ops of the graph's nodes, in order.
std::vector<std::string> op_types(const onnx::GraphProto& graph);

// Lookups by name in one graph; nullptr when absent.
const onnx::TensorProto* find_initializer(const onnx::GraphProto& graph, const std::string& name);
const onnx::NodeProto* find_producer(const onnx::GraphProto& graph, const std::string& output);
const onnx::ValueInfoProto* find_value_info(const onnx::GraphProto& graph, const std::string& name);
const onnx::AttributeProto* find_attr(const onnx::NodeProto& node, const std::string& name);

// Every node of `op_type` in `graph`, in order.
std::vector<const onnx::NodeProto*> nodes_of(const onnx::GraphProto& graph, const std::string& op_type);

// Ints of an INTS attribute (empty when absent).
std::vector<int64_t> attr_ints(const onnx::NodeProto& node, const std::string& name);

// A tensor's elements as doubles / int64 (any storage form); throws when the data is malformed.
std::vector<double> values_of(const onnx::TensorProto& tensor);
std::vector<int64_t> int_values_of(const onnx::TensorProto& tensor);

// Largest |a - b| over two tensors of equal dims; throws when the dims differ.
double max_abs_diff(const NaiveTensor& a, const NaiveTensor& b);

// The complaint of the ONNX checker or of strict shape inference (types checked, errors raised), or "" when
// the model passes both.
std::string checker_error(const onnx::ModelProto& model);

// Every name the model defines or reads, in any graph: nodes, tensors, value_info, graph inputs and outputs.
std::vector<std::string> all_names(const onnx::ModelProto& model);

}  // namespace dwdeconv::test
