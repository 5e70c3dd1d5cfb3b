"""What the GPU machine has for loader.gpu_decoder=nvimgcodec, before anything is timed (perf/loaders_hw_gpu.sh):
the library versions, the hardware JPEG decoder's engines as nvJPEG reports them (nvjpegGetHardwareDecoderInfo),
and one batch of the data set decoded by torchvision's decode_jpeg and by nvImageCodec at a few hardware shares:
the same shapes, and how far apart the pixels are (both are nvJPEG; the hardware and CUDA decoders may round
differently). Prints PROBE lines; exits 0 whatever it finds, so the script goes on.

  python perf/nvimgcodec_probe.py --data /tmp/ddl_jpeg [--batch 256]
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

NVJPEG_BACKEND_HARDWARE = 3  # nvjpeg.h nvjpegBackend_t


def nvjpeg_library() -> str | None:
    """A libnvjpeg.so on this machine: the nvidia-nvjpeg wheel's (nvidia/cu13/lib, next to nvImageCodec), else
    the one torchvision bundles."""
    patterns = []
    for root in sys.path:
        patterns += [f"{root}/nvidia/cu1*/lib/libnvjpeg.so*", f"{root}/nvidia/nvjpeg/lib/libnvjpeg.so*"]
    try:
        import torchvision

        patterns.append(str(Path(torchvision.__file__).parent.parent / "torchvision.libs" / "libnvjpeg*.so*"))
    except ImportError:
        pass
    for pattern in patterns:
        found = sorted(glob.glob(pattern))
        if found:
            return found[0]
    return None


def hardware_engines() -> str:
    path = nvjpeg_library()
    if path is None:
        return "no libnvjpeg found"
    lib = ctypes.CDLL(path)
    handle = ctypes.c_void_p()
    status = lib.nvjpegCreateEx(NVJPEG_BACKEND_HARDWARE, None, None, 0, ctypes.byref(handle))
    if status:
        return f"nvjpegCreateEx(NVJPEG_BACKEND_HARDWARE) returned {status} (no hardware decoder) [{path}]"
    engines, cores = ctypes.c_uint(), ctypes.c_uint()
    status = lib.nvjpegGetHardwareDecoderInfo(handle, ctypes.byref(engines), ctypes.byref(cores))
    if status:
        return f"nvjpegGetHardwareDecoderInfo returned {status} [{path}]"
    return f"{engines.value} engines x {cores.value} cores [{os.path.basename(path)}]"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--batch", type=int, default=256)
    args = parser.parse_args()

    import torch
    import torchvision

    print(f"PROBE torch {torch.__version__} (CUDA {torch.version.cuda}), torchvision {torchvision.__version__}")
    print(f"PROBE device {torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'none'}")
    print(f"PROBE nvJPEG hardware decoder: {hardware_engines()}")
    from benchmarks.loaders.gpu_decode import DECODERS, nvimgcodec_missing

    missing = nvimgcodec_missing()
    if missing:
        print(f"PROBE nvimgcodec: {missing}")
        return 0
    if not torch.cuda.is_available():
        print("PROBE no CUDA device: nothing decoded")
        return 0
    from nvidia import nvimgcodec

    print(f"PROBE nvimgcodec {nvimgcodec.__version__} (built for CUDA {nvimgcodec.__cuda_version__})")
    files = sorted(glob.glob(str(args.data / "*" / "*.jpg")))[: args.batch]
    encoded = [torch.frombuffer(bytearray(open(f, "rb").read()), dtype=torch.uint8) for f in files]
    device = torch.device("cuda", 0)
    stream = torch.cuda.Stream(device)
    with torch.cuda.stream(stream):
        reference = DECODERS["torchvision"](device, stream=stream, batch_size=len(files), hw_decoder_load=1.0)
        expected = reference.decode(encoded)
        for load in (1.0, 0.65, 0.0):
            try:
                decoder = DECODERS["nvimgcodec"](device, stream=stream, batch_size=len(files), hw_decoder_load=load)
                images = decoder.decode(encoded)
                torch.cuda.synchronize(device)
            except Exception as error:  # reported, and the script goes on to what still runs
                print(f"PROBE nvimgcodec hw_decoder_load={load:g}: FAILED {type(error).__name__}: {error}")
                continue
            same = [tuple(a.shape) == tuple(b.shape) for a, b in zip(images, expected)]
            diff = [(a.int() - b.int()).abs() for a, b, ok in zip(images, expected, same) if ok]
            worst = max(int(d.max()) for d in diff) if diff else -1
            mean = sum(float(d.float().mean()) for d in diff) / max(1, len(diff))
            print(
                f"PROBE nvimgcodec hw_decoder_load={load:g}: {len(images)} of {len(files)} images, "
                f"{sum(same)} shaped as decode_jpeg's, pixel |diff| max {worst} mean {mean:.3f}; {decoder.describe()}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
