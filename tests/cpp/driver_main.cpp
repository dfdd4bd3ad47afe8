// pgraph recording-runtime driver: runs a generated orchestration entry on fake tensors.
//
// usage: driver ARGS_FILE RECORD_FILE [DEPS_JSON]   (DEPS_JSON: also write the graph as deps.json)
// ARGS_FILE lines, in orchestration argument order:
//   tensor <DataType spelling> <ndims> <dim...>     (orch_args.tensor(k), k counts tensors)
//   scalar <unsigned 64-bit value>                   (orch_args.scalar(j), j counts scalars)
// Like simpler's executor it binds the runtime, opens the root scope (depth 0), checks
// aicpu_orchestration_config's expected_arg_count, calls aicpu_orchestration_entry, closes
// the root scope and calls orchestration_done. Tensor k gets the fake address 2^48 + k * 2^40. Exit: 0 ok, 1 fatal runtime error (recorded),
// 2 usage/input error, 3 argument-count mismatch, 4 unbalanced scopes.

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <string>
#include <vector>

#include "pto_orchestration_api.h"
#include "recording_runtime.h"

extern "C" PTO2OrchestrationConfig aicpu_orchestration_config(const ChipTaskArgs& orch_args);
extern "C" void aicpu_orchestration_entry(const ChipTaskArgs& orch_args);

namespace {

bool parse_dtype(const char* s, DataType* out) {
    static const struct {
        const char* name;
        DataType t;
    } table[] = {
        {"FLOAT32", DataType::FLOAT32}, {"FLOAT16", DataType::FLOAT16},     {"INT32", DataType::INT32},
        {"INT16", DataType::INT16},     {"INT8", DataType::INT8},           {"UINT8", DataType::UINT8},
        {"BFLOAT16", DataType::BFLOAT16}, {"INT64", DataType::INT64},       {"UINT64", DataType::UINT64},
        {"UINT16", DataType::UINT16},   {"UINT32", DataType::UINT32},       {"BOOL", DataType::BOOL},
    };
    for (const auto& row : table) {
        if (strcmp(row.name, s) == 0) {
            *out = row.t;
            return true;
        }
    }
    return false;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: %s ARGS_FILE RECORD_FILE [DEPS_JSON]\n", argv[0]);
        return 2;
    }
    FILE* in = fopen(argv[1], "r");
    if (in == nullptr) {
        fprintf(stderr, "cannot read %s\n", argv[1]);
        return 2;
    }
    std::vector<ChipTensor> tensors;
    tensors.reserve(CHIP_MAX_TENSOR_ARGS);
    std::vector<uint64_t> scalars;
    char kind[16];
    while (fscanf(in, "%15s", kind) == 1) {
        if (strcmp(kind, "tensor") == 0) {
            char dt[16];
            unsigned nd = 0;
            uint32_t shapes[5] = {1, 1, 1, 1, 1};
            DataType dtype;
            if (fscanf(in, "%15s %u", dt, &nd) != 2 || nd == 0 || nd > 5 || !parse_dtype(dt, &dtype)) {
                fprintf(stderr, "bad tensor line\n");
                return 2;
            }
            for (unsigned d = 0; d < nd; ++d) {
                if (fscanf(in, "%u", &shapes[d]) != 1) return 2;
            }
            // fake, never dereferenced: tensor k lives at 2^48 + k * 2^40
            uint64_t addr = (1ull << 48) + (static_cast<uint64_t>(tensors.size()) << 40);
            tensors.push_back(make_tensor_external(reinterpret_cast<void*>(addr), shapes, nd, dtype));
        } else if (strcmp(kind, "scalar") == 0) {
            unsigned long long v = 0;
            if (fscanf(in, "%llu", &v) != 1) return 2;
            scalars.push_back(v);
        } else {
            fprintf(stderr, "unknown line kind %s\n", kind);
            return 2;
        }
    }
    fclose(in);
    if (tensors.size() > static_cast<size_t>(CHIP_MAX_TENSOR_ARGS)) return 2;
    ChipTaskArgs args;
    for (const ChipTensor& t : tensors) args.add_input(t);
    for (uint64_t v : scalars) args.add_scalar(v);

    PTO2Runtime* rt = recorder_runtime();
    framework_bind_runtime(rt);
    PTO2OrchestrationConfig cfg = aicpu_orchestration_config(args);
    if (cfg.expected_arg_count != static_cast<int>(tensors.size() + scalars.size())) {
        fprintf(stderr, "expected_arg_count %d, got %zu arguments\n", cfg.expected_arg_count,
                tensors.size() + scalars.size());
        return 3;
    }
    rt_scope_begin(PTO2ScopeMode::AUTO);  // the executor's root scope, depth 0
    aicpu_orchestration_entry(args);
    rt_scope_end();
    rt_orchestration_done();
    if (!recorder_write(argv[2])) {
        fprintf(stderr, "cannot write %s\n", argv[2]);
        return 2;
    }
    if (argc == 4 && !recorder_write_deps_json(argv[3])) {
        fprintf(stderr, "cannot write %s\n", argv[3]);
        return 2;
    }
    if (recorder_open_scopes() != 0) return 4;
    return recorder_fatal_code() != 0 ? 1 : 0;
}
