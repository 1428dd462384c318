// curand's own XORWOW, for the delay beamformer's compatibility check (run on a machine with
// nvcc; see BENCHMARKS.md / the delay_beamformer module docs):
//
//   nvcc -O2 -o curand_xorwow scripts/curand_xorwow.cu && ./curand_xorwow > curand.txt
//   RADIO_KERNELS_CURAND_REFERENCE=curand.txt cargo test -p radio-kernels-host curand_known
//
// One line per case: "xorwow seed subsequence offset d v0 v1 v2 v3 v4 r0 .. r7", the state right
// after curand_init(seed, subsequence, offset) and its first eight curand() outputs, decimal.
#include <cstdio>
#include <curand_kernel.h>

struct Case {
    unsigned long long seed, subsequence, offset;
};

__global__ void draw(const Case *cases, int n, unsigned *out) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    curandStateXORWOW_t s;
    curand_init(cases[i].seed, cases[i].subsequence, cases[i].offset, &s);
    unsigned *o = out + 14 * i;
    o[0] = s.d;
    for (int k = 0; k < 5; k++) o[1 + k] = s.v[k];
    for (int k = 0; k < 8; k++) o[6 + k] = curand(&s);
}

int main() {
    const unsigned long long big = 0xdeadbeef12345678ull;
    const Case cases[] = {
        {0, 0, 0},           {1, 0, 0},          {42, 0, 0},        {big, 0, 0},
        {0, 1, 0},           {0, 2, 0},          {0, 3, 0},         {42, 1000, 0},
        {big, 1048583, 0},   {7, 1ull << 32, 0}, {7, (5ull << 32) + 123, 0},
        {7, (1ull << 63) + 1, 0},                {0, 0, 1},         {0, 0, 7},
        {42, 0, 1000},       {big, 3, 1001},     {9, 5, (1ull << 40) + 3},
        {0xffffffffffffffffull, 0xffffffffffffffffull, 0xffffffffffffffffull},
    };
    const int n = sizeof(cases) / sizeof(cases[0]);
    Case *d_cases;
    unsigned *d_out;
    unsigned out[14 * n];
    if (cudaMalloc(&d_cases, sizeof(cases)) != cudaSuccess || cudaMalloc(&d_out, sizeof(out)) != cudaSuccess) {
        fprintf(stderr, "cudaMalloc failed\n");
        return 1;
    }
    cudaMemcpy(d_cases, cases, sizeof(cases), cudaMemcpyHostToDevice);
    draw<<<1, 64>>>(d_cases, n, d_out);
    cudaError_t e = cudaMemcpy(out, d_out, sizeof(out), cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) {
        fprintf(stderr, "CUDA error: %s\n", cudaGetErrorString(e));
        return 1;
    }
    for (int i = 0; i < n; i++) {
        printf("xorwow %llu %llu %llu", cases[i].seed, cases[i].subsequence, cases[i].offset);
        for (int k = 0; k < 14; k++) printf(" %u", out[14 * i + k]);
        printf("\n");
    }
    return 0;
}
