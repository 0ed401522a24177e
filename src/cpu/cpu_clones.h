#pragma once
// MINIDL_CPU_CLONES: compiles a function for AVX-512 (x86-64-v4), AVX2 (x86-64-v3) and the portable baseline,
// and lets the loader pick the best one the CPU runs (GCC target_clones, an ELF ifunc). For loops the compiler
// vectorises itself, where wider compares and selects (with masks) pay; the GEMM has its own multi-ISA build
// (cpu/gemm.cpp). Elsewhere the attribute is empty and the baseline build runs.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__ELF__)
#define MINIDL_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define MINIDL_CPU_CLONES
#endif
