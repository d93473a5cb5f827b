#!/usr/bin/env python3
"""ROCm 7.2's LLVM as the middle and back end of the amd-rocm-7.2 hipcc wrapper.

The PyPI wheel rocm-llvm-python ships ROCm's LLVM (with the AMDGPU target) as one shared
library, rocm/llvm/librocmllvm.so, behind LLVM's C API. This driver loads that library and
uses the C API to do what clang's back end does after the front end: read one device bitcode
module (made by clang-19 with -disable-llvm-passes, device libraries already linked), run the
new pass manager's default<On> pipeline with the AMDGPU target machine, and emit an ELF
relocatable object. ld.lld then links it into a code object (the wrapper does that).

  rocm_llvm_codegen.py --mcpu gfx942[:xnack-...] [-O3] [--mllvm -opt=val]... in.bc -o out.o
  rocm_llvm_codegen.py --version       one line: what this is (wheel, ROCm, LLVM versions)
  rocm_llvm_codegen.py --llvm-version  LLVM's own --version text (the library prints it)

Diagnostics go to stderr; any error exits non-zero.
"""

import ctypes
import os
import sys

TRIPLE = b"amdgcn-amd-amdhsa"

# LLVM C API enum values (llvm-c/TargetMachine.h, llvm-c/Core.h, llvm-c/Analysis.h).
OPT_LEVEL = {"0": 0, "1": 1, "2": 2, "3": 3, "s": 2, "z": 2, "fast": 3, "g": 1}
RELOC_PIC = 2
CODE_MODEL_DEFAULT = 0
OBJECT_FILE = 1
RETURN_STATUS_ACTION = 2
PIPELINE = {"0": "default<O0>", "1": "default<O1>", "2": "default<O2>", "3": "default<O3>",
            "s": "default<Os>", "z": "default<Oz>", "fast": "default<O3>", "g": "default<O1>"}
SEVERITY = {0: "error", 1: "warning", 2: "remark", 3: "note"}


def wheel():
    """The rocm.llvm package: its version module and the path of librocmllvm.so."""
    import rocm.llvm as rl  # the wheel's package; importing it loads no library

    path = os.path.join(os.path.dirname(rl.__file__), "librocmllvm.so")
    return rl, path


def version_line():
    rl, path = wheel()
    from rocm.llvm import _version as v

    lib = ctypes.CDLL(path)
    major, minor, patch = ctypes.c_uint(), ctypes.c_uint(), ctypes.c_uint()
    lib.LLVMGetVersion(ctypes.byref(major), ctypes.byref(minor), ctypes.byref(patch))
    return (
        f"ROCm {rl.ROCM_VERSION_NAME} LLVM {major.value}.{minor.value}.{patch.value} "
        f"(PyPI rocm-llvm-python {v.VERSION}, {v.ROCM_LLVM_PYTHON_BRANCH})"
    )


def fail(message):
    sys.stderr.write(f"rocm_llvm_codegen: error: {message}\n")
    sys.exit(1)


def parse_args(argv):
    args = {"mcpu": None, "opt": "3", "mllvm": [], "input": None, "output": None}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--mcpu" and i + 1 < len(argv):
            args["mcpu"] = argv[i + 1]
            i += 1
        elif a.startswith("--mcpu="):
            args["mcpu"] = a.split("=", 1)[1]
        elif a.startswith("-O"):
            level = a[2:] or "2"
            if level not in OPT_LEVEL:
                fail(f"unknown optimisation level {a}")
            args["opt"] = level
        elif a == "--mllvm" and i + 1 < len(argv):
            args["mllvm"].append(argv[i + 1])
            i += 1
        elif a == "-o" and i + 1 < len(argv):
            args["output"] = argv[i + 1]
            i += 1
        elif a.startswith("-"):
            fail(f"unknown argument {a}")
        elif args["input"] is None:
            args["input"] = a
        else:
            fail(f"more than one input: {args['input']}, {a}")
        i += 1
    if not args["mcpu"] or not args["input"] or not args["output"]:
        fail("usage: rocm_llvm_codegen.py --mcpu GFX [-On] [--mllvm OPT]... IN.bc -o OUT.o")
    return args


def split_target_id(target_id):
    """gfx90a:sramecc+:xnack- -> ("gfx90a", "+sramecc,-xnack")."""
    parts = target_id.split(":")
    features = []
    for f in parts[1:]:
        if len(f) < 2 or f[-1] not in "+-":
            fail(f"bad target ID feature {f!r} in {target_id}")
        features.append(f[-1] + f[:-1])
    return parts[0], ",".join(features)


# llvm::cl::ParseCommandLineOptions(int, const char *const *, StringRef, raw_ostream *Errs,
# vfs::FileSystem *, const char *EnvVar, bool) as LLVM 22 exports it. With Errs null it prints
# "Unknown command line argument" and exits 1, as clang does for a bad -mllvm option; the C
# API's LLVMParseCommandLineOptions passes a null stream instead and ignores such errors.
CL_PARSE = "_ZN4llvm2cl23ParseCommandLineOptionsEiPKPKcNS_9StringRefEPNS_11raw_ostreamEPNS_3vfs10FileSystemES2_b"


def parse_options(lib, options):
    if not options:
        return
    argv = [b"rocm-llvm"] + [o.encode() for o in options]
    arr = (ctypes.c_char_p * len(argv))(*argv)
    try:
        parse = getattr(lib, CL_PARSE)
    except AttributeError:
        lib.LLVMParseCommandLineOptions(len(argv), arr, None)
        return
    parse.restype = ctypes.c_bool
    parse.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t,
                      ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_bool]
    if not parse(len(argv), ctypes.cast(arr, ctypes.c_void_p), b"", 0, None, None, None, False):
        fail("bad -mllvm option in " + " ".join(options))


def main(argv):
    if argv == ["--version"]:
        print(version_line())
        return 0
    _, path = wheel()
    lib = ctypes.CDLL(path)
    if argv == ["--llvm-version"]:
        sys.stdout.flush()
        arr = (ctypes.c_char_p * 2)(b"rocm-llvm", b"--version")
        lib.LLVMParseCommandLineOptions(2, arr, None)  # prints, then exits 0
        return 0
    args = parse_args(argv)
    cpu, features = split_target_id(args["mcpu"])
    level = OPT_LEVEL[args["opt"]]

    vp = ctypes.c_void_p
    lib.LLVMContextCreate.restype = vp
    lib.LLVMGetDiagInfoDescription.restype = vp
    lib.LLVMGetDiagInfoDescription.argtypes = [vp]
    lib.LLVMGetDiagInfoSeverity.argtypes = [vp]
    lib.LLVMDisposeMessage.argtypes = [vp]
    lib.LLVMCreateMemoryBufferWithContentsOfFile.argtypes = [
        ctypes.c_char_p, ctypes.POINTER(vp), ctypes.POINTER(vp)]
    lib.LLVMParseBitcodeInContext2.argtypes = [vp, vp, ctypes.POINTER(vp)]
    lib.LLVMGetTargetFromTriple.argtypes = [ctypes.c_char_p, ctypes.POINTER(vp), ctypes.POINTER(vp)]
    lib.LLVMCreateTargetMachine.restype = vp
    lib.LLVMCreateTargetMachine.argtypes = [
        vp, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_int,
        ctypes.c_int]
    lib.LLVMCreateTargetDataLayout.restype = vp
    lib.LLVMCreateTargetDataLayout.argtypes = [vp]
    lib.LLVMSetModuleDataLayout.argtypes = [vp, vp]
    lib.LLVMSetTarget.argtypes = [vp, ctypes.c_char_p]
    lib.LLVMVerifyModule.argtypes = [vp, ctypes.c_int, ctypes.POINTER(vp)]
    lib.LLVMCreatePassBuilderOptions.restype = vp
    for setter in ("LoopVectorization", "SLPVectorization", "LoopUnrolling", "LoopInterleaving",
                   "CallGraphProfile", "MergeFunctions"):
        getattr(lib, "LLVMPassBuilderOptionsSet" + setter).argtypes = [vp, ctypes.c_int]
    lib.LLVMRunPasses.restype = vp
    lib.LLVMRunPasses.argtypes = [vp, ctypes.c_char_p, vp, vp]
    lib.LLVMGetErrorMessage.restype = vp
    lib.LLVMGetErrorMessage.argtypes = [vp]
    lib.LLVMDisposeErrorMessage.argtypes = [vp]
    lib.LLVMTargetMachineEmitToFile.argtypes = [
        vp, vp, ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(vp)]

    def take(msg):
        text = ctypes.string_at(msg).decode("utf-8", "replace") if msg else ""
        if msg:
            lib.LLVMDisposeMessage(msg)
        return text

    # The -mllvm options clang's driver gives the back end (hipcc's and the driver's own).
    parse_options(lib, args["mllvm"])

    for init in ("TargetInfo", "Target", "TargetMC", "AsmPrinter", "AsmParser"):
        getattr(lib, "LLVMInitializeAMDGPU" + init)()

    ctx = vp(lib.LLVMContextCreate())
    errors = []
    handler_type = ctypes.CFUNCTYPE(None, vp, vp)

    def on_diagnostic(info, _):
        severity = SEVERITY.get(lib.LLVMGetDiagInfoSeverity(info), "note")
        if severity not in ("error", "warning"):
            return  # the C API hands over every remark; clang shows none unless asked
        text = take(lib.LLVMGetDiagInfoDescription(info))
        sys.stderr.write(f"{args['input']}: {severity}: {text} [ROCm LLVM, {args['mcpu']}]\n")
        if severity == "error":
            errors.append(text)

    handler = handler_type(on_diagnostic)
    lib.LLVMContextSetDiagnosticHandler.argtypes = [vp, handler_type, vp]
    lib.LLVMContextSetDiagnosticHandler(ctx, handler, None)

    buf, msg = vp(), vp()
    if lib.LLVMCreateMemoryBufferWithContentsOfFile(args["input"].encode(), ctypes.byref(buf),
                                                    ctypes.byref(msg)):
        fail(f"{args['input']}: {take(msg)}")
    module = vp()
    if lib.LLVMParseBitcodeInContext2(ctx, buf, ctypes.byref(module)) or errors:
        fail(f"{args['input']}: cannot read bitcode")

    target = vp()
    if lib.LLVMGetTargetFromTriple(TRIPLE, ctypes.byref(target), ctypes.byref(msg)):
        fail(take(msg))
    tm = vp(lib.LLVMCreateTargetMachine(target, TRIPLE, cpu.encode(), features.encode(), level,
                                        RELOC_PIC, CODE_MODEL_DEFAULT))
    if not tm:
        fail(f"cannot make a target machine for {args['mcpu']}")
    lib.LLVMSetTarget(module, TRIPLE)
    lib.LLVMSetModuleDataLayout(module, vp(lib.LLVMCreateTargetDataLayout(tm)))
    if lib.LLVMVerifyModule(module, RETURN_STATUS_ACTION, ctypes.byref(msg)):
        fail(f"{args['input']}: invalid module: {take(msg)}")
    take(msg)

    # Say in the object's .comment (llvm.ident) which LLVM made the code, beside clang-19's ident.
    lib.LLVMMDStringInContext2.restype = vp
    lib.LLVMMDStringInContext2.argtypes = [vp, ctypes.c_char_p, ctypes.c_size_t]
    lib.LLVMMDNodeInContext2.restype = vp
    lib.LLVMMDNodeInContext2.argtypes = [vp, ctypes.POINTER(vp), ctypes.c_size_t]
    lib.LLVMMetadataAsValue.restype = vp
    lib.LLVMMetadataAsValue.argtypes = [vp, vp]
    lib.LLVMAddNamedMetadataOperand.argtypes = [vp, ctypes.c_char_p, vp]
    ident = f"{version_line()} AMDGPU codegen".encode()
    node = (vp * 1)(lib.LLVMMDStringInContext2(ctx, ident, len(ident)))
    lib.LLVMAddNamedMetadataOperand(
        module, b"llvm.ident", lib.LLVMMetadataAsValue(ctx, lib.LLVMMDNodeInContext2(ctx, node, 1)))

    # clang at -O2/-O3 turns on loop and SLP vectorisation (-vectorize-loops -vectorize-slp).
    opts = vp(lib.LLVMCreatePassBuilderOptions())
    vectorize = 1 if level >= 2 else 0
    lib.LLVMPassBuilderOptionsSetLoopVectorization(opts, vectorize)
    lib.LLVMPassBuilderOptionsSetSLPVectorization(opts, vectorize)
    lib.LLVMPassBuilderOptionsSetLoopUnrolling(opts, 1 if level >= 1 else 0)
    lib.LLVMPassBuilderOptionsSetLoopInterleaving(opts, 1 if level >= 1 else 0)
    lib.LLVMPassBuilderOptionsSetCallGraphProfile(opts, 1)
    lib.LLVMPassBuilderOptionsSetMergeFunctions(opts, 0)
    pipeline = PIPELINE[args["opt"]]
    err = vp(lib.LLVMRunPasses(module, pipeline.encode(), tm, opts))
    if err:
        text = ctypes.string_at(lib.LLVMGetErrorMessage(err)).decode()
        fail(f"{args['input']}: pass pipeline {pipeline}: {text}")
    if errors:
        return 1

    out = os.fsencode(args["output"])
    if lib.LLVMTargetMachineEmitToFile(tm, module, out, OBJECT_FILE, ctypes.byref(msg)):
        fail(f"{args['input']}: code generation for {args['mcpu']}: {take(msg)}")
    if errors:
        try:
            os.unlink(args["output"])
        except OSError:
            pass
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
