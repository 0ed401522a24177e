#pragma once
// MINIDL_CPU_CLONES: compiles a function for AVX-512 (x86-64-v4), AVX2 (x86-64-v3) and the portable baseline,
// and lets the loader pick the best one the CPU runs (GCC target_clones, an ELF ifunc). For loops the compiler
// vectorises itself, where wider compares and selects (with masks) pay; the GEMM has its own multi-ISA build
// (cpu/gemm.cpp). Elsewhere the attribute is empty and the baseline build runs.
//
// A build whose flags already go past the baseline (MINIDL_NATIVE: -march=native) runs its own code instead.
// The clones would not be faster than that, and they would be slower: GCC inlines a function only into callers
// whose target includes all of the callee's features, and the x86-64-v4 clone lacks some of the host's (such
// as AVX512-FP16), so the element functors the cloned loops call (compiled for the host) stayed out-of-line:
// one call per element, and no vectorisation.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__ELF__) && !defined(__AVX2__)
#define MINIDL_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define MINIDL_CPU_CLONES
#endif
