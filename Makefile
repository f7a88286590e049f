# Makefile: the README's two commands, over CMake.
#
#   make demo    install what lathe needs (as root), build, run lathe's main job
#   make check   install, build, run every test, then again under ASan + UBSan
#
# Other targets: build, test, test-asan, fuzz, bench, clean.
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
SHARED ?= $(abspath ../shared)

.PHONY: all deps build test asan test-asan check demo fuzz bench clean

all: build

deps:
	@scripts/install-deps.sh $(DEPS_FLAGS)

build: deps
	cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLATHE_SHARED_DIR=$(SHARED)
	cmake --build build -j $(JOBS)

test: build
	cd build && ctest --output-on-failure -j $(JOBS)

asan: deps
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DLATHE_SANITIZE=ON -DLATHE_BENCH=OFF \
	      -DLATHE_SHARED_DIR=$(SHARED)
	cmake --build build-asan -j $(JOBS)

test-asan: asan
	cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 LATHE_SANITIZED=1 \
	  ctest --output-on-failure -j $(JOBS)

check: DEPS_FLAGS = --torch
check: test test-asan

demo: build
	build/lathe demo

fuzz: deps
	cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DLATHE_FUZZ=ON -DLATHE_BENCH=OFF \
	      -DLATHE_SHARED_DIR=$(SHARED)
	cmake --build build-fuzz -j $(JOBS)

bench: build

clean:
	rm -rf build build-asan build-fuzz
