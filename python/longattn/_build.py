"""cffi build script (API mode, out-of-line) of longattn._native.

The extension links the C library as `make` builds it: setup.py's build_ext first runs
`make lib` at the repository root, which compiles every src/<module>/*.c except src/cli
(the Makefile's LIB_SRC glob) with the Makefile's flags -- per-file ones included, e.g.
gguf_quant.c's -ffp-contract=off -- into the public static library build/liblongattn.a
(position-independent, only the LA_API functions global), and the extension links that
archive and the libraries listed in scripts/link-libs.txt (shared with the Makefile). No
kernel is reimplemented in Python and no source is compiled twice with other flags.

The cdef below restates the declarations the package binds. set_source includes the real
header "longattn.h", so cffi's generated C checks every declaration and struct layout
against it: a cdef that drifts from include/longattn.h fails to compile (or cffi reports the
field offset mismatch), which tests/python/test_longattn_api.py exercises.
"""
import os

from cffi import FFI

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CDEF = r"""
typedef enum {
    LA_OK = 0, LA_EINVAL, LA_ESHAPE, LA_ESPEC, LA_ENOMEM, LA_EIO, LA_EFORMAT,
    LA_EUNSUPPORTED, LA_EINTERRUPTED, LA_ENUMERIC
} la_status;
const char *la_status_name(la_status s);
const char *la_errmsg(void);

typedef enum { LA_NORM_SOFTMAX = 0, LA_NORM_ENTMAX, LA_NORM_SPARSEMAX, LA_NORM_ASENTMAX,
               LA_NORM_SIGMOID, LA_NORM_SIGMOID_LOGN } la_norm;
typedef enum { LA_SINK_NONE = 0, LA_SINK_LEARNED, LA_SINK_FIXED } la_sink;
typedef enum { LA_POS_NOPE = 0, LA_POS_ROPE, LA_POS_PROPE, LA_POS_NTK, LA_POS_DYNAMIC_NTK,
               LA_POS_YARN, LA_POS_ALIBI, LA_POS_NAPE, LA_POS_PI } la_pos;
typedef enum { LA_XF_NONE = 0, LA_XF_LOGN, LA_XF_QWEN_LOGN, LA_XF_SINV, LA_XF_CRITICAL,
               LA_XF_TEMP } la_xform;
typedef enum { LA_PAT_CAUSAL = 0, LA_PAT_WINDOW, LA_PAT_SINKS, LA_PAT_GLOBAL, LA_PAT_FULL } la_pattern;

typedef struct {
    la_norm norm;
    double alpha;
    double as_delta;
    double as_gamma_range;
    la_pos pos;
    double theta;
    double rope_p;
    double pos_scale;
    int    train_len;
    double beta_fast;
    double beta_slow;
    la_xform xform;
    double logn_s;
    double tau;
    double gamma;
    double temp;
    la_pattern pattern;
    int window;
    int sinks;
    int global;
    la_sink sink;
    double sink_fixed;
    double sig_b;
    int sig_b_set;
} la_spec;

la_spec la_spec_default(void);
la_status la_spec_parse(const char *text, la_spec *out);
la_status la_spec_validate(const la_spec *spec);
int la_spec_format(const la_spec *spec, char *buf, size_t n);

#define LA_POS0_AUTO ...

typedef struct {
    int B, H, Hkv, T, S, D;
    int64_t pos0;
} la_shape;

typedef struct la_workspace la_workspace;
la_workspace *la_workspace_new(void);
void la_workspace_free(la_workspace *ws);

typedef struct {
    const int32_t *doc_ids;
    const float *logn_s;
    const float *as_beta;
    const float *as_gamma;
    float *row_entropy;
    float *key_mass;
    float *row_support;
    float *dlogn_s;
    float *das_beta;
    float *das_gamma;
    int n_threads;
    la_workspace *ws;
    const float *sinks;
    float *dsinks;
} la_attn_opts;

la_attn_opts la_attn_opts_default(void);
la_status la_attn_forward(const la_spec *spec, const la_shape *shape,
                          const float *q, const float *k, const float *v,
                          float *out, float *row_stat, const la_attn_opts *opts);
la_status la_attn_backward(const la_spec *spec, const la_shape *shape,
                           const float *q, const float *k, const float *v,
                           const float *out, const float *row_stat, const float *dout,
                           float *dq, float *dk, float *dv, const la_attn_opts *opts);
typedef enum { LA_DTYPE_F32 = 0, LA_DTYPE_F16 = 1, LA_DTYPE_BF16 = 2, LA_DTYPE_I8 = 3 } la_dtype;
la_status la_attn_forward_typed(la_dtype dtype, const la_spec *spec, const la_shape *shape,
                                const void *q, const void *k, const void *v,
                                float *out, float *row_stat, const la_attn_opts *opts);
la_status la_attn_backward_typed(la_dtype dtype, const la_spec *spec, const la_shape *shape,
                                 const void *q, const void *k, const void *v,
                                 const float *out, const float *row_stat, const void *dout,
                                 float *dq, float *dk, float *dv, const la_attn_opts *opts);

la_status la_rope_freqs(const la_spec *spec, int D, int64_t ctx_len, double *omega);
la_status la_rope_apply(const la_spec *spec, float *x, int N, int D, const int64_t *pos,
                        int64_t ctx_len, int inverse);
void la_alibi_slopes(int n_heads, float *slopes);
void la_sinv_coeffs(double t, double tau, double *a, double *m);

la_status la_sparsemax_forward_f64(const double *z, int64_t rows, int n, double *p, double *tau);
la_status la_sparsemax_forward_f32(const float *z, int64_t rows, int n, float *p, double *tau);
la_status la_sparsemax_backward_f64(const double *p, const double *dp, int64_t rows, int n, double *dz);
la_status la_sparsemax_backward_f32(const float *p, const float *dp, int64_t rows, int n, float *dz);
la_status la_entmax15_forward_f64(const double *z, int64_t rows, int n, double *p, double *tau);
la_status la_entmax15_forward_f32(const float *z, int64_t rows, int n, float *p, double *tau);
la_status la_entmax15_backward_f64(const double *p, const double *dp, int64_t rows, int n, double *dz);
la_status la_entmax15_backward_f32(const float *p, const float *dp, int64_t rows, int n, float *dz);
la_status la_entmax_bisect_forward_f64(const double *z, int64_t rows, int n, double alpha,
                                       double *p, double *tau);
la_status la_entmax_bisect_forward_f32(const float *z, int64_t rows, int n, double alpha,
                                       float *p, double *tau);
la_status la_entmax_bisect_backward_f64(const double *p, const double *dp, int64_t rows, int n,
                                        double alpha, double *dz, double *dalpha);
la_status la_entmax_bisect_backward_f32(const float *p, const float *dp, int64_t rows, int n,
                                        double alpha, float *dz, double *dalpha);

la_status la_asentmax_params_forward(const float *x, int B, int T, int C, int H,
                                     const float *w_beta, const float *b_beta,
                                     const float *w_gamma, const float *b_gamma,
                                     double gamma_range, float *beta, float *gamma);
la_status la_asentmax_params_backward(const float *x, int B, int T, int C, int H,
                                      const float *w_beta, const float *w_gamma,
                                      double gamma_range, const float *beta, const float *gamma,
                                      const float *dbeta, const float *dgamma, float *dx,
                                      float *dw_beta, float *db_beta, float *dw_gamma,
                                      float *db_gamma);

la_status la_npy_read_f32(const char *path, float **data, int *ndim, int64_t shape[8]);
la_status la_npy_write_f32(const char *path, const float *data, int ndim, const int64_t *shape);
void free(void *p);
"""


def link_libraries():
    """The -l names of scripts/link-libs.txt (one per line, # comments)."""
    with open(os.path.join(ROOT, "scripts", "link-libs.txt"), encoding="utf-8") as f:
        return [w for line in f for w in line.split("#", 1)[0].split()]


def build_dir():
    """The Makefile's BUILD folder whose liblongattn.a the extension links (LA_BUILD)."""
    return os.environ.get("LA_BUILD", "build")


def static_library():
    return os.path.join(build_dir(), "liblongattn.a")


def mpi_link_args():
    """mpicc's link flags when make built the archive with MPI (src/core/dist.c; the stamp
    BUILD/.lib-cflags ends in MPI=1), else none."""
    import subprocess
    try:
        with open(os.path.join(build_dir(), ".lib-cflags"), encoding="utf-8") as f:
            if "MPI=1" not in f.read():
                return []
        return subprocess.check_output(["mpicc", "--showme:link"], text=True).split()
    except (OSError, subprocess.CalledProcessError):
        return []


ffibuilder = FFI()
ffibuilder.cdef(CDEF)
# The paths are relative to the repository root (setup.py's folder, where setuptools runs).
ffibuilder.set_source(
    "longattn._native",
    '#include <stdlib.h>\n#include "longattn.h"\n',
    include_dirs=["include"],
    extra_objects=[static_library()],
    libraries=link_libraries(),
    # the generated wrapper only; the library's objects come from make. No -Werror: cffi's
    # generated C is not ours
    extra_compile_args=["-std=gnu11", "-O2"],
    extra_link_args=["-fopenmp"] + mpi_link_args(),
    depends=[static_library()],
)

if __name__ == "__main__":
    os.chdir(ROOT)
    ffibuilder.compile(verbose=True)
