"""``gpuconf predict``: what NVIDIA's stack will do with an image on a node, explained."""

from __future__ import annotations

import argparse
import json
from typing import Any, TextIO

from gpuconf.compat import tables
from gpuconf.compat.rules import Image, Mode, Node, Prediction, Runtime, image_from_cuda, image_from_ref, predict
from gpuconf.compat.versions import VersionError, parse_cuda, parse_driver
from gpuconf.errors import EXIT_OK, EXIT_REJECTED, UsageError

_CLASSES = ("data-center", "workstation", "consumer")


def add_predict_parser(sub: Any) -> None:
    p = sub.add_parser(
        "predict",
        help="predict what happens when an image runs on a node (which CUDA rule, what error)",
        description="Explain which CUDA compatibility rule applies when an image runs on a node, "
        "whether it runs, and if not where it fails and what the user will see. Anything left "
        "out (toolkit version, runtime mode, GPU class, cuda-compat) is treated as unknown and "
        "every possible outcome is listed with the conditions under which it happens.",
    )
    p.add_argument("--driver", required=True, help="node driver version, e.g. 570.133.20")
    p.add_argument("--driver-cuda", help="the driver's native CUDA (nvidia-smi 'CUDA Version'), "
                   "needed only for a branch not in the data")
    p.add_argument("--gpu", help="GPU product as nvidia-smi or GFD name it, e.g. 'NVIDIA H100 80GB HBM3'")
    p.add_argument("--gpu-class", choices=_CLASSES, help="override the GPU's class")
    p.add_argument("--brand", help="override the NVML brand (Nvidia, Tesla, GeForce, NvidiaRTX...)")
    p.add_argument("--arch", help="override the compute capability, e.g. 9.0")
    p.add_argument("--image", help="image reference, e.g. nvidia/cuda:13.0.0-base-ubuntu24.04")
    p.add_argument("--image-cuda", help="CUDA version the image is built with, e.g. 13.0")
    p.add_argument("--require", help="the image's NVIDIA_REQUIRE_CUDA (overrides the official one)")
    p.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                   help="more container environment (repeatable), e.g. NVIDIA_DISABLE_REQUIRE=true")
    p.add_argument("--compat", choices=("yes", "no"), help="whether the image carries cuda-compat "
                   "(/usr/local/cuda/compat); official nvidia/cuda images do")
    p.add_argument("--toolkit", help="NVIDIA Container Toolkit version on the node, e.g. 1.17.8")
    p.add_argument("--mode", choices=[m.value for m in Mode], default="auto",
                   help="nvidia-container-runtime mode (default: auto, as configured by default)")
    p.add_argument("--launcher", choices=("runtime", "hook"), default="runtime",
                   help="runtime: the nvidia RuntimeClass (default); hook: the bare prestart hook")
    p.add_argument("--device-list-strategy", choices=("envvar", "volume-mounts", "cdi-annotations", "cdi-cri"),
                   help="the NVIDIA device plugin's deviceListStrategy (GPU Operator with CDI enabled uses "
                   "cdi-cri); cdi-* means the requirement check never runs")
    p.add_argument("--uses-new-apis", action="store_true",
                   help="the program calls CUDA APIs newer than the driver's native CUDA: under "
                   "minor-version compatibility that is a failure (36), not a caveat")
    p.add_argument("--ptx-jit", action="store_true",
                   help="the program ships PTX only (no SASS for this GPU): under minor-version "
                   "compatibility PTX from a newer toolkit fails to JIT (222)")
    p.add_argument("--json", action="store_true", help="print the prediction as JSON")
    p.set_defaults(func=_cmd_predict)


def _toolkit(text: str | None) -> tuple[int, ...] | None:
    if text is None:
        return None
    parts = text.strip().lstrip("v").split(".")
    if not all(p.isdigit() for p in parts) or len(parts) < 2:
        raise UsageError(f"not a toolkit version: {text!r} (expected e.g. 1.17.8)")
    return tuple(int(p) for p in parts)


def build(args: argparse.Namespace) -> tuple[Node, Image, Runtime]:
    try:
        driver = parse_driver(args.driver)
        driver_cuda = parse_cuda(args.driver_cuda) if args.driver_cuda else None
        image_cuda = parse_cuda(args.image_cuda) if args.image_cuda else None
        if args.arch is not None:
            parse_cuda(args.arch)
    except VersionError as exc:
        raise UsageError(str(exc)) from exc

    notes: list[str] = []
    model = tables.find_gpu(args.gpu) if args.gpu else None
    if args.gpu and model is None:
        notes.append(f"GPU {args.gpu!r} is not in gpuconf/data/gpus.yaml: its class and brand are unknown")
    node = Node(
        driver=driver, driver_cuda=driver_cuda,
        gpu_name=model.name if model else args.gpu,
        gpu_class=args.gpu_class or (model.gpu_class if model else None),
        brand=args.brand or (model.nvml_brand if model else None),
        arch=args.arch or (model.compute_capability if model else None),
    )
    if node.driver_cuda is None and tables.native_cuda(driver) is None:
        raise UsageError(f"driver branch {driver.branch} is not in gpuconf/data/driver_branches.yaml; "
                         "give its native CUDA with --driver-cuda (nvidia-smi's 'CUDA Version')")

    if args.image:
        image = image_from_ref(args.image)
        if image is None:
            if image_cuda is None:
                raise UsageError(f"{args.image!r} is not an nvidia/cuda image: say which CUDA it is "
                                 "built with (--image-cuda 12.8)")
            image = Image(cuda=image_cuda, ref=args.image, env=None, compat=None)
        elif image_cuda is not None:
            image = Image(cuda=image_cuda, ref=image.ref, env=image.env, compat=image.compat,
                          assumptions=image.assumptions)
    elif image_cuda is not None:
        image = image_from_cuda(image_cuda)
    else:
        raise UsageError("say which image: --image nvidia/cuda:13.0.0-base-ubuntu24.04 or --image-cuda 13.0")

    env = list(image.env) if image.env is not None else None
    if args.require is not None:
        env = [e for e in (env or []) if not e.startswith("NVIDIA_REQUIRE_CUDA=")]
        env.append(f"NVIDIA_REQUIRE_CUDA={args.require}")
    if args.env:
        env = (env or []) + list(args.env)
    compat = image.compat if args.compat is None else args.compat == "yes"
    image = Image(cuda=image.cuda, ref=image.ref, env=tuple(env) if env is not None else None,
                  compat=compat, assumptions=(*image.assumptions, *notes),
                  uses_new_apis=args.uses_new_apis, ptx_jit=args.ptx_jit)
    runtime = Runtime(toolkit=_toolkit(args.toolkit), mode=Mode(args.mode), launcher=args.launcher,
                      device_list_strategy=args.device_list_strategy)
    return node, image, runtime


_RULE_NAMES = {
    "backward": "backward compatibility",
    "minor-version": "minor-version compatibility",
    "forward-compat": "forward compatibility (cuda-compat)",
    "none": "no compatibility rule applies",
}


def render(p: Prediction) -> str:
    lines = [f"gpuconf predict: {p.image.ref or 'CUDA ' + str(p.image.cuda) + ' image'} on "
             f"{p.node.gpu_name or 'a GPU'} with driver {p.node.driver}", ""]
    lines += ["Facts:"] + [f"  - {f}" for f in p.facts]
    verdict = {"runs": "RUNS", "fails": "FAILS", "depends": "DEPENDS on the node's setup"}[p.verdict]
    lines += ["", f"Verdict: {verdict}"]
    for n, o in enumerate(p.outcomes, start=1):
        head = "runs" if o.result == "runs" else f"fails at {o.stage}"
        lines += ["", f"Outcome {n}: {head} ({_RULE_NAMES[o.rule]})"]
        if len(p.outcomes) > 1 or any(o.conditions):
            lines.append("  when:")
            lines += [f"    - {'; '.join(c)}" for c in o.conditions if c]
        lines.append("  why:")
        lines += [f"    - {w}" for w in o.why]
        if o.error_message:
            if o.error_code is not None:
                lines.append(f"  error: {o.error_name} ({o.error_code}): {o.error_message}")
            else:
                lines.append(f"  error: {o.error_message}")
        lines.append(f"  what you will see: {o.seen}")
        if o.caveats:
            lines.append("  caveats:")
            lines += [f"    - {c}" for c in o.caveats]
    if p.assumptions:
        lines += ["", "Assumptions:"] + [f"  - {a}" for a in p.assumptions]
    return "\n".join(lines) + "\n"


def _cmd_predict(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    node, image, runtime = build(args)
    try:
        prediction = predict(node, image, runtime)
    except VersionError as exc:
        raise UsageError(str(exc)) from exc
    if args.json:
        stdout.write(json.dumps(prediction.to_dict(), indent=2) + "\n")
    else:
        stdout.write(render(prediction))
    return EXIT_OK if prediction.verdict == "runs" else EXIT_REJECTED
