"""The Python half of tests/ops/triton_aot_check.sh: the table scripts/triton_aot.py generated holds exactly the
launch configurations of each kernel module's launch_configs() for the architectures asked, each with the runtime
argument list of the kernel's Python-side signature() (the constexprs left out, Triton's two scratch pointers
appended); the C++ table (as triton_aot_check prints it) equals the tool's manifest, cubin bytes included; and every
embedded cubin fits A100's (sm_80) and H100's (sm_90) registers and shared memory.

    python triton_aot_check.py --manifest M --table T --cubins DIR --arch 80 --arch 90 MODULE.py...
"""
import argparse
import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys

os.environ.pop("TRITON_INTERPRET", None)

SCRATCH = [("global_scratch", "*i8"), ("profile_scratch", "*i8")]
# Shared memory a block may opt into (cudaDevAttrMaxSharedMemoryPerBlockOptin): A100, H100.
SHARED_LIMIT = {80: 166912, 90: 232448}
CTYPES = {"i32": "kInt32", "i64": "kInt64", "fp32": "kFloat", "fp64": "kDouble"}


def load(path):
    name = os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def expected_entries(paths, archs):
    """What the table must hold, in the tool's order: modules as given, then architecture, then launch_configs()."""
    entries = []
    for path in paths:
        module = load(path)
        configs = module.launch_configs()
        for arch in archs:
            for kernel, dtype, constexprs, num_warps, num_stages, config_arch in configs:
                if config_arch != arch:
                    continue
                signature = module.signature(kernel, dtype, constexprs)
                args = [(name, ty) for name, ty in signature.items() if ty != "constexpr"] + SCRATCH
                entries.append({"kernel": kernel.__name__, "module": module.__name__,
                                "dtype": str(dtype).split(".")[-1], "arch": arch, "num_warps": num_warps,
                                "num_stages": num_stages,
                                "constexprs": {k: int(v) for k, v in sorted(constexprs.items())}, "args": args})
    return entries


def cubin_facts(cubin_path):
    """(architecture, registers) of a cubin's kernel, e.g. ("sm_90a", 128), read with cuobjdump (the toolkit's,
    else Triton's)."""
    import triton
    cuobjdump = shutil.which("cuobjdump") or triton.knobs.nvidia.cuobjdump.path

    def run(option):
        return subprocess.run([cuobjdump, option, cubin_path], capture_output=True, text=True, check=True).stdout

    arch = re.search(r"\.(sm_\w+)\.cubin", run("--list-elf")).group(1)
    return arch, int(re.search(r"REG:(\d+)", run("--dump-resource-usage")).group(1))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("modules", nargs="+")
    parser.add_argument("--manifest", required=True)
    parser.add_argument("--table", required=True)
    parser.add_argument("--cubins", required=True)
    parser.add_argument("--arch", type=int, action="append", required=True)
    args = parser.parse_args()
    with open(args.manifest) as f:
        manifest = json.load(f)
    with open(args.table) as f:
        table = [json.loads(line) for line in f]
    expected = expected_entries(args.modules, sorted(set(args.arch)))
    failures = []

    def fail(message):
        failures.append(message)

    if len(manifest) != len(expected):
        fail(f"the manifest has {len(manifest)} entries, launch_configs() lists {len(expected)}")
    for i, (got, want) in enumerate(zip(manifest, expected)):
        where = f"entry {i} ({want['kernel']} {want['dtype']} sm_{want['arch']} {want['constexprs']})"
        for field in ("kernel", "module", "dtype", "arch", "num_warps", "num_stages", "constexprs"):
            if got[field] != want[field]:
                fail(f"{where}: {field} is {got[field]!r}, launch_configs() says {want[field]!r}")
        got_args = [(a["name"], a["type"]) for a in got["args"]]
        if got_args != want["args"]:
            fail(f"{where}: the arguments {got_args} differ from signature()'s {want['args']}")
        for a in got["args"]:
            ctype = "kPointer" if a["type"].startswith("*") else CTYPES.get(a["type"])
            if a["ctype"] != ctype:
                fail(f"{where}: argument {a['name']} ({a['type']}) is passed as {a['ctype']}, not {ctype}")
        if got["num_ctas"] != 1:
            fail(f"{where}: num_ctas is {got['num_ctas']}")
        if got["shared"] > SHARED_LIMIT[want["arch"]]:
            fail(f"{where}: {got['shared']} bytes of shared memory, over sm_{want['arch']}'s {SHARED_LIMIT[want['arch']]}")

    if len(table) != len(manifest):
        fail(f"the C++ table has {len(table)} entries, the manifest {len(manifest)}")
    regs_max = 0
    for i, (row, item) in enumerate(zip(table, manifest)):
        where = f"C++ entry {i} ({item['kernel']} {item['dtype']} sm_{item['arch']})"
        for field in ("kernel", "function", "module", "dtype", "arch", "num_warps", "num_stages", "num_ctas",
                      "shared", "constexprs", "cubin_bytes"):
            if row[field] != item[field]:
                fail(f"{where}: {field} is {row[field]!r}, the manifest says {item[field]!r}")
        if row["arch_specific"] != item["arch_name"].endswith("a"):
            fail(f"{where}: arch_specific is {row['arch_specific']} for {item['arch_name']}")
        row_args = [(a["name"], a["type"], a["ctype"], a["scratch"]) for a in row["args"]]
        item_args = [(a["name"], a["type"], a["ctype"], a["name"] in dict(SCRATCH)) for a in item["args"]]
        if row_args != item_args:
            fail(f"{where}: the arguments {row_args} differ from the manifest's {item_args}")
        path = os.path.join(args.cubins, f"{i}.cubin")
        with open(path, "rb") as f:
            data = f.read()
        if hashlib.sha256(data).hexdigest() != item["cubin_sha256"]:
            fail(f"{where}: the embedded cubin differs from the compiled one")
        arch, regs = cubin_facts(path)
        if arch != item["arch_name"]:
            fail(f"{where}: the cubin is {arch}, the table says {item['arch_name']}")
        regs_max = max(regs_max, regs)
        if regs > 255:
            fail(f"{where}: {regs} registers per thread, over 255")

    if failures:
        print(f"{len(failures)} disagreements, the first:")
        for message in failures[:10]:
            print("  " + message)
        return 1
    kernels = sorted({e["kernel"] for e in manifest})
    print(f"the table's {len(manifest)} entries ({len(kernels)} kernels) agree with launch_configs(), signature(), "
          f"the manifest and the cubins; at most {regs_max} registers, shared memory within A100's and H100's")
    return 0


if __name__ == "__main__":
    sys.exit(main())
