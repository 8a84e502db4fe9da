# Cross-compiling for aarch64 with Debian's g++-aarch64-linux-gnu and arm64 multiarch -dev
# packages (scripts/test_aarch64.sh installs both). Libraries and their CMake packages come from
# /usr/lib/aarch64-linux-gnu; header-only packages from /usr/share and /usr/include.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
# The binaries run under qemu-aarch64 with this prefix (QEMU_LD_PREFIX).
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L /usr/aarch64-linux-gnu)
