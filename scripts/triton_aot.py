#!/usr/bin/env python3
"""Compiles seqmix's Triton kernels ahead of time and writes them as C++: every launch configuration of each kernel
module's launch_configs(), for each architecture asked, compiled with triton.compile (no GPU or driver needed) into
one generated source that holds the cubins and a table of entries, and a header that declares the table. The C++
launcher (src/ops/common/triton_launch.h) loads a cubin with the CUDA driver API and packs the arguments from the
entry's argument list, which comes from the compiled kernel's signature (and is checked against its PTX entry), so
the launcher and the kernel cannot drift. Run at build time with the venv's Python:

    .venv/bin/python scripts/triton_aot.py src/ops/fem/fem_softmax_read_triton.py src/ops/gla/gla_triton.py \
        --arch 80 --arch 90 --out build/generated/triton_kernels.cpp --header build/generated/triton_kernels.h \
        [--manifest build/generated/triton_kernels.json] [--jobs 1]

The outputs depend only on the inputs (the same modules, architectures and Triton give identical files); each is
written to a temporary file and renamed into place. Triton's cache (~/.triton/cache, or TRITON_CACHE_DIR) is reused,
so a rebuild after an unrelated change compiles nothing. A kernel that fails to compile stops the tool with one line
naming the configuration. The cubins carry no line info (Nsight Compute shows their SASS, not the Triton source
lines; the Python path's JIT-compiled kernels have them).
"""
import argparse
import concurrent.futures
import hashlib
import importlib.util
import json
import multiprocessing
import os
import re
import sys
import tempfile

# The interpreter makes @triton.jit kernels that cannot be compiled; this tool always compiles.
os.environ.pop("TRITON_INTERPRET", None)
# No line info: it is the PTX text and line tables in the cubin (about 70% of its bytes, and the checkout's absolute
# path); the code, registers and constants are the same bit for bit (compared for three sm_80 kernels of both files).
os.environ["TRITON_DISABLE_LINE_INFO"] = "1"

# The C type each runtime argument is passed as (Triton's launcher's choices, driver.c's extractors) and its
# CType in triton_launch.h. Types outside this list fail the tool: the launcher passes no others.
C_TYPES = {"i32": ("int32_t", "kInt32"), "i64": ("int64_t", "kInt64"), "fp32": ("float", "kFloat"),
           "fp64": ("double", "kDouble")}
POINTER = ("CUdeviceptr", "kPointer")
# The PTX parameter each of them is (".param .u64 .ptr .global .align 1 name_param_0", ".param .u32 ...").
PTX_PARAMS = {"kPointer": ".u64 .ptr", "kInt32": ".u32", "kInt64": ".u64", "kFloat": ".f32", "kDouble": ".f64"}
# The two pointer arguments Triton appends to every kernel (global and profile scratch); the launcher passes null.
SCRATCH = ("global_scratch", "profile_scratch")


class AotError(Exception):
    """A failure the tool reports in one line."""


def load_module(path):
    name = os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None:
        raise AotError(f"{path} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for needed in ("launch_configs", "ast_source"):
        if not hasattr(module, needed):
            raise AotError(f"{path} has no {needed}() (a kernel module defines launch_configs and ast_source)")
    flag = getattr(module, "INTERPRETER_DOT_IN_FP32", None)
    if flag is not None and bool(getattr(flag, "value", flag)):
        raise AotError(f"{path} sets INTERPRETER_DOT_IN_FP32, which only the interpreter tests may set")
    return module


def dtype_name(dtype):
    return str(dtype).split(".")[-1]


def describe(kernel, dtype, constexprs, arch):
    values = " ".join(f"{k}={int(v)}" for k, v in sorted(constexprs.items()))
    return f"{kernel.__name__} {dtype_name(dtype)} sm_{arch} {values}"


def one_line(error):
    """An exception as one line: its type and the last non-empty line of its message (Triton's compile errors
    print the source before the cause)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return f"{type(error).__name__}: {lines[-1] if lines else 'no message'}"


def ptx_params(ptx, function):
    """The PTX parameter types of entry `function`, e.g. ['.u64 .ptr', '.u32', '.f32']."""
    found = re.search(r"\.entry\s+" + re.escape(function) + r"\s*\((.*?)\)", ptx, re.S)
    if found is None:
        raise AotError(f"the PTX has no entry {function}")
    params = []
    for line in found.group(1).split(","):
        words = line.split()
        if not words:
            continue
        kind = words[1]
        params.append(f"{kind} .ptr" if ".ptr" in words else kind)
    return params


def runtime_args(kernel, signature, ptx, function):
    """The runtime argument list [(name, triton type, C type, CType)] of a compiled kernel: its signature without
    the constexprs, then the two scratch pointers; checked parameter by parameter against the PTX entry."""
    args = []
    for name in kernel.arg_names:
        ty = signature[name]
        if ty == "constexpr":
            continue
        if ty.startswith("*"):
            c_type, ctype = POINTER
        elif ty in C_TYPES:
            c_type, ctype = C_TYPES[ty]
        else:
            raise AotError(f"argument {name} is {ty}; the C++ launcher passes pointers, "
                           f"{', '.join(C_TYPES)} only")
        args.append((name, ty, c_type, ctype))
    args += [(name, "*i8", *POINTER) for name in SCRATCH]
    params = ptx_params(ptx, function)
    if len(params) != len(args):
        raise AotError(f"the compiled kernel takes {len(params)} parameters, its signature gives {len(args)}")
    for index, ((name, ty, _, ctype), param) in enumerate(zip(args, params)):
        if PTX_PARAMS[ctype] != param:
            raise AotError(f"parameter {index} ({name}, {ty}) is {param} in the PTX, not {PTX_PARAMS[ctype]}")
    return args


def compile_config(module, kernel, dtype, constexprs, num_warps, num_stages, arch):
    """One configuration compiled for sm_<arch>: the table entry's fields and the cubin."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.backends.nvidia.compiler import sm_arch_from_capability
    # Floating-point contraction pinned to Triton 3.9's default (which the JIT and the tests compile with), so a
    # change of Triton's default cannot change the cubins silently; the options' hash, and so the cache, are as
    # without it.
    options = {"num_warps": num_warps, "num_stages": num_stages, "enable_fp_fusion": True}
    compiled = triton.compile(module.ast_source(kernel, dtype, constexprs), target=GPUTarget("cuda", arch, 32),
                              options=options)
    md = compiled.metadata
    unsupported = {"num_ctas": (md.num_ctas, 1), "global_scratch_size": (md.global_scratch_size, 0),
                   "profile_scratch_size": (md.profile_scratch_size, 0), "tmem_size": (md.tmem_size, 0),
                   "launch_cooperative_grid": (bool(md.launch_cooperative_grid), False),
                   "launch_pdl": (bool(md.launch_pdl), False)}
    for field, (got, supported) in unsupported.items():
        if got != supported:
            raise AotError(f"the compiled kernel has {field} = {got}; the C++ launcher supports {supported} only")
    if md.num_warps != num_warps:
        raise AotError(f"compiled with {md.num_warps} warps, launch_configs() asked {num_warps}")
    args = runtime_args(kernel, compiled.src.signature, compiled.asm["ptx"], md.name)
    return {"kernel": kernel.__name__, "function": md.name, "module": module.__name__, "dtype": dtype_name(dtype),
            "arch": arch, "arch_name": sm_arch_from_capability(arch), "constexprs": {k: int(v) for k, v in sorted(constexprs.items())},
            "num_warps": md.num_warps, "num_stages": md.num_stages, "num_ctas": md.num_ctas, "shared": md.shared,
            "args": [{"name": n, "type": t, "c_type": c, "ctype": k} for n, t, c, k in args],
            "cubin": bytes(compiled.asm["cubin"])}


# ---- jobs: (module index, configuration index), compiled here or in worker processes -------------------------

_MODULES = []


def _load_all(paths):
    _MODULES[:] = [load_module(path) for path in paths]


def _run_job(job):
    """Compiles one job; returns (entry, None) or (None, the one-line error)."""
    module_index, config_index = job
    module = _MODULES[module_index]
    kernel, dtype, constexprs, num_warps, num_stages, arch = module.launch_configs()[config_index]
    where = describe(kernel, dtype, constexprs, arch)
    try:
        for name, value in constexprs.items():
            if not isinstance(value, (bool, int)):
                raise AotError(f"constexpr {name} = {value!r} is not an int or bool (the table holds integers)")
        return compile_config(module, kernel, dtype, constexprs, num_warps, num_stages, arch), None
    except AotError as error:
        return None, f"{where}: {error}"
    except Exception as error:  # Triton's compile errors: the cause in one line
        return None, f"{where} failed to compile: {one_line(error)}"


def compile_all(paths, archs, jobs):
    _load_all(paths)
    work = []
    for module_index, module in enumerate(_MODULES):
        configs = module.launch_configs()
        for arch in archs:
            if not any(config[5] == arch for config in configs):
                raise AotError(f"{paths[module_index]}: launch_configs() lists no configuration for sm_{arch}")
        work += [(module_index, i) for i, config in enumerate(configs) if config[5] in archs]
    if jobs == 1:
        results = [_run_job(job) for job in work]
    else:
        context = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=context, initializer=_load_all,
                                                    initargs=(paths,)) as pool:
            results = list(pool.map(_run_job, work))
    entries = []
    for entry, error in results:
        if error is not None:
            raise AotError(error)
        entries.append(entry)
    # Modules in the order given, then architecture, then launch_configs()' order.
    order = {job: i for i, job in enumerate(work)}
    keyed = sorted(zip(work, entries), key=lambda je: (je[0][0], archs.index(je[1]["arch"]), order[je[0]]))
    return [entry for _, entry in keyed]


# ---- C++ ----------------------------------------------------------------------------------------------------

def c_string(data, width=120):
    """Bytes as adjacent C string literals of about `width` characters: printable ASCII as itself, every other byte
    as a three-digit octal escape (never ambiguous with a following digit); '?' escaped against trigraphs."""
    pieces, line, size = [], [], 0
    for byte in data:
        ch = chr(byte)
        text = ch if 32 <= byte < 127 and ch not in '"\\?' else f"\\{byte:03o}"
        line.append(text)
        size += len(text)
        if size >= width:
            pieces.append('"' + "".join(line) + '"')
            line, size = [], 0
    if line or not pieces:
        pieces.append('"' + "".join(line) + '"')
    return "\n    ".join(pieces)


def camel(name):
    return "".join(part.capitalize() for part in name.split("_"))


def arg_list_key(entry):
    return tuple((a["name"], a["type"], a["ctype"]) for a in entry["args"])


def render_source(entries, header_name, inputs, archs, triton_version):
    out = [f"// Generated by scripts/triton_aot.py from {', '.join(inputs)} (Triton {triton_version}, "
           f"{', '.join(f'sm_{a}' for a in archs)}); do not edit.",
           f"// {len(entries)} cubins, {sum(len(e['cubin']) for e in entries)} bytes.",
           f'#include "{header_name}"',
           '#include "triton_launch.h"',
           "",
           "namespace seqmix::triton {",
           "namespace {",
           ""]
    # One argument list per distinct list (the same kernel at every configuration of one dtype shares it).
    lists = {}
    for entry in entries:
        key = arg_list_key(entry)
        if key not in lists:
            lists[key] = f"kArgs{len(lists)}"
            out.append(f"// {entry['kernel']} on {entry['dtype']} inputs: "
                       + ", ".join(f"{a['c_type']} {a['name']}" for a in entry["args"]))
            out.append(f"const ArgSpec {lists[key]}[] = {{")
            for a in entry["args"]:
                scratch = "true" if a["name"] in SCRATCH else "false"
                out.append(f'    {{"{a["name"]}", "{a["type"]}", CType::{a["ctype"]}, {scratch}}},')
            out.append("};")
            out.append("")
    for i, entry in enumerate(entries):
        out.append(f"// {describe_entry(entry)}: {len(entry['cubin'])} bytes")
        out.append(f"const Constexpr kConstexprs{i}[] = {{"
                   + ", ".join(f'{{"{k}", {v}}}' for k, v in entry["constexprs"].items()) + "};")
        # Aligned as an ELF image is read (cuModuleLoadData takes the bytes in place).
        out.append(f"alignas(64) const unsigned char kCubin{i}[] =\n    {c_string(entry['cubin'])};")
        out.append(f"static_assert(sizeof(kCubin{i}) == {len(entry['cubin'])} + 1, \"cubin {i} is truncated\");")
        out.append("")
    out.append("const KernelEntry kEntries[] = {")
    for i, entry in enumerate(entries):
        args = lists[arg_list_key(entry)]
        specific = "true" if entry["arch_name"].endswith("a") else "false"
        out.append(f'    {{"{entry["kernel"]}", "{entry["function"]}", "{entry["module"]}", "{entry["dtype"]}", '
                   f'{entry["arch"]}, {specific}, kConstexprs{i}, {len(entry["constexprs"])}, '
                   f'{entry["num_warps"]}, {entry["num_stages"]}, {entry["num_ctas"]}, {entry["shared"]}, '
                   f'{args}, {len(entry["args"])}, kCubin{i}, {len(entry["cubin"])}}},')
    out.append("};")
    out.append("")
    out.append("}  // namespace")
    out.append("")
    out.append(f"extern const KernelTable kTritonKernels = {{kEntries, {len(entries)}}};")
    out.append("")
    out.append("}  // namespace seqmix::triton")
    return "\n".join(out) + "\n"


def describe_entry(entry):
    values = " ".join(f"{k}={v}" for k, v in entry["constexprs"].items())
    return (f"{entry['kernel']} {entry['dtype']} {entry['arch_name']} {values} warps={entry['num_warps']} "
            f"shared={entry['shared']}")


def render_header(entries, inputs, archs, triton_version):
    out = [f"// Generated by scripts/triton_aot.py from {', '.join(inputs)} (Triton {triton_version}); do not edit.",
           "// The Triton kernels compiled ahead of time: the table the C++ launcher (src/ops/common/triton_launch.h)",
           "// finds and launches them from, and each kernel's name, so that a renamed kernel fails to compile.",
           "#pragma once",
           "",
           "namespace seqmix::triton {",
           "",
           "struct KernelTable;",
           f"// {len(entries)} entries: every launch configuration of launch_configs() for "
           + ", ".join(f"sm_{a}" for a in archs) + ".",
           "extern const KernelTable kTritonKernels;",
           ""]
    kernels = {}
    for entry in entries:
        kernels.setdefault(entry["kernel"], []).append(entry)
    for kernel, group in kernels.items():
        # Each argument's types over the dtypes ("*fp32|*fp16|*bf16" where a pointer follows the inputs' dtype).
        columns = []
        for position, arg in enumerate(group[0]["args"]):
            types = []
            for entry in group:
                ty = entry["args"][position]["type"]
                if ty not in types:
                    types.append(ty)
            columns.append(f"{arg['name']} {'|'.join(types)}")
        out.append(f"// {kernel}({', '.join(columns)})")
        out.append(f'inline constexpr char k{camel(kernel)}[] = "{kernel}";')
        out.append("")
    out.append("}  // namespace seqmix::triton")
    return "\n".join(out) + "\n"


def render_manifest(entries):
    listed = []
    for entry in entries:
        item = {k: v for k, v in entry.items() if k != "cubin"}
        item["cubin_bytes"] = len(entry["cubin"])
        item["cubin_sha256"] = hashlib.sha256(entry["cubin"]).hexdigest()
        listed.append(item)
    return json.dumps(listed, indent=1, sort_keys=True) + "\n"


def write_atomically(path, text):
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, temp = tempfile.mkstemp(dir=directory, prefix=os.path.basename(path) + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temp, 0o666 & ~umask)  # mkstemp's file is private; the output is an ordinary file
        os.replace(temp, path)
    except BaseException:
        os.unlink(temp)
        raise


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("modules", nargs="+", help="kernel modules (*_triton.py) with launch_configs()")
    parser.add_argument("--arch", type=int, action="append", required=True,
                        help="a compute capability to compile for, e.g. 80 or 90 (repeat for several)")
    parser.add_argument("--out", required=True, help="the generated C++ source")
    parser.add_argument("--header", required=True, help="the generated header that declares the table")
    parser.add_argument("--manifest", help="also write the table as JSON (the checks read it)")
    parser.add_argument("--jobs", type=int, default=1, help="compile processes (default 1)")
    args = parser.parse_args()
    archs = sorted(set(args.arch))
    try:
        if args.jobs < 1:
            raise AotError(f"--jobs must be at least 1 (got {args.jobs})")
        for path in args.modules:
            if not os.path.isfile(path):
                raise AotError(f"no kernel module {path}")
        import triton
        entries = compile_all(args.modules, archs, args.jobs)
        inputs = [os.path.basename(path) for path in args.modules]
        header = os.path.relpath(os.path.abspath(args.header), os.path.dirname(os.path.abspath(args.out)))
        outputs = [(args.out, render_source(entries, header, inputs, archs, triton.__version__)),
                   (args.header, render_header(entries, inputs, archs, triton.__version__))]
        if args.manifest:
            outputs.append((args.manifest, render_manifest(entries)))
        for path, text in outputs:
            write_atomically(path, text)
    except AotError as error:
        print(f"scripts/triton_aot.py: {error}", file=sys.stderr)
        return 1
    print(f"scripts/triton_aot.py: {len(entries)} cubins ({sum(len(e['cubin']) for e in entries)} bytes) "
          f"for {', '.join(f'sm_{a}' for a in archs)} in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
