# Cross-compiling for aarch64 with Debian's g++-aarch64-linux-gnu. The arm64 libraries
# (fmt, Google Benchmark, toml++, libcsv) come from ATTNBENCH_AARCH64_SYSROOT, a folder the arm64
# .deb packages were unpacked into (scripts/test_aarch64.sh does it): installing them as arm64
# multiarch packages would remove the amd64 ones the native build uses. Header-only packages
# (Eigen, CLI11, nlohmann-json, Catch2) are the host's.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
if(NOT ATTNBENCH_AARCH64_SYSROOT)
  set(ATTNBENCH_AARCH64_SYSROOT "$ENV{ATTNBENCH_AARCH64_SYSROOT}")
endif()
if(ATTNBENCH_AARCH64_SYSROOT)
  list(PREPEND CMAKE_PREFIX_PATH "${ATTNBENCH_AARCH64_SYSROOT}/usr")
  # The binaries find the unpacked libraries through their build RPATH under qemu.
endif()
# The binaries run under qemu-aarch64 with the cross toolchain's C and C++ runtime (QEMU_LD_PREFIX).
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L /usr/aarch64-linux-gnu)
