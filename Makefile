# longattn -- plain GNU Make build (one tree, no configure step).
#   make                 libraries (below), CLI build/longattn, test binaries, examples
#   make lib / shared    build/liblongattn.a (+ -internal.a) / build/liblongattn.so
#   make test            run the test suite against the normal build
#   make test-mpi        the MPI tests (tests/mpi.sh: mpirun -np 2 and 3)
#   make test-san        the same suite built with AddressSanitizer + UBSan (build-san/)
#   make test-python     the Python tests (tests/python) with .venv's pytest
#   make check-layers    the layering rule (docs/architecture.md "Layout" table) on the built objects
#   make check-docs      README.md and docs/ against the tree and the program (scripts/check_docs.py;
#                        make test-python runs the same checks: tests/python/test_documentation.py)
#   make check           check-layers, then all three, one closing line (this is what CI runs)
#   make bench           build/longattn bench attn
#   make fuzz            libFuzzer targets fuzz/fuzz_*.c (clang + ASan + UBSan, build-fuzz/),
#                        FUZZ_SECONDS (default 60) each over a scratch copy of fuzz/corpus/
#   make fuzz-smoke      the same binaries over their seed corpora once (no mutation)
#   make fuzz-corpus     regenerate the seed corpora (fuzz/make_corpus.py, fuzz/gen_seeds.c)
# Every src/<module>/*.c except src/cli goes into the library; src/cli/*.c and bench/*.c
# make the CLI; tests/test_*.c are one cmocka program each, linked with tests/support/*.c;
# examples/*.c are one program each, linked with the public library only.
# Library objects are built with -fPIC -fvisibility=hidden: only functions declared LA_API
# in include/ are public. Three products come from the same objects:
#   build/liblongattn.so           shared library, exports the LA_API functions only
#   build/liblongattn.a            public static library: the objects pre-linked into one
#                                  (ld -r) with every hidden symbol made local (objcopy
#                                  --localize-hidden), so its only global symbols are LA_API
#   build/liblongattn-internal.a   the raw objects (hidden symbols still linkable): for the
#                                  CLI and the tests, which use internal functions (src/*/*.h)

BUILD ?= build
CC ?= cc
OPT ?= -O3 -march=native
SAN ?=
WARN = -Wall -Wextra -Werror -Wshadow -Wno-unused-parameter
CFLAGS_ALL = -std=gnu11 $(OPT) -g $(WARN) -fopenmp -Iinclude -Isrc -MMD -MP $(SAN) $(FILE_CFLAGS) $(CFLAGS)
# the libraries the library links are listed once, in scripts/link-libs.txt (setup.py, which
# builds the Python package's extension, reads the same file)
LINK_LIBS := $(shell sed 's/\#.*//' scripts/link-libs.txt)
LDLIBS_ALL = -fopenmp $(SAN) $(addprefix -l,$(LINK_LIBS)) $(MPI_LDLIBS) $(LDLIBS)

# MPI (src/core/dist.c, the one file that calls it): on when mpicc is found, unless MPI=0.
# With it, dist.c is compiled with mpicc's include flags and LA_HAVE_MPI, and everything links
# mpicc's libraries; without it the commands run as one process (and refuse mpirun).
MPI ?= $(shell command -v mpicc >/dev/null 2>&1 && echo 1 || echo 0)
ifeq ($(MPI),1)
MPI_CFLAGS := -DLA_HAVE_MPI $(shell mpicc --showme:compile)
MPI_LDLIBS := $(shell mpicc --showme:link)
endif
$(BUILD)/src/core/dist.o: private FILE_CFLAGS = $(MPI_CFLAGS)

# per-file flags: ggml dequantization is bit-identical to ggml/gguf-py only without FMA
# contraction (src/io/gguf_quant.c)
# (private: not inherited by its prerequisites, e.g. the library flags stamp)
$(BUILD)/src/io/gguf_quant.o: private FILE_CFLAGS = -ffp-contract=off
# the optimizer's update loop vectorises only when sqrtf need not set errno (its argument is
# never negative, and vsqrtps rounds exactly like sqrtf: the same bits)
$(BUILD)/src/train/trainer.o $(BUILD)/src/train/adamw.o: private FILE_CFLAGS = -fno-math-errno

LIB_SRC   := $(sort $(filter-out src/cli/%,$(wildcard src/*/*.c)))
CLI_SRC   := $(sort $(wildcard src/cli/*.c) $(wildcard bench/*.c))
TSUP_SRC  := $(sort $(wildcard tests/support/*.c))
TEST_SRC  := $(sort $(wildcard tests/test_*.c))
EX_SRC    := $(sort $(wildcard examples/*.c))
TOOL_SRC  := $(sort $(wildcard tests/tools/*.c))
FUZZ_T    := $(sort $(patsubst fuzz/fuzz_%.c,%,$(wildcard fuzz/fuzz_*.c)))

LIB_OBJ   := $(LIB_SRC:%.c=$(BUILD)/%.o)
LIB_PIC   = -fPIC -fvisibility=hidden -fno-semantic-interposition
CLI_OBJ   := $(CLI_SRC:%.c=$(BUILD)/%.o)
TSUP_OBJ  := $(TSUP_SRC:%.c=$(BUILD)/%.o)
TEST_BIN  := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
EX_BIN    := $(EX_SRC:examples/%.c=$(BUILD)/examples/%)
TOOL_BIN  := $(TOOL_SRC:tests/%.c=$(BUILD)/tests/%)
REPLAY_BIN := $(FUZZ_T:%=$(BUILD)/fuzz/replay_%)

.PHONY: FORCE all lib shared test test-mpi test-san test-python python-ext check check-layers check-docs bench clean fuzz fuzz-smoke fuzz-bins fuzz-corpus
LIBS_OUT := $(BUILD)/liblongattn.a $(BUILD)/liblongattn-internal.a $(BUILD)/liblongattn.so
all: $(LIBS_OUT) $(BUILD)/longattn $(TEST_BIN) $(EX_BIN) $(TOOL_BIN) $(REPLAY_BIN)
lib: $(BUILD)/liblongattn.a $(BUILD)/liblongattn-internal.a
shared: $(BUILD)/liblongattn.so

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(OBJ_FLAGS) -c $< -o $@

$(LIB_OBJ): OBJ_FLAGS = $(LIB_PIC)
# library objects are rebuilt when their compiler flags change (e.g. objects left from a
# build before -fvisibility=hidden would export everything)
LIB_FLAGS_STAMP := $(BUILD)/.lib-cflags
$(LIB_FLAGS_STAMP): FORCE
	@mkdir -p $(BUILD)
	@echo '$(CC) $(CFLAGS_ALL) $(LIB_PIC) MPI=$(MPI)' | cmp -s - $@ || echo '$(CC) $(CFLAGS_ALL) $(LIB_PIC) MPI=$(MPI)' > $@
$(LIB_OBJ): $(LIB_FLAGS_STAMP)
FORCE:

$(BUILD)/liblongattn-internal.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/liblongattn.a: $(LIB_OBJ)
	@rm -f $@ $(BUILD)/liblongattn-all.o
	ld -r -o $(BUILD)/liblongattn-all.o $^
	objcopy --localize-hidden $(BUILD)/liblongattn-all.o
	ar rcs $@ $(BUILD)/liblongattn-all.o
	@rm -f $(BUILD)/liblongattn-all.o

$(BUILD)/liblongattn.so: $(LIB_OBJ)
	$(CC) -shared -Wl,-soname,liblongattn.so -o $@ $^ $(LDLIBS_ALL)

$(BUILD)/longattn: $(CLI_OBJ) $(BUILD)/liblongattn-internal.a
	$(CC) -o $@ $(CLI_OBJ) $(BUILD)/liblongattn-internal.a $(LDLIBS_ALL)

# tests link the internal archive (some test internal functions); test_exports also reads
# the public libraries, so every test waits for them
$(BUILD)/tests/%: $(BUILD)/tests/%.o $(TSUP_OBJ) $(LIBS_OUT)
	$(CC) -o $@ $< $(TSUP_OBJ) $(BUILD)/liblongattn-internal.a $(LDLIBS_ALL) -lcmocka -ldl

# examples/*.c: small programs using only the public header and the public library (the
# docs/c-api.md shows them; tests/test_example.c runs them)
$(BUILD)/examples/%: $(BUILD)/examples/%.o $(BUILD)/liblongattn.a
	$(CC) -o $@ $< $(BUILD)/liblongattn.a $(LDLIBS_ALL)

test: all
	fuzz/run.sh replay $(BUILD)
	LA_BIN=$(BUILD)/longattn tests/run.sh $(BUILD)

# the multi-process tests (mpirun -np 2/3: training and a study bitwise equal to 1 rank, rank
# failures); part of make check, skipped with a message when the build has no MPI
test-mpi: all
	tests/mpi.sh $(BUILD)

test-san:
	$(MAKE) BUILD=build-san OPT="-O1 -march=native" SAN="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer" all
	ASAN_OPTIONS=detect_leaks=1 fuzz/run.sh replay build-san
	LA_BIN=build-san/longattn LA_SANITIZED=1 tests/run.sh build-san

# ---- fuzzing (fuzz/; docs/reliability.md) ----
# replay_<t>: a fuzz target linked with fuzz/replay_main.c (any compiler): `make test`
# replays every seed and crash reproducer through it. fuzz_<t>: the libFuzzer binary.
# (the internal archive: some targets call internal readers such as la_st_read)
$(BUILD)/fuzz/replay_%: fuzz/fuzz_%.c fuzz/replay_main.c fuzz/fuzz_util.h $(BUILD)/liblongattn-internal.a
	@mkdir -p $(dir $@)
	$(CC) $(filter-out -MMD -MP,$(CFLAGS_ALL)) -o $@ $< fuzz/replay_main.c $(BUILD)/liblongattn-internal.a $(LDLIBS_ALL)

$(BUILD)/fuzz/fuzz_%: fuzz/fuzz_%.c fuzz/fuzz_util.h $(BUILD)/liblongattn-internal.a
	@mkdir -p $(dir $@)
	$(CC) $(filter-out -MMD -MP,$(CFLAGS_ALL)) -fsanitize=fuzzer -o $@ $< $(BUILD)/liblongattn-internal.a $(LDLIBS_ALL)

$(BUILD)/fuzz/gen_seeds: fuzz/gen_seeds.c $(BUILD)/liblongattn-internal.a
	@mkdir -p $(dir $@)
	$(CC) $(filter-out -MMD -MP,$(CFLAGS_ALL)) -o $@ $< $(BUILD)/liblongattn-internal.a $(LDLIBS_ALL)

FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_MAKE = $(MAKE) BUILD=$(FUZZ_BUILD) CC=clang OPT="-O1 -march=native" CFLAGS="-Wno-pass-failed" \
	SAN="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
# (clang cannot always honour "omp simd" at -O1 with sanitizers: -Wno-pass-failed)
fuzz-bins: $(FUZZ_T:%=$(BUILD)/fuzz/fuzz_%)

fuzz:
	$(FUZZ_MAKE) fuzz-bins
	fuzz/run.sh fuzz $(FUZZ_BUILD) $(FUZZ_SECONDS)

fuzz-smoke:
	$(FUZZ_MAKE) fuzz-bins
	fuzz/run.sh smoke $(FUZZ_BUILD)

fuzz-corpus: $(BUILD)/fuzz/gen_seeds
	python3 fuzz/make_corpus.py
	$(BUILD)/fuzz/gen_seeds fuzz/corpus

# Python tests (tests/python, pytest in .venv made by scripts/setup_venv.sh): references
# from PyPI packages (gguf, tokenizers, ...) and the Python package
PYTHON ?= .venv/bin/python
test-python: all python-ext
	@test -x $(PYTHON) || { echo "$(PYTHON) missing: run scripts/setup_venv.sh (or ./scripts/setup.sh)"; exit 1; }
	LA_BUILD=$(BUILD) $(PYTHON) -m pytest -q tests/python

# The Python package's extension (python/longattn/_native*.so: cffi's wrapper linked with
# $(BUILD)/liblongattn.a) built in place for the tests, which import longattn from python/.
# Rebuilt when the library or a header changes. `pip install .` builds the same (its
# setup.py runs `make lib` first) for a virtualenv.
PY_EXT_STAMP = $(BUILD)/py/ext.stamp
python-ext: $(PY_EXT_STAMP)
$(PY_EXT_STAMP): $(BUILD)/liblongattn.a $(wildcard include/*.h include/*/*.h) python/longattn/_build.py setup.py scripts/link-libs.txt
	@test -x $(PYTHON) || { echo "$(PYTHON) missing: run scripts/setup_venv.sh (or ./scripts/setup.sh)"; exit 1; }
	LA_BUILD=$(BUILD) $(PYTHON) setup.py -q build_ext --inplace --force --build-temp $(BUILD)/py
	@touch $@

# the layering rule: scripts/check_layers.py reads the folder -> layer table of docs/architecture.md
# ("Layout") and the symbols of every object (nm); --self-test first proves it rejects a
# synthetic upward dependency
check-layers: all
	python3 scripts/check_layers.py --self-test
	python3 scripts/check_layers.py $(BUILD)

# the documentation: links and anchors, every longattn command line against the program's
# --help, docs/cli.md against the program, no machine paths, the C blocks compile, the
# runnable examples (<!-- test: run -->) exit 0; --self-test first proves it rejects a
# broken fixture
check-docs: all
	python3 scripts/check_docs.py --self-test $(BUILD)
	python3 scripts/check_docs.py $(BUILD)

# check-layers, then all three, with one closing "check: N passed, N failed" line (tests/check.sh)
check:
	tests/check.sh

bench: all
	$(BUILD)/longattn bench attn

clean:
	rm -rf build build-san build-fuzz python/longattn/_native*.so python/longattn.egg-info

-include $(LIB_OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(TSUP_OBJ:.o=.d) $(TEST_BIN:=.d) $(EX_BIN:=.d) $(TOOL_BIN:=.d)
