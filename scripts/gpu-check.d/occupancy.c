/* The device's own answer to "how many blocks of this kernel fit on one SM": loads each
 * kernel fatbin the fork built with the CUDA driver API (dlopen'd, so this compiles with any
 * C compiler and no CUDA headers) and prints, per kernel and block size,
 * cuOccupancyMaxActiveBlocksPerMultiprocessor. scripts/gpu-check compares it with
 * `abfleet occupancy` for the same kernel's registers and shared memory.
 *
 *   occupancy FATBIN KERNEL BLOCK [KERNEL BLOCK ...]
 * prints `KERNEL BLOCK BLOCKS_PER_SM` per pair, or `KERNEL BLOCK error N` on a failure. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef void *CUmodule;
typedef void *CUfunction;

int main(int argc, char **argv) {
    if (argc < 4 || argc % 2 != 0) {
        fprintf(stderr, "usage: %s FATBIN KERNEL BLOCK [KERNEL BLOCK ...]\n", argv[0]);
        return 2;
    }
    void *cuda = dlopen("libcuda.so.1", RTLD_NOW);
    if (!cuda) {
        fprintf(stderr, "cannot load libcuda.so.1 (no NVIDIA driver here): %s\n", dlerror());
        return 3;
    }
    CUresult (*cuInit)(unsigned) = (CUresult(*)(unsigned))dlsym(cuda, "cuInit");
    CUresult (*cuDeviceGet)(CUdevice *, int) = (CUresult(*)(CUdevice *, int))dlsym(cuda, "cuDeviceGet");
    CUresult (*cuCtxCreate)(CUcontext *, unsigned, CUdevice) =
        (CUresult(*)(CUcontext *, unsigned, CUdevice))dlsym(cuda, "cuCtxCreate_v2");
    CUresult (*cuModuleLoad)(CUmodule *, const char *) =
        (CUresult(*)(CUmodule *, const char *))dlsym(cuda, "cuModuleLoad");
    CUresult (*cuModuleGetFunction)(CUfunction *, CUmodule, const char *) =
        (CUresult(*)(CUfunction *, CUmodule, const char *))dlsym(cuda, "cuModuleGetFunction");
    CUresult (*cuOccupancy)(int *, CUfunction, int, size_t) =
        (CUresult(*)(int *, CUfunction, int, size_t))dlsym(cuda, "cuOccupancyMaxActiveBlocksPerMultiprocessor");
    if (!cuInit || !cuDeviceGet || !cuCtxCreate || !cuModuleLoad || !cuModuleGetFunction || !cuOccupancy) {
        fprintf(stderr, "libcuda.so.1 lacks a driver API entry point this needs\n");
        return 3;
    }
    CUdevice device;
    CUcontext context;
    CUmodule module;
    CUresult r;
    if ((r = cuInit(0)) || (r = cuDeviceGet(&device, 0)) || (r = cuCtxCreate(&context, 0, device))) {
        fprintf(stderr, "no usable CUDA device (error %d)\n", r);
        return 3;
    }
    if ((r = cuModuleLoad(&module, argv[1]))) {
        fprintf(stderr, "cannot load %s (error %d)\n", argv[1], r);
        return 4;
    }
    for (int i = 2; i + 1 < argc; i += 2) {
        CUfunction function;
        int blocks = 0;
        int block = atoi(argv[i + 1]);
        if ((r = cuModuleGetFunction(&function, module, argv[i])) ||
            (r = cuOccupancy(&blocks, function, block, 0))) {
            printf("%s %d error %d\n", argv[i], block, r);
            continue;
        }
        printf("%s %d %d\n", argv[i], block, blocks);
    }
    return 0;
}
