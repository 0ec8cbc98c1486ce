# longattn -- plain GNU Make build (one tree, no configure step).
#   make                 library build/liblongattn.a, CLI build/longattn, test binaries
#   make test            run the test suite against the normal build
#   make test-san        the same suite built with AddressSanitizer + UBSan (build-san/)
#   make test-python     the Python tests (tests/python) with .venv's pytest
#   make check-layers    the layering rule (README "Layout" table) on the built objects
#   make check           check-layers, then all three, one closing line (this is what CI runs)
#   make bench           build/longattn bench attn
# Every src/<module>/*.c except src/cli goes into the library; src/cli/*.c and bench/*.c
# make the CLI; tests/test_*.c are one cmocka program each, linked with tests/support/*.c;
# examples/*.c are one program each, linked with the library only.

BUILD ?= build
CC ?= cc
OPT ?= -O3 -march=native
SAN ?=
WARN = -Wall -Wextra -Werror -Wshadow -Wno-unused-parameter
CFLAGS_ALL = -std=gnu11 $(OPT) -g $(WARN) -fopenmp -Iinclude -Isrc -MMD -MP $(SAN) $(CFLAGS)
LDLIBS_ALL = -fopenmp $(SAN) -lopenblas -lcjson -lm -lpthread $(LDLIBS)

LIB_SRC   := $(sort $(filter-out src/cli/%,$(wildcard src/*/*.c)))
CLI_SRC   := $(sort $(wildcard src/cli/*.c) $(wildcard bench/*.c))
TSUP_SRC  := $(sort $(wildcard tests/support/*.c))
TEST_SRC  := $(sort $(wildcard tests/test_*.c))
EX_SRC    := $(sort $(wildcard examples/*.c))

LIB_OBJ   := $(LIB_SRC:%.c=$(BUILD)/%.o)
CLI_OBJ   := $(CLI_SRC:%.c=$(BUILD)/%.o)
TSUP_OBJ  := $(TSUP_SRC:%.c=$(BUILD)/%.o)
TEST_BIN  := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
EX_BIN    := $(EX_SRC:examples/%.c=$(BUILD)/examples/%)

.PHONY: all lib test test-san test-python check check-layers bench clean
all: $(BUILD)/liblongattn.a $(BUILD)/longattn $(TEST_BIN) $(EX_BIN)
lib: $(BUILD)/liblongattn.a

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -c $< -o $@

$(BUILD)/liblongattn.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/longattn: $(CLI_OBJ) $(BUILD)/liblongattn.a
	$(CC) -o $@ $(CLI_OBJ) $(BUILD)/liblongattn.a $(LDLIBS_ALL)

$(BUILD)/tests/%: $(BUILD)/tests/%.o $(TSUP_OBJ) $(BUILD)/liblongattn.a
	$(CC) -o $@ $< $(TSUP_OBJ) $(BUILD)/liblongattn.a $(LDLIBS_ALL) -lcmocka

# examples/*.c: small programs using only the public header (the README shows them;
# tests/test_example.c runs them)
$(BUILD)/examples/%: $(BUILD)/examples/%.o $(BUILD)/liblongattn.a
	$(CC) -o $@ $< $(BUILD)/liblongattn.a $(LDLIBS_ALL)

test: all
	LA_BIN=$(BUILD)/longattn tests/run.sh $(BUILD)

test-san:
	$(MAKE) BUILD=build-san OPT="-O1 -march=native" SAN="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer" all
	LA_BIN=build-san/longattn LA_SANITIZED=1 tests/run.sh build-san

# Python tests (tests/python, pytest in .venv made by scripts/setup_venv.sh): references
# from PyPI packages (gguf, tokenizers, ...) and the Python package
PYTHON ?= .venv/bin/python
test-python: all
	@test -x $(PYTHON) || { echo "$(PYTHON) missing: run scripts/setup_venv.sh (or ./scripts/setup.sh)"; exit 1; }
	LA_BUILD=$(BUILD) $(PYTHON) -m pytest -q tests/python

# the layering rule: scripts/check_layers.py reads the folder -> layer table of README.md
# ("Layout") and the symbols of every object (nm); --self-test first proves it rejects a
# synthetic upward dependency
check-layers: all
	python3 scripts/check_layers.py --self-test
	python3 scripts/check_layers.py $(BUILD)

# check-layers, then all three, with one closing "check: N passed, N failed" line (tests/check.sh)
check:
	tests/check.sh

bench: all
	$(BUILD)/longattn bench attn

clean:
	rm -rf build build-san

-include $(LIB_OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(TSUP_OBJ:.o=.d) $(TEST_BIN:=.d) $(EX_BIN:=.d)
