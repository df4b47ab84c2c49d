/* cpuid_avx2.c: LD_PRELOAD shim for benchmarks/onnx_avx2_speed.sh. It makes a copy of ONNX Runtime whose
 * ``cpuid`` and ``xgetbv`` instructions were overwritten with ``int3`` (+ ``nop`` padding) see an AVX2-only CPU:
 * the SIGTRAP handler below runs the real instruction, clears every AVX-512 feature bit (cpuid leaf 7) and
 * AVX-VNNI, and the AVX-512 state bits of XCR0 (opmask, ZMM_Hi256, Hi16_ZMM), then resumes after the
 * instruction. MLAS chooses its kernels from exactly these two instructions (platform.cpp), so it takes its
 * AVX2 kernels; they then run natively, at this CPU's speed. Only patched sites trap: ``int3`` followed by
 * ``nop`` (cpuid, 2 bytes) or ``nop nop`` (xgetbv, 3 bytes). At exit it prints how many it answered.
 * Build: cc -O2 -shared -fPIC -o cpuid_avx2.so cpuid_avx2.c */
#define _GNU_SOURCE
#include <cpuid.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <ucontext.h>

static volatile long cpuids, xgetbvs;

static void on_trap(int sig, siginfo_t *info, void *context) {
    (void)sig; (void)info;
    greg_t *reg = ((ucontext_t *)context)->uc_mcontext.gregs;
    unsigned char *ip = (unsigned char *)reg[REG_RIP];  /* just after the int3 */
    if (ip[-1] != 0xCC || ip[0] != 0x90) {
        signal(SIGTRAP, SIG_DFL);  /* not one of ours: die as without the shim */
        raise(SIGTRAP);
        return;
    }
    if (ip[1] == 0x90) {  /* xgetbv */
        unsigned int lo, hi, index = (unsigned int)reg[REG_RCX];
        __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(index));
        if (index == 0) lo &= ~0xE0u;  /* no opmask / ZMM state: AVX-512 unusable */
        reg[REG_RAX] = lo; reg[REG_RDX] = hi; reg[REG_RIP] += 2; xgetbvs++;
        return;
    }
    unsigned int leaf = (unsigned int)reg[REG_RAX], sub = (unsigned int)reg[REG_RCX], a, b, c, d;
    __cpuid_count(leaf, sub, a, b, c, d);
    if (leaf == 7 && sub == 0) {
        b &= ~((1u << 16) | (1u << 17) | (1u << 21) | (1u << 26) | (1u << 27) | (1u << 28) | (1u << 30) | (1u << 31));
        c &= ~((1u << 1) | (1u << 6) | (1u << 11) | (1u << 12) | (1u << 14));
        d &= ~((1u << 2) | (1u << 3) | (1u << 8) | (1u << 23));
    } else if (leaf == 7 && sub == 1) {
        a &= ~((1u << 4) | (1u << 5));  /* AVX-VNNI, AVX512_BF16 */
    }
    reg[REG_RAX] = a; reg[REG_RBX] = b; reg[REG_RCX] = c; reg[REG_RDX] = d; reg[REG_RIP] += 1; cpuids++;
}

__attribute__((constructor)) static void install(void) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = on_trap;
    action.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigaction(SIGTRAP, &action, NULL);
}

__attribute__((destructor)) static void report(void) {
    if (cpuids || xgetbvs)  /* silent in the child processes that never met a patched site */
        fprintf(stderr, "cpuid_avx2: %ld cpuid and %ld xgetbv answered as an AVX2-only CPU\n", cpuids, xgetbvs);
}
