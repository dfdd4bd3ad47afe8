// pgraph test double of simpler's orchestration API (tensormap_and_ringbuffer, a2a3).
//
// Declares the types and calls a generated orchestration source uses, with the names and
// signatures of simpler's `pto_orchestration_api.h` as described in pgraph's reference notes
// (runtime_and_orchestration.md §1; simpler HEAD 6ebaf7715). It is NOT simpler's header:
// no code was copied. Field layouts, enum values and some parameter types (view/reshape
// shape and offset arrays) are our own choices where the notes do not fix them.
//
// Every wrapper goes through the PTO2RuntimeOps table of the bound PTO2Runtime, as in
// simpler; tests/cpp/recording_runtime.cpp implements that table as a *recording runtime*.

#pragma once

#include <stddef.h>
#include <stdint.h>
#include <string.h>

// ---- capacities (src/common/task_interface/arg_direction.h, data_type.h) ----
constexpr int MAX_TENSOR_DIMS = 5;
constexpr int MAX_TENSOR_ARGS = 32;
constexpr int MAX_SCALAR_ARGS = 16;
constexpr int MAX_ORCH_TENSOR_ARGS = 256;
constexpr int MAX_ORCH_SCALAR_ARGS = 128;
constexpr int32_t INVALID_KERNEL_ID = -1;

// ---- PTO2TaskId (src/common/task_interface/pto_task_id.h): raw = (ring << 32) | local ----
struct PTO2TaskId {
    uint64_t raw;

    static constexpr PTO2TaskId make(uint32_t ring, uint32_t local) {
        return PTO2TaskId{(static_cast<uint64_t>(ring) << 32) | local};
    }
    static constexpr PTO2TaskId invalid() { return PTO2TaskId{UINT64_MAX}; }
    constexpr uint32_t ring() const { return static_cast<uint32_t>(raw >> 32); }
    constexpr uint32_t local() const { return static_cast<uint32_t>(raw & 0xFFFFFFFFu); }
    constexpr bool is_valid() const { return raw != UINT64_MAX; }
    constexpr bool is_invalid() const { return raw == UINT64_MAX; }
};

// ---- data types ----
enum class DataType : uint8_t {
    FLOAT32, FLOAT16, BFLOAT16, INT8, INT16, INT32, INT64, UINT8, UINT16, UINT32, UINT64,
};

inline uint32_t data_type_size(DataType t) {
    switch (t) {
        case DataType::FLOAT32: case DataType::INT32: case DataType::UINT32: return 4;
        case DataType::FLOAT16: case DataType::BFLOAT16: case DataType::INT16: case DataType::UINT16: return 2;
        case DataType::INT64: case DataType::UINT64: return 8;
        default: return 1;
    }
}

// ---- tensors (tensor.h) ----
enum class TensorArgType : uint8_t { INPUT = 0, OUTPUT = 1, INOUT = 2, OUTPUT_EXISTING = 3, NO_DEP = 4 };

struct ChipTensor {
    struct {
        uint64_t addr;
        uint64_t size;
    } buffer;
    PTO2TaskId owner_task_id;
    uint32_t version;
    bool manual_dep;
    DataType dtype;
    uint32_t ndims;
    uint32_t shapes[MAX_TENSOR_DIMS];
    uint64_t strides[MAX_TENSOR_DIMS];
    uint64_t start_offset;
    bool view_error;  // test double only: a view/reshape outside the source (reported at submit)

    // A strided sub-view: same buffer and strides, `shapes` elements from `offsets`.
    ChipTensor view(const uint32_t view_shapes[], const uint32_t offsets[]) const;
    // A row-major reinterpretation of a contiguous tensor with the same element count.
    ChipTensor reshape(const uint32_t new_shapes[], uint32_t new_ndims) const;
    uint64_t numel() const;
};

// An external tensor over a fake address range (drivers and tests only).
ChipTensor make_tensor_external(uint64_t addr, const uint32_t shapes[], uint32_t ndims, DataType dtype);

// ---- TensorCreateInfo (runtime/tensor_create_info.h) ----
struct TensorCreateInfo {
    uint32_t shapes[MAX_TENSOR_DIMS];
    uint32_t ndims;
    DataType dtype;
    bool manual_dep;
    bool has_initial_value = false;
    uint64_t initial_value = 0;

    TensorCreateInfo() : TensorCreateInfo(nullptr, 0) {}  // test double only (array storage)
    TensorCreateInfo(const uint32_t shapes_in[], uint32_t ndims_in, DataType dtype_in = DataType::FLOAT32,
                     bool manual_dep_in = false)
        : ndims(ndims_in), dtype(dtype_in), manual_dep(manual_dep_in) {
        for (uint32_t i = 0; i < MAX_TENSOR_DIMS; ++i) shapes[i] = i < ndims_in ? shapes_in[i] : 1;
    }
    template <typename T>
    void set_initial_value(T v) {
        has_initial_value = true;
        memcpy(&initial_value, &v, sizeof(T) < 8 ? sizeof(T) : 8);
    }
};

// ---- scalar bit casts ----
template <typename T>
inline uint64_t to_u64(T v) {
    static_assert(sizeof(T) <= 8, "scalar wider than 64 bits");
    uint64_t out = 0;
    memcpy(&out, &v, sizeof(T));
    return out;
}

template <typename T>
inline T from_u64(uint64_t v) {
    static_assert(sizeof(T) <= 8, "scalar wider than 64 bits");
    T out;
    memcpy(&out, &v, sizeof(T));
    return out;
}

// ---- launch spec, task attributes, deps (pto_submit_types.h, pto_types.h) ----
struct PTO2LaunchSpec {
    int16_t block_num = 1;
    bool require_sync_start = false;
    void set_block_num(int16_t n) { block_num = n; }
    void set_require_sync_start(bool v) { require_sync_start = v; }
};

enum DepFlags : uint8_t { DEP_WAIT = 1, DEP_RETAIN = 2 };

enum class PTO2ScopeMode : uint8_t { AUTO = 0, MANUAL = 1 };

struct MixedKernels {
    int32_t aic_kernel_id = INVALID_KERNEL_ID;
    int32_t aiv0_kernel_id = INVALID_KERNEL_ID;
    int32_t aiv1_kernel_id = INVALID_KERNEL_ID;
};

// Arg<MaxTensors, MaxScalars>: slots hold pointers, so every object must outlive the submit;
// temporaries are rejected at compile time (deleted rvalue overloads).
template <int MaxT, int MaxS>
struct Arg {
    const ChipTensor* tensors[MaxT];
    const TensorCreateInfo* create_infos[MaxT];
    TensorArgType tags[MaxT];
    uint32_t tensor_count = 0;
    uint64_t scalars[MaxS];
    uint32_t scalar_count = 0;
    PTO2LaunchSpec launch_spec;
    bool allow_early_resolve = false;
    const PTO2TaskId* deps = nullptr;
    const DepFlags* dep_kinds = nullptr;
    uint32_t dep_count = 0;
    bool has_error = false;
    const char* error_msg = nullptr;

    void fail(const char* msg) {
        if (!has_error) {
            has_error = true;
            error_msg = msg;
        }
    }
    void push(const ChipTensor* t, const TensorCreateInfo* ci, TensorArgType tag) {
        if (scalar_count > 0) return fail("tensor added after a scalar");
        if (tensor_count >= static_cast<uint32_t>(MaxT)) return fail("too many tensor arguments");
        tensors[tensor_count] = t;
        create_infos[tensor_count] = ci;
        tags[tensor_count] = tag;
        ++tensor_count;
    }

    void add_input(const ChipTensor& t) { push(&t, nullptr, TensorArgType::INPUT); }
    void add_output(const ChipTensor& t) { push(&t, nullptr, TensorArgType::OUTPUT_EXISTING); }
    void add_output(const TensorCreateInfo& ci) { push(nullptr, &ci, TensorArgType::OUTPUT); }
    void add_inout(const ChipTensor& t) { push(&t, nullptr, TensorArgType::INOUT); }
    void add_no_dep(const ChipTensor& t) { push(&t, nullptr, TensorArgType::NO_DEP); }
    void add_input(const ChipTensor&&) = delete;
    void add_output(const ChipTensor&&) = delete;
    void add_output(const TensorCreateInfo&&) = delete;
    void add_inout(const ChipTensor&&) = delete;
    void add_no_dep(const ChipTensor&&) = delete;

    template <typename T0, typename T1, typename... Ts>
    void add_input(T0& a, T1& b, Ts&... rest) { add_input(a); add_input(b, rest...); }
    template <typename T0, typename T1, typename... Ts>
    void add_inout(T0& a, T1& b, Ts&... rest) { add_inout(a); add_inout(b, rest...); }

    template <typename T>
    void add_scalar(T v) {
        if (scalar_count >= static_cast<uint32_t>(MaxS)) return fail("too many scalar arguments");
        scalars[scalar_count++] = to_u64(v);
    }
    template <typename T0, typename T1, typename... Ts>
    void add_scalar(T0 a, T1 b, Ts... rest) { add_scalar(a); add_scalar(b, rest...); }
    void add_scalars(const uint64_t* v, int n) { for (int i = 0; i < n; ++i) add_scalar(v[i]); }

    void set_dependencies(const PTO2TaskId* d, uint32_t count) {
        if (count == 0) {
            deps = nullptr;
            dep_count = 0;
            return;
        }
        if (dep_count != 0) return fail("set_dependencies called twice with entries");
        deps = d;
        dep_kinds = nullptr;
        dep_count = count;
    }
    void set_dependencies_with_kinds(const PTO2TaskId* d, const DepFlags* kinds, uint32_t count) {
        set_dependencies(d, count);
        dep_kinds = count ? kinds : nullptr;
    }
    void set_allow_early_resolve(bool v = true) { allow_early_resolve = v; }

    // ChipTaskArgs access (orchestration arguments)
    struct TensorRef {
        const ChipTensor* ptr;
        const ChipTensor& ref() const { return *ptr; }
    };
    TensorRef tensor(uint32_t i) const { return TensorRef{tensors[i]}; }
    uint64_t scalar(uint32_t i) const { return scalars[i]; }
};

using CoreTaskArgs = Arg<MAX_TENSOR_ARGS, MAX_SCALAR_ARGS>;
using ChipTaskArgs = Arg<MAX_ORCH_TENSOR_ARGS, MAX_ORCH_SCALAR_ARGS>;

struct TaskOutputTensors {
    PTO2TaskId id = PTO2TaskId::invalid();
    uint32_t count = 0;
    ChipTensor outs[MAX_TENSOR_ARGS];

    PTO2TaskId task_id() const { return id; }
    const ChipTensor& get_ref(uint32_t i) const { return outs[i]; }
};

struct PTO2OrchestrationConfig {
    int expected_arg_count;
};

// ---- runtime binding (PTO2RuntimeOps is the first field of PTO2Runtime) ----
struct PTO2Runtime;

struct PTO2RuntimeOps {
    TaskOutputTensors (*submit_task)(PTO2Runtime*, const MixedKernels&, const CoreTaskArgs&);
    TaskOutputTensors (*submit_dummy_task)(PTO2Runtime*, const CoreTaskArgs&);
    TaskOutputTensors (*alloc_tensors)(PTO2Runtime*, const TensorCreateInfo*, uint32_t);
    void (*scope_begin)(PTO2Runtime*, PTO2ScopeMode);
    void (*scope_end)(PTO2Runtime*);
    void (*scope_set_site)(PTO2Runtime*, const char* file, int line);
    void (*orchestration_done)(PTO2Runtime*);
    bool (*is_fatal)(PTO2Runtime*);
    void (*report_fatal)(PTO2Runtime*, int code, const char* msg);
    int (*available_cluster_count)(PTO2Runtime*);
    int (*available_aiv_count)(PTO2Runtime*);
};

struct PTO2Runtime {
    const PTO2RuntimeOps* ops;
    PTO2ScopeMode pending_scope_mode;
};

void framework_bind_runtime(PTO2Runtime* rt);
PTO2Runtime* framework_current_runtime();

// ---- wrappers ----
inline bool rt_is_fatal() {
    PTO2Runtime* rt = framework_current_runtime();
    return rt->ops->is_fatal(rt);
}

inline TaskOutputTensors rt_submit_task(const MixedKernels& kernels, const CoreTaskArgs& args) {
    PTO2Runtime* rt = framework_current_runtime();
    if (rt->ops->is_fatal(rt)) return TaskOutputTensors{};
    return rt->ops->submit_task(rt, kernels, args);
}

inline TaskOutputTensors rt_submit_aic_task(int32_t kernel_id, const CoreTaskArgs& args) {
    MixedKernels k;
    k.aic_kernel_id = kernel_id;
    return rt_submit_task(k, args);
}

inline TaskOutputTensors rt_submit_aiv_task(int32_t kernel_id, const CoreTaskArgs& args) {
    MixedKernels k;
    k.aiv0_kernel_id = kernel_id;
    return rt_submit_task(k, args);
}

inline TaskOutputTensors rt_submit_dummy_task(const CoreTaskArgs& args) {
    PTO2Runtime* rt = framework_current_runtime();
    if (rt->ops->is_fatal(rt)) return TaskOutputTensors{};
    return rt->ops->submit_dummy_task(rt, args);
}

inline TaskOutputTensors alloc_tensors(const TensorCreateInfo infos[], uint32_t count) {
    PTO2Runtime* rt = framework_current_runtime();
    if (rt->ops->is_fatal(rt)) return TaskOutputTensors{};
    return rt->ops->alloc_tensors(rt, infos, count);
}

template <typename... Ts>
inline TaskOutputTensors alloc_tensors(const TensorCreateInfo& first, const Ts&... rest) {
    const TensorCreateInfo infos[] = {first, rest...};
    return alloc_tensors(infos, static_cast<uint32_t>(1 + sizeof...(rest)));
}

inline TaskOutputTensors alloc_tensors(const CoreTaskArgs& args) {
    TensorCreateInfo infos[MAX_TENSOR_ARGS];
    uint32_t n = 0;
    for (uint32_t i = 0; i < args.tensor_count; ++i) {
        if (args.create_infos[i] != nullptr) infos[n++] = *args.create_infos[i];
    }
    return alloc_tensors(infos, n);
}

inline void rt_scope_begin(PTO2ScopeMode mode = PTO2ScopeMode::AUTO) {
    PTO2Runtime* rt = framework_current_runtime();
    rt->ops->scope_begin(rt, mode);
}

inline void rt_scope_end() {
    PTO2Runtime* rt = framework_current_runtime();
    rt->ops->scope_end(rt);
}

inline int rt_available_cluster_count() {
    PTO2Runtime* rt = framework_current_runtime();
    return rt->ops->available_cluster_count(rt);
}

inline int rt_available_aiv_count() {
    PTO2Runtime* rt = framework_current_runtime();
    return rt->ops->available_aiv_count(rt);
}

// RAII scope; records the call site like simpler's guard does for scope_stats.
class PTO2ScopeGuard {
public:
    explicit PTO2ScopeGuard(PTO2ScopeMode mode = PTO2ScopeMode::AUTO, const char* file = __builtin_FILE(),
                            int line = __builtin_LINE()) {
        PTO2Runtime* rt = framework_current_runtime();
        rt->ops->scope_set_site(rt, file, line);
        rt->ops->scope_begin(rt, mode);
    }
    ~PTO2ScopeGuard() { rt_scope_end(); }
    PTO2ScopeGuard(const PTO2ScopeGuard&) = delete;
    PTO2ScopeGuard& operator=(const PTO2ScopeGuard&) = delete;
};

#define PTO2_SCOPE_CAT2(a, b) a##b
#define PTO2_SCOPE_CAT(a, b) PTO2_SCOPE_CAT2(a, b)
// `PTO2_SCOPE() { ... }` (AUTO) or `PTO2_SCOPE(PTO2ScopeMode::MANUAL) { ... }`
#define PTO2_SCOPE(...) \
    if (PTO2ScopeGuard PTO2_SCOPE_CAT(pto2_scope_guard_, __COUNTER__){__VA_ARGS__}; true)
#define PTO2_SCOPE_GUARD(...) PTO2ScopeGuard PTO2_SCOPE_CAT(pto2_scope_guard_, __COUNTER__){__VA_ARGS__}
