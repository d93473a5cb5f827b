// sycl-spirv: compile the device code of one SYCL translation unit to SPIR-V, without icpx.
//
//   sycl-spirv [-I dir]... [-D X[=Y]]... [-U X]... [-include FILE]... [-isystem dir]...
//              [-std=c++NN] [-f…] [-W…] [-O…] [-pedantic] [-w] [-Xclang ARG]... [-v]
//              SOURCE.cpp -o OUT.spv
//   sycl-spirv --version
//
// It calls `compileSYCL`, exported by `libsycl-jit.so` of PyPI's `intel-sycl-rt` wheel: DPC++'s
// own front end, device-library linking, post-link and SPIR-V translation, run in process (the
// SYCL runtime uses it for `kernel_compiler` source compilation). The device code is not split
// (`-fsycl-device-code-split=off` unless given otherwise), so OUT.spv holds every kernel of the
// TU. Exit status: 0 written; 1 the front end (or a later stage) failed, its log on stderr
// (clang's `file:line:col: error: …` lines); 2 bad usage or unreadable input; 3 the library
// returned something this driver does not understand (interface drift: see below).
// Headers: the SYCL headers and clang's own come embedded in the library (paths under
// /sycl-jit-toolchain/ in diagnostics); the C++ standard library is the host's (the embedded
// clang driver finds the host GCC's libstdc++, GCC 12's on Debian 12), and -I paths are read
// from the real file system.
// Built by scripts/install-intel-toolchains; links libsycl-jit.so with an rpath to it.
//
// The declarations in namespace `rtc` restate, minimally and by layout only, the interface of
// intel/llvm's sycl-jit (github.com/intel/llvm, files sycl-jit/jit-compiler/include/RTC.h,
// View.h, DynArray.h, JITBinaryInfo.h, Macros.h; Part of the LLVM Project, under the Apache
// License v2.0 with LLVM Exceptions, SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception).
// The originals are C++ classes with owning members; here they are plain layouts, read only,
// never destroyed (the process exits right after). Checked against the 2026.2.0 wheel's
// libsycl-jit.so.23.1 by disassembling `compileSYCL`: result returned through a hidden pointer,
// the two source descriptors in registers, `SaveIR` in r9, `UserArgs`, `CachedIR` and the
// trailing `BinaryFormat Format` on the stack, 64-byte device-image records. The result is
// checked (error code range, format SPIRV, SPIR-V magic) before anything is written, so a
// changed interface exits 3 instead of writing garbage.
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#ifndef SYCL_SPIRV_WHEEL
#define SYCL_SPIRV_WHEEL "intel-sycl-rt (version unknown)"
#endif

namespace rtc {
struct InMemoryFile {  // RTC.h
  const char *Path;
  const char *Contents;
};
template <typename T> struct View {  // View.h: const T *Ptr; size_t Size (trivially copyable)
  const T *Ptr;
  size_t Size;
};
template <typename T> struct DynArray {  // DynArray.h: T *Values; size_t Size
  T *Values;
  size_t Size;
};
struct String {  // sycl::detail::string (wheel's include/sycl/detail/string.hpp): char *str
  const char *str;
  const char *c_str() const { return str ? str : ""; }
};
enum : uint32_t { FormatInvalid, FormatLLVM, FormatSPIRV, FormatPTX, FormatAMDGCN };  // BinaryFormat
struct JITBinaryInfo {  // JITBinaryInfo.h
  uint32_t Format;
  uint64_t AddressBits;
  const uint8_t *BinaryStart;
  uint64_t BinarySize;
};
struct FrozenPropertyValue;
struct FrozenPropertySet;
struct RTCDevImgInfo {  // RTC.h
  JITBinaryInfo BinaryInfo;
  DynArray<String> SymbolTable;
  DynArray<FrozenPropertySet> Properties;
};
static_assert(sizeof(RTCDevImgInfo) == 64, "device image record is 64 bytes in sycl-jit 2026.2");
struct RTCBundleInfo {  // RTC.h
  DynArray<RTCDevImgInfo> DevImgInfos;
  String CompileOptions;
};
enum : int32_t { Success = 0, ErrBuild = 1, ErrInvalid = 2 };  // RTCResult::RTCErrorCode
struct RTCResult {  // RTC.h, returned by value (through a hidden pointer: 56 bytes)
  int32_t ErrorCode;
  RTCBundleInfo BundleInfo;
  DynArray<char> DeviceCodeIR;
  String BuildLog;
};
static_assert(sizeof(RTCResult) == 56, "RTCResult is 56 bytes in sycl-jit 2026.2");
}  // namespace rtc

// JIT_EXPORT_SYMBOL is `extern "C"` (Macros.h).
extern "C" rtc::RTCResult compileSYCL(rtc::InMemoryFile SourceFile,
                                      rtc::View<rtc::InMemoryFile> IncludeFiles,
                                      rtc::View<const char *> UserArgs, rtc::View<char> CachedIR,
                                      bool SaveIR, uint32_t Format);

namespace {

const char *const kUsage =
    "usage: sycl-spirv [-I dir]... [-D X[=Y]]... [-U X]... [-include FILE]... [-isystem dir]...\n"
    "                  [-std=c++NN] [-f…] [-W…] [-O…] [-pedantic] [-w] [-Xclang ARG]... [-v]\n"
    "                  SOURCE.cpp -o OUT.spv\n"
    "       sycl-spirv --version\n";

bool read_file(const std::string &path, std::string &out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  out = ss.str();
  return !in.bad();
}

bool write_file(const std::string &path, const uint8_t *data, size_t size) {
  std::string tmp = path + ".tmp";
  FILE *f = std::fopen(tmp.c_str(), "wb");
  if (!f) return false;
  bool ok = std::fwrite(data, 1, size, f) == size;
  ok = (std::fclose(f) == 0) && ok;
  if (ok) ok = std::rename(tmp.c_str(), path.c_str()) == 0;
  if (!ok) std::remove(tmp.c_str());
  return ok;
}

bool starts_with(const std::string &s, const char *p) { return s.rfind(p, 0) == 0; }

// The embedded front end's own identification: a one-line probe whose `#pragma message`
// the front end reports in its build log.
std::string front_end_version() {
  static const char *kProbe =
      "#include <sycl/version.hpp>\n"
      "#define SYCL_SPIRV_STR2(x) #x\n"
      "#define SYCL_SPIRV_STR(x) SYCL_SPIRV_STR2(x)\n"
      "#pragma message(\"sycl-spirv-probe|\" __VERSION__ \"|\" SYCL_SPIRV_STR(__clang_major__) "
      "\".\" SYCL_SPIRV_STR(__clang_minor__) \".\" SYCL_SPIRV_STR(__clang_patchlevel__) \"|\" "
      "SYCL_SPIRV_STR(__SYCL_COMPILER_VERSION) \"|\")\n";
  const char *args[] = {"-fsycl-device-code-split=off"};
  rtc::RTCResult r = compileSYCL({"sycl-spirv-version-probe.cpp", kProbe}, {nullptr, 0},
                                 {args, 1}, {nullptr, 0}, false, rtc::FormatSPIRV);
  std::string log = r.BuildLog.c_str();
  size_t at = log.find("sycl-spirv-probe|");
  if (at == std::string::npos) return "";
  std::string rest = log.substr(at + std::strlen("sycl-spirv-probe|"));
  std::vector<std::string> parts;
  size_t pos = 0;
  for (int i = 0; i < 3; ++i) {
    size_t bar = rest.find('|', pos);
    if (bar == std::string::npos) return "";
    parts.push_back(rest.substr(pos, bar - pos));
    pos = bar + 1;
  }
  // __VERSION__ first (e.g. "Intel(R) oneAPI DPC++/C++ Compiler …" or "Clang …").
  return parts[0] + " (clang " + parts[1] + ", __SYCL_COMPILER_VERSION " + parts[2] + ")";
}

}  // namespace

int main(int argc, char **argv) {
  std::vector<std::string> user;  // options handed to the front end
  std::string source, output;
  bool verbose = false, have_split = false;

  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto take = [&](const char *opt) -> std::string {
      if (a.size() > std::strlen(opt)) return a.substr(std::strlen(opt));
      if (i + 1 >= argc) {
        std::fprintf(stderr, "sycl-spirv: %s needs an argument\n%s", opt, kUsage);
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--version") {
      std::string fe = front_end_version();
      std::printf("sycl-spirv: %s, libsycl-jit.so compileSYCL; front end: %s\n", SYCL_SPIRV_WHEEL,
                  fe.empty() ? "unknown (version probe failed)" : fe.c_str());
      return fe.empty() ? 3 : 0;
    } else if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a == "-v") {
      verbose = true;
    } else if (starts_with(a, "-o")) {
      output = take("-o");
    } else if (starts_with(a, "-I")) {
      user.push_back("-I" + take("-I"));
    } else if (starts_with(a, "-D")) {
      user.push_back("-D" + take("-D"));
    } else if (starts_with(a, "-U")) {
      user.push_back("-U" + take("-U"));
    } else if (a == "-include" || a == "-isystem" || a == "-Xclang") {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "sycl-spirv: %s needs an argument\n%s", a.c_str(), kUsage);
        return 2;
      }
      if (a == "-include") {
        // The embedded driver does not hand a plain -include to the device compile (seen with
        // 2026.2: silently dropped); the front end takes it through -Xclang.
        user.insert(user.end(), {"-Xclang", "-include", "-Xclang", argv[++i]});
      } else {
        user.push_back(a);
        user.push_back(argv[++i]);
      }
    } else if (starts_with(a, "-std=") || starts_with(a, "-f") || starts_with(a, "-W") ||
               starts_with(a, "-O") || a == "-pedantic" || a == "-w") {
      if (starts_with(a, "-fsycl-device-code-split")) have_split = true;
      user.push_back(a);
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "sycl-spirv: unsupported option '%s'\n%s", a.c_str(), kUsage);
      return 2;
    } else if (source.empty()) {
      source = a;
    } else {
      std::fprintf(stderr, "sycl-spirv: one source file only ('%s' and '%s')\n", source.c_str(),
                   a.c_str());
      return 2;
    }
  }
  if (source.empty() || output.empty()) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  if (!have_split) user.push_back("-fsycl-device-code-split=off");

  std::string contents;
  if (!read_file(source, contents)) {
    std::fprintf(stderr, "sycl-spirv: cannot read %s: %s\n", source.c_str(), std::strerror(errno));
    return 2;
  }
  std::vector<const char *> args;
  for (const auto &u : user) args.push_back(u.c_str());

  rtc::RTCResult r = compileSYCL({source.c_str(), contents.c_str()}, {nullptr, 0},
                                 {args.data(), args.size()}, {nullptr, 0}, false,
                                 rtc::FormatSPIRV);
  const char *log = r.BuildLog.c_str();
  if (r.ErrorCode != rtc::Success) {
    if (r.ErrorCode != rtc::ErrBuild && r.ErrorCode != rtc::ErrInvalid) {
      std::fprintf(stderr, "sycl-spirv: unexpected result code %d from compileSYCL\n",
                   (int)r.ErrorCode);
      return 3;
    }
    std::fputs(log, stderr);
    if (*log && log[std::strlen(log) - 1] != '\n') std::fputc('\n', stderr);
    std::fprintf(stderr, "sycl-spirv: %s: device compilation failed\n", source.c_str());
    return 1;
  }
  if (*log) {  // warnings
    std::fputs(log, stderr);
    if (log[std::strlen(log) - 1] != '\n') std::fputc('\n', stderr);
  }

  const auto &imgs = r.BundleInfo.DevImgInfos;
  if (imgs.Size == 0 || imgs.Values == nullptr || imgs.Size > 4096) {
    std::fprintf(stderr, "sycl-spirv: compileSYCL returned %zu device images\n", imgs.Size);
    return 3;
  }
  for (size_t i = 0; i < imgs.Size; ++i) {
    const rtc::JITBinaryInfo &b = imgs.Values[i].BinaryInfo;
    uint32_t magic = 0;
    if (b.BinaryStart && b.BinarySize >= 20) std::memcpy(&magic, b.BinaryStart, 4);
    if (b.Format != rtc::FormatSPIRV || magic != 0x07230203u) {
      std::fprintf(stderr,
                   "sycl-spirv: device image %zu is not SPIR-V (format %u, %llu bytes, magic "
                   "0x%08x): the library's interface differs from what this driver was built for\n",
                   i, b.Format, (unsigned long long)b.BinarySize, magic);
      return 3;
    }
  }
  // One image with the default split mode. Should a TU still yield several (an explicit split
  // mode, ESIMD kernels, bfloat16 device libraries), the first goes to OUT and image i to OUT.i.
  for (size_t i = 0; i < imgs.Size; ++i) {
    const rtc::RTCDevImgInfo &img = imgs.Values[i];
    std::string path = i == 0 ? output : output + "." + std::to_string(i);
    if (!write_file(path, img.BinaryInfo.BinaryStart, img.BinaryInfo.BinarySize)) {
      std::fprintf(stderr, "sycl-spirv: cannot write %s: %s\n", path.c_str(), std::strerror(errno));
      return 2;
    }
    if (verbose) {
      std::fprintf(stderr, "sycl-spirv: %s: %llu bytes SPIR-V, %zu entry points\n", path.c_str(),
                   (unsigned long long)img.BinaryInfo.BinarySize, img.SymbolTable.Size);
      for (size_t k = 0; k < img.SymbolTable.Size; ++k)
        std::fprintf(stderr, "  %s\n", img.SymbolTable.Values[k].c_str());
    }
  }
  if (imgs.Size > 1)
    std::fprintf(stderr, "sycl-spirv: %zu device images: %s, then %s.1 …\n", imgs.Size,
                 output.c_str(), output.c_str());
  return 0;
}
