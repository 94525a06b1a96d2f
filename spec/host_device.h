// TANDEM_HOST_DEVICE marks inline functions compiled for both the host and, under nvcc,
// CUDA devices (spec/philox.h, kernels/accept/accept_algorithm.h). Empty for a host
// compiler.
#ifndef TANDEM_SPEC_HOST_DEVICE_H_
#define TANDEM_SPEC_HOST_DEVICE_H_

#if defined(__CUDACC__)
#define TANDEM_HOST_DEVICE __host__ __device__
#else
#define TANDEM_HOST_DEVICE
#endif

#endif  // TANDEM_SPEC_HOST_DEVICE_H_
