// pgraph test double of simpler's orchestration API (tensormap_and_ringbuffer, a2a3).
//
// Declares the types and calls a generated orchestration source uses, with the declarations of
// simpler 6ebaf7715's `orchestration/pto_orchestration_api.h`, `runtime/pto_types.h`,
// `runtime/pto_submit_types.h`, `runtime/tensor_create_info.h` and
// `src/common/task_interface/{tensor,task_args,data_type,pto_task_id,arg_direction}.h` as the
// docs/upstream.md describes them (§8.12, §2):
// accessors where the real header has accessors, the DataType order and values, a uint8_t ring
// in PTO2TaskId, non-copyable variadic Arg, get_element_size, TaskOutputTensors holding pointers,
// the ops table with a pending scope mode. No simpler code was copied; bodies and private
// layouts are our own. Code that compiles against this header uses only names the real one has.
//
// Every wrapper goes through the PTO2RuntimeOps table of the bound PTO2Runtime, as in simpler;
// tests/cpp/recording_runtime.cpp implements that table as a *recording runtime*. The recorder
// reads private state through `PTO2RecorderAccess`, a friend no generated code can name usefully.

#pragma once

#include <assert.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <type_traits>

struct PTO2RecorderAccess;  // the recording runtime's view of private state (tests/cpp only)

// ---- capacities (src/common/task_interface/arg_direction.h) ----
#define MAX_TENSOR_ARGS 32
#define MAX_SCALAR_ARGS 16
constexpr int CORE_MAX_TENSOR_ARGS = MAX_TENSOR_ARGS;
constexpr int CORE_MAX_SCALAR_ARGS = MAX_SCALAR_ARGS;
constexpr int CHIP_MAX_TENSOR_ARGS = 256;
constexpr int CHIP_MAX_SCALAR_ARGS = 128;
constexpr int32_t INVALID_KERNEL_ID = -1;

// Names of this test double only (the real header spells its internals differently): generated
// code never uses them, and tests/unit/test_a2a3.py checks that it does not.
namespace pgraph_test_double {
constexpr uint32_t kMaxDims = 5;  // a ChipTensor has at most 5 dimensions
}

// ---- PTO2TaskId (src/common/task_interface/pto_task_id.h): raw = (ring << 32) | local ----
struct PTO2TaskId {
    uint64_t raw;

    static constexpr PTO2TaskId make(uint8_t ring, uint32_t local) {
        return PTO2TaskId{(static_cast<uint64_t>(ring) << 32) | local};
    }
    static constexpr PTO2TaskId invalid() { return PTO2TaskId{UINT64_MAX}; }
    constexpr uint8_t ring() const { return static_cast<uint8_t>(raw >> 32); }
    constexpr uint32_t local() const { return static_cast<uint32_t>(raw & 0xFFFFFFFFu); }
    constexpr bool is_valid() const { return raw != UINT64_MAX; }
    constexpr bool is_invalid() const { return raw == UINT64_MAX; }
    constexpr bool operator==(const PTO2TaskId& o) const { return raw == o.raw; }
    constexpr bool operator!=(const PTO2TaskId& o) const { return raw != o.raw; }
};

// ---- data types (data_type.h): the enumerators in the real order, values 0..14 ----
enum class DataType : uint8_t {
    FLOAT32 = 0,
    FLOAT16 = 1,
    INT32 = 2,
    INT16 = 3,
    INT8 = 4,
    UINT8 = 5,
    BFLOAT16 = 6,
    INT64 = 7,
    UINT64 = 8,
    UINT16 = 9,
    UINT32 = 10,
    BOOL = 11,
    FP8E4M3FN = 12,
    FP8E8M0 = 13,
    FP4E2M1 = 14,
};

// Bytes per element (FP4 packs two elements per byte: reported as 1 here, sizes are per element).
inline uint64_t get_element_size(DataType t) {
    switch (t) {
        case DataType::FLOAT32: case DataType::INT32: case DataType::UINT32: return 4;
        case DataType::FLOAT16: case DataType::BFLOAT16: case DataType::INT16: case DataType::UINT16: return 2;
        case DataType::INT64: case DataType::UINT64: return 8;
        default: return 1;
    }
}

// ---- tensors (tensor.h) ----
enum class TensorArgType : int32_t { INPUT = 0, OUTPUT = 1, INOUT = 2, OUTPUT_EXISTING = 3, NO_DEP = 4 };
enum class AddressSpace : uint8_t { HOST = 0 };

struct alignas(64) ChipTensor {
    struct {
        uint64_t addr;
        uint64_t size;
    } buffer;
    PTO2TaskId owner_task_id;
    int32_t version;
    bool manual_dep;
    DataType dtype;
    uint32_t ndims;
    uint32_t shapes[pgraph_test_double::kMaxDims];
    uint32_t strides[pgraph_test_double::kMaxDims];
    uint64_t start_offset;

    // A strided sub-view: same buffer and strides, `view_shapes` elements from `offsets`. A
    // zero-size view accepts any offset.
    ChipTensor view(const uint32_t view_shapes[], const uint32_t offsets[], bool in_manual_dep = false) const;
    // A row-major reinterpretation of a contiguous tensor with the same element count (asserts contiguity).
    ChipTensor reshape(const uint32_t new_shapes[], uint32_t new_ndims, bool in_manual_dep = false) const;
    ChipTensor transpose(uint32_t a, uint32_t b) const;
    ChipTensor permute(const uint32_t order[], uint32_t n) const;
    ChipTensor slice(uint32_t dim, uint32_t start, uint32_t length) const;
    uint64_t nbytes() const;
    uint64_t extent_elem() const;
};
static_assert(sizeof(ChipTensor) == 128, "ChipTensor is 128 bytes");

ChipTensor make_tensor_external(void* addr, const uint32_t shapes[], uint32_t ndims,
                                DataType dtype = DataType::FLOAT32, bool manual_dep = false, int32_t version = 0,
                                AddressSpace space = AddressSpace::HOST);

// ---- TensorCreateInfo (runtime/tensor_create_info.h) ----
struct alignas(64) TensorCreateInfo {
    TensorCreateInfo() {}  // uninitialised, as in simpler
    TensorCreateInfo(const uint32_t shapes_in[], uint32_t ndims_in, DataType dtype_in = DataType::FLOAT32,
                     bool manual_dep_in = false)
        : ndims_(ndims_in), dtype_(dtype_in), manual_dep_(manual_dep_in), has_initial_value_(false),
          initial_value_(0) {
        assert(ndims_in > 0 && ndims_in <= pgraph_test_double::kMaxDims);
        for (uint32_t i = 0; i < pgraph_test_double::kMaxDims; ++i) shapes_[i] = i < ndims_in ? shapes_in[i] : 1;
    }
    template <typename T>
    void set_initial_value(T v) {
        static_assert(sizeof(T) <= 8, "initial value wider than 64 bits");
        has_initial_value_ = true;
        initial_value_ = 0;
        memcpy(&initial_value_, &v, sizeof(T));
    }
    uint64_t buffer_size_bytes() const {
        uint64_t n = 1;
        for (uint32_t i = 0; i < ndims_; ++i) n *= shapes_[i];
        return n * get_element_size(dtype_);
    }
    TensorCreateInfo copy() const { return *this; }

private:
    friend struct PTO2RecorderAccess;
    uint32_t shapes_[pgraph_test_double::kMaxDims];
    uint32_t ndims_;
    DataType dtype_;
    bool manual_dep_;
    bool has_initial_value_;
    uint64_t initial_value_;
};
static_assert(sizeof(TensorCreateInfo) == 64, "TensorCreateInfo is 64 bytes");

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
class PTO2LaunchSpec {
public:
    void set_block_num(int16_t n) { block_num_ = n; }
    void set_require_sync_start(bool v) { require_sync_start_ = v; }
    int16_t block_num() const { return block_num_; }
    bool require_sync_start() const { return require_sync_start_; }

private:
    int16_t block_num_ = 1;
    bool require_sync_start_ = false;
};

enum DepFlags : uint8_t { DEP_WAIT = 1, DEP_RETAIN = 2 };

enum class PTO2ScopeMode : uint8_t { AUTO = 0, MANUAL = 1 };

enum class PTO2ResourceShape : uint8_t { AIC = 0, AIV = 1, MIX = 2, DUMMY = 3 };

class ActiveMask {
public:
    constexpr explicit ActiveMask(uint8_t bits) : bits_(bits) {}
    // empty -> DUMMY; two or more subtasks -> MIX; AIC only -> AIC; otherwise AIV
    constexpr PTO2ResourceShape to_shape() const {
        return bits_ == 0 ? PTO2ResourceShape::DUMMY
               : (bits_ & (bits_ - 1)) != 0 ? PTO2ResourceShape::MIX
               : bits_ == 1 ? PTO2ResourceShape::AIC
                            : PTO2ResourceShape::AIV;
    }

private:
    friend struct PTO2RecorderAccess;
    uint8_t bits_;
};

struct MixedKernels {
    int32_t aic_kernel_id = INVALID_KERNEL_ID;
    int32_t aiv0_kernel_id = INVALID_KERNEL_ID;
    int32_t aiv1_kernel_id = INVALID_KERNEL_ID;

    constexpr ActiveMask to_active_mask() const {
        return ActiveMask(static_cast<uint8_t>((aic_kernel_id != INVALID_KERNEL_ID ? 1 : 0) |
                                               (aiv0_kernel_id != INVALID_KERNEL_ID ? 2 : 0) |
                                               (aiv1_kernel_id != INVALID_KERNEL_ID ? 4 : 0)));
    }
};

enum class PredicateOp : uint8_t { NONE = 0, EQ, NE, GT, LT, GE, LE };

struct CoreTaskPredicate {
    const ChipTensor* tensor = nullptr;
    uint32_t ndims = 0;
    uint32_t indices[pgraph_test_double::kMaxDims] = {0, 0, 0, 0, 0};
    PredicateOp op = PredicateOp::NONE;
    int64_t target = 0;
};

// A tensor slot of an Arg: the argument refers to an object that outlives the submit.
class TensorRef {
public:
    const ChipTensor& ref() const { return *tensor_; }

private:
    template <int, int>
    friend class TaskArgsTpl;
    friend struct PTO2RecorderAccess;
    const ChipTensor* tensor_ = nullptr;
    const TensorCreateInfo* create_info_ = nullptr;
};

// The argument payload: tensors first, then scalars (an error otherwise, submit fails with 5).
template <int MaxT, int MaxS>
class TaskArgsTpl {
public:
    TaskArgsTpl() = default;
    TaskArgsTpl(const TaskArgsTpl&) = delete;
    TaskArgsTpl& operator=(const TaskArgsTpl&) = delete;
    TaskArgsTpl(TaskArgsTpl&&) = delete;
    TaskArgsTpl& operator=(TaskArgsTpl&&) = delete;

    uint32_t tensor_count() const { return tensor_count_; }
    uint32_t scalar_count() const { return scalar_count_; }
    TensorArgType tag(uint32_t i) const { return tags_[i]; }
    const TensorRef& tensor(uint32_t i) const { return tensors_[i]; }
    uint64_t scalar(uint32_t i) const { return scalars_[i]; }

    void add_scalars(const uint64_t* values, int n) {
        for (int i = 0; i < n; ++i) push_scalar(values[i]);
    }
    void add_scalars_i32(const int32_t* values, int n) {
        for (int i = 0; i < n; ++i) push_scalar(to_u64(values[i]));
    }
    template <int T2, int S2>
    void copy_scalars_from(const TaskArgsTpl<T2, S2>& other) {
        for (uint32_t i = 0; i < other.scalar_count(); ++i) push_scalar(other.scalar(i));
    }
    void clear() {
        tensor_count_ = 0;
        scalar_count_ = 0;
    }
    void reset() {
        clear();
        has_error = false;
        error_msg = nullptr;
    }
    void set_error(const char* msg) {
        if (!has_error) {
            has_error = true;
            error_msg = msg;
        }
    }

    bool has_error = false;
    const char* error_msg = nullptr;

protected:
    void push_tensor(const ChipTensor* t, const TensorCreateInfo* ci, TensorArgType tag) {
        if (scalar_count_ > 0) return set_error("tensor added after a scalar");
        if (tensor_count_ >= static_cast<uint32_t>(MaxT)) return set_error("too many tensor arguments");
        tensors_[tensor_count_].tensor_ = t;
        tensors_[tensor_count_].create_info_ = ci;
        tags_[tensor_count_] = tag;
        ++tensor_count_;
    }
    void push_scalar(uint64_t v) {
        if (scalar_count_ >= static_cast<uint32_t>(MaxS)) return set_error("too many scalar arguments");
        scalars_[scalar_count_++] = v;
    }

private:
    friend struct PTO2RecorderAccess;
    TensorRef tensors_[MaxT];
    TensorArgType tags_[MaxT];
    uint32_t tensor_count_ = 0;
    uint64_t scalars_[MaxS];
    uint32_t scalar_count_ = 0;
};

template <int MaxT, int MaxS>
class Arg : public TaskArgsTpl<MaxT, MaxS> {
    using Base = TaskArgsTpl<MaxT, MaxS>;

public:
    Arg() = default;

    template <typename... Ts>
    void add_input(const ChipTensor& t, const Ts&... rest) {
        this->push_tensor(&t, nullptr, TensorArgType::INPUT);
        if constexpr (sizeof...(rest) > 0) add_input(rest...);
    }
    template <typename... Ts>
    void add_output(const ChipTensor& t, const Ts&... rest) {
        this->push_tensor(&t, nullptr, TensorArgType::OUTPUT_EXISTING);
        if constexpr (sizeof...(rest) > 0) add_output(rest...);
    }
    template <typename... Ts>
    void add_output(const TensorCreateInfo& ci, const Ts&... rest) {
        this->push_tensor(nullptr, &ci, TensorArgType::OUTPUT);
        if constexpr (sizeof...(rest) > 0) add_output(rest...);
    }
    template <typename... Ts>
    void add_inout(const ChipTensor& t, const Ts&... rest) {
        this->push_tensor(&t, nullptr, TensorArgType::INOUT);
        if constexpr (sizeof...(rest) > 0) add_inout(rest...);
    }
    template <typename... Ts>
    void add_no_dep(const ChipTensor& t, const Ts&... rest) {
        this->push_tensor(&t, nullptr, TensorArgType::NO_DEP);
        if constexpr (sizeof...(rest) > 0) add_no_dep(rest...);
    }
    // slots hold pointers: a temporary would dangle before the submit reads it
    template <typename... Ts>
    void add_input(const ChipTensor&&, const Ts&...) = delete;
    template <typename... Ts>
    void add_output(const ChipTensor&&, const Ts&...) = delete;
    template <typename... Ts>
    void add_output(const TensorCreateInfo&&, const Ts&...) = delete;
    template <typename... Ts>
    void add_inout(const ChipTensor&&, const Ts&...) = delete;
    template <typename... Ts>
    void add_no_dep(const ChipTensor&&, const Ts&...) = delete;

    template <typename T, typename... Ts>
    void add_scalar(T v, Ts... rest) {
        static_assert(std::is_arithmetic<T>::value || std::is_enum<T>::value,
                      "add_scalar takes arithmetic or enum values");
        this->push_scalar(to_u64(v));
        if constexpr (sizeof...(rest) > 0) add_scalar(rest...);
    }

    void set_dependencies(const PTO2TaskId* deps, uint32_t count) {
        if (count == 0) {
            deps_ = nullptr;
            dep_kinds_ = nullptr;
            dep_count_ = 0;
            return;
        }
        if (deps == nullptr) return this->set_error("set_dependencies: null array with a non-zero count");
        if (dep_count_ != 0) return this->set_error("set_dependencies called twice with entries");
        deps_ = deps;
        dep_kinds_ = nullptr;
        dep_count_ = count;
    }
    void set_dependencies_with_kinds(const PTO2TaskId* deps, const DepFlags* kinds, uint32_t count) {
        if (count > 0 && kinds == nullptr) return this->set_error("set_dependencies_with_kinds: null kinds");
        set_dependencies(deps, count);
        if (count > 0 && !this->has_error) dep_kinds_ = kinds;
    }
    void set_allow_early_resolve(bool v = true) { allow_early_resolve_ = v; }

protected:
    // CoreTaskArgsWithDeps (pto_arg_with_deps.h) grows its list entry by entry
    void replace_dependencies(const PTO2TaskId* deps, const DepFlags* kinds, uint32_t count) {
        deps_ = deps;
        dep_kinds_ = kinds;
        dep_count_ = count;
    }

public:
    void set_predicate(const CoreTaskPredicate& p) {
        predicate_ = p;
        has_predicate_ = true;
    }
    void set_task_timing_slot(int slot) { timing_slot_ = slot; }
    void dump(const char*) {}

    bool allow_early_resolve() const { return allow_early_resolve_; }
    uint32_t explicit_dep_count() const { return dep_count_; }

    PTO2LaunchSpec launch_spec;

private:
    friend struct PTO2RecorderAccess;
    bool allow_early_resolve_ = false;
    const PTO2TaskId* deps_ = nullptr;
    const DepFlags* dep_kinds_ = nullptr;
    uint32_t dep_count_ = 0;
    CoreTaskPredicate predicate_;
    bool has_predicate_ = false;
    int timing_slot_ = -1;
};

using CoreTaskArgs = Arg<CORE_MAX_TENSOR_ARGS, CORE_MAX_SCALAR_ARGS>;
using ChipTaskArgs = Arg<CHIP_MAX_TENSOR_ARGS, CHIP_MAX_SCALAR_ARGS>;

// What a submit or alloc returns: the task id and pointers to its output tensors, which live
// in the runtime (a reference from get_ref stays valid after this object is gone).
class TaskOutputTensors {
public:
    TaskOutputTensors() = default;
    PTO2TaskId task_id() const { return id_; }
    uint32_t size() const { return count_; }
    bool empty() const { return count_ == 0; }
    const ChipTensor& get_ref(uint32_t i) const& {
        assert(i < count_);
        return *outs_[i];
    }
    const ChipTensor& get_ref(uint32_t i) const&& = delete;

private:
    friend struct PTO2RecorderAccess;
    PTO2TaskId id_ = PTO2TaskId::invalid();
    uint32_t count_ = 0;
    const ChipTensor* outs_[MAX_TENSOR_ARGS] = {};
};

struct PTO2OrchestrationConfig {
    int expected_arg_count;
};

// ---- runtime binding (PTO2RuntimeOps is the first field of PTO2Runtime) ----
struct PTO2Runtime;

struct PTO2RuntimeOps {
    TaskOutputTensors (*submit_task)(PTO2Runtime*, const MixedKernels&, const CoreTaskArgs&);
    TaskOutputTensors (*submit_dummy_task)(PTO2Runtime*, const CoreTaskArgs&);
    TaskOutputTensors (*alloc_tensors)(PTO2Runtime*, const CoreTaskArgs&);
    void (*scope_begin)(PTO2Runtime*);
    void (*scope_end)(PTO2Runtime*);
    void (*scope_set_site)(PTO2Runtime*, const char* file, int line);
    void (*orchestration_done)(PTO2Runtime*);
    bool (*is_fatal)(PTO2Runtime*);
    void (*report_fatal)(PTO2Runtime*, int32_t code, const char* func, const char* fmt, ...);
    void (*log_error)(PTO2Runtime*, const char* fmt, ...);
    void (*log_warn)(PTO2Runtime*, const char* fmt, ...);
    void (*log_info)(PTO2Runtime*, const char* fmt, ...);
    void (*log_debug)(PTO2Runtime*, const char* fmt, ...);
    void (*log_timing)(PTO2Runtime*, const char* fmt, ...);
    uint64_t (*get_tensor_data)(PTO2Runtime*, const ChipTensor&, uint32_t ndims, const uint32_t idx[]);
    void (*set_tensor_data)(PTO2Runtime*, const ChipTensor&, uint32_t ndims, const uint32_t idx[], uint64_t v);
    int (*available_cluster_count)(PTO2Runtime*);
    int (*available_aiv_count)(PTO2Runtime*);
};

struct PTO2Runtime {
    const PTO2RuntimeOps* ops;
    PTO2ScopeMode pending_scope_mode;
};

extern "C" void framework_bind_runtime(PTO2Runtime* rt);
PTO2Runtime* framework_current_runtime();

// ---- wrappers ----
inline bool rt_is_fatal() {
    PTO2Runtime* rt = framework_current_runtime();
    return rt->ops->is_fatal(rt);
}

#define rt_report_fatal(code, ...)                                                       \
    do {                                                                                 \
        PTO2Runtime* pto2_rt_ = framework_current_runtime();                             \
        pto2_rt_->ops->report_fatal(pto2_rt_, (code), __func__, __VA_ARGS__);            \
    } while (0)
#define PTO2_LOG_VIA(op, ...)                                                            \
    do {                                                                                 \
        PTO2Runtime* pto2_rt_ = framework_current_runtime();                             \
        if (pto2_rt_->ops->op != nullptr) pto2_rt_->ops->op(pto2_rt_, __VA_ARGS__);      \
    } while (0)
#define LOG_ERROR(...) PTO2_LOG_VIA(log_error, __VA_ARGS__)
#define LOG_WARN(...) PTO2_LOG_VIA(log_warn, __VA_ARGS__)
#define LOG_INFO(...) PTO2_LOG_VIA(log_info, __VA_ARGS__)
#define LOG_DEBUG(...) PTO2_LOG_VIA(log_debug, __VA_ARGS__)
#define LOG_TIMING(...) PTO2_LOG_VIA(log_timing, __VA_ARGS__)

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

inline TaskOutputTensors alloc_tensors(const CoreTaskArgs& args) {
    PTO2Runtime* rt = framework_current_runtime();
    if (rt->ops->is_fatal(rt)) return TaskOutputTensors{};
    return rt->ops->alloc_tensors(rt, args);
}

inline TaskOutputTensors alloc_tensors(const TensorCreateInfo infos[], uint32_t count) {
    CoreTaskArgs args;
    for (uint32_t i = 0; i < count; ++i) args.add_output(infos[i]);
    return alloc_tensors(args);
}

template <typename... Ts>
inline TaskOutputTensors alloc_tensors(const TensorCreateInfo& first, const Ts&... rest) {
    CoreTaskArgs args;
    args.add_output(first, rest...);
    return alloc_tensors(args);
}

template <typename T>
inline T get_tensor_data(const ChipTensor& tensor, uint32_t ndims, const uint32_t idx[]) {
    PTO2Runtime* rt = framework_current_runtime();
    if (rt->ops->is_fatal(rt)) return T{};
    return from_u64<T>(rt->ops->get_tensor_data(rt, tensor, ndims, idx));
}

template <typename T>
inline void set_tensor_data(const ChipTensor& tensor, uint32_t ndims, const uint32_t idx[], T value) {
    PTO2Runtime* rt = framework_current_runtime();
    if (rt->ops->is_fatal(rt)) return;
    rt->ops->set_tensor_data(rt, tensor, ndims, idx, to_u64(value));
}

inline void rt_scope_begin(PTO2ScopeMode mode = PTO2ScopeMode::AUTO) {
    PTO2Runtime* rt = framework_current_runtime();
    rt->pending_scope_mode = mode;
    rt->ops->scope_begin(rt);
}

inline void rt_scope_end() {
    PTO2Runtime* rt = framework_current_runtime();
    rt->ops->scope_end(rt);
}

inline void rt_orchestration_done() {
    PTO2Runtime* rt = framework_current_runtime();
    rt->ops->orchestration_done(rt);
}

inline int rt_available_cluster_count() {
    PTO2Runtime* rt = framework_current_runtime();
    return rt->ops->available_cluster_count(rt);
}

inline int rt_available_aiv_count() {
    PTO2Runtime* rt = framework_current_runtime();
    return rt->ops->available_aiv_count(rt);
}

// RAII scope; records the call site for scope_stats (the op may be absent) and does nothing once
// a fatal error has been reported.
class PTO2ScopeGuard {
public:
    explicit PTO2ScopeGuard(PTO2ScopeMode mode = PTO2ScopeMode::AUTO, const char* file = __builtin_FILE(),
                            int line = __builtin_LINE()) {
        PTO2Runtime* rt = framework_current_runtime();
        active_ = !rt->ops->is_fatal(rt);
        if (!active_) return;
        if (rt->ops->scope_set_site != nullptr) rt->ops->scope_set_site(rt, file, line);
        rt->pending_scope_mode = mode;
        rt->ops->scope_begin(rt);
    }
    ~PTO2ScopeGuard() {
        PTO2Runtime* rt = framework_current_runtime();
        if (active_ && !rt->ops->is_fatal(rt)) rt->ops->scope_end(rt);
    }
    PTO2ScopeGuard(const PTO2ScopeGuard&) = delete;
    PTO2ScopeGuard& operator=(const PTO2ScopeGuard&) = delete;

private:
    bool active_ = false;
};

#define PTO2_SCOPE_CAT2(a, b) a##b
#define PTO2_SCOPE_CAT(a, b) PTO2_SCOPE_CAT2(a, b)
// `PTO2_SCOPE() { ... }` (AUTO) or `PTO2_SCOPE(PTO2ScopeMode::MANUAL) { ... }`
#define PTO2_SCOPE(...) \
    if (PTO2ScopeGuard PTO2_SCOPE_CAT(pto2_scope_guard_, __COUNTER__){__VA_ARGS__}; true)
#define PTO2_SCOPE_GUARD(...) PTO2ScopeGuard PTO2_SCOPE_CAT(pto2_scope_guard_, __COUNTER__){__VA_ARGS__}

#include "pto_arg_with_deps.h"
