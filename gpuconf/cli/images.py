"""``gpuconf images list|build|mirror``: what a run pulls, building the probe images, and copying
every image a run pulls into a private registry."""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import subprocess
from typing import Any, TextIO

from gpuconf import images
from gpuconf.errors import EXIT_ENVIRONMENT, EXIT_OK, UsageError


def add_images_parser(sub: Any) -> None:
    p = sub.add_parser("images", help="list the images a run pulls, or build the probe images",
                       description="List every image a full run pulls (for mirroring into an air-gapped "
                       "registry), or build and push the probe images.")
    isub = p.add_subparsers(dest="images_command", required=True, parser_class=type(p))
    lst = isub.add_parser("list", help="print every image a full run pulls, one per line",
                          description="Without --registry: the public nvidia/cuda devel images the default "
                          "zero-registry mode compiles the probes in. With --registry: the prebuilt probe images.")
    lst.add_argument("--registry", help="registry holding prebuilt probe images, e.g. registry.example.com/ai")
    lst.add_argument("--json", action="store_true", help="print image, digest and purpose as JSON")
    lst.set_defaults(func=_cmd_list)
    build = isub.add_parser("build", help="build the probe images (needs docker)",
                            description="Build the cuda-probe for every CUDA version of the matrix and the "
                            "nccl-probe, tagged for --registry; --push pushes them.")
    build.add_argument("--registry", required=True, help="registry to tag (and push) for")
    build.add_argument("--push", action="store_true", help="push after building")
    build.add_argument("--dry-run", action="store_true", help="print the commands instead of running them")
    build.set_defaults(func=_cmd_build)
    mirror = isub.add_parser("mirror", help="copy every image a run pulls into a registry (prints the commands)",
                             description="Print (or with --run, run) one copy command per image a full run pulls: "
                             "by default the public nvidia/cuda devel images of the zero-registry mode, from Docker "
                             "Hub to REGISTRY/nvidia/cuda:<tag> (serve them through a containerd registry mirror for "
                             "docker.io); with --from, the prebuilt probe images from that registry to REGISTRY "
                             "(then run with --registry REGISTRY). Every platform of each image is copied.")
    mirror.add_argument("--registry", required=True, help="the registry to copy into, e.g. registry.example.com/ai")
    mirror.add_argument("--from", dest="source", metavar="REGISTRY", default=None,
                        help="copy the prebuilt probe images from this registry instead of the public devel images")
    mirror.add_argument("--tool", choices=images.MIRROR_TOOLS, default="skopeo",
                        help="the copy tool (default skopeo); it must be logged in to both registries")
    mirror.add_argument("--run", action="store_true", help="run the commands (needs the tool on PATH)")
    mirror.set_defaults(func=_cmd_mirror)


def _cmd_list(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    found = images.list_images(args.registry)
    if args.json:
        stdout.write(json.dumps([i.to_dict() for i in found], indent=2) + "\n")
        return EXIT_OK
    for image in found:
        stdout.write(image.pinned + "\n")
    unpinned = [i for i in found if not i.digest]
    if unpinned:
        stderr.write(f"gpuconf images: {len(unpinned)} of {len(found)} images have no known digest; "
                     "they are listed by tag\n")
    return EXIT_OK


def _cmd_build(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    if not args.registry.strip() or " " in args.registry:
        raise UsageError(f"not a registry: {args.registry!r}")
    commands = images.build_commands(args.registry, push=args.push)
    if args.dry_run:
        return _print_commands(commands, stdout)
    if shutil.which("docker") is None:
        stderr.write("gpuconf images build: docker is not on PATH (use --dry-run to see the commands)\n")
        return EXIT_ENVIRONMENT
    return _run_commands(commands, "build", stdout, stderr)


def _cmd_mirror(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    for name, value in (("--registry", args.registry), ("--from", args.source)):
        if value is not None and (not value.strip() or any(ch.isspace() for ch in value) or "://" in value):
            raise UsageError(f"{name} {value!r}: give a registry host and path, e.g. registry.example.com/ai "
                             "(no scheme)")
    commands = images.mirror_commands(args.registry, tool=args.tool, source_registry=args.source)
    if not args.run:
        return _print_commands(commands, stdout)
    if shutil.which(args.tool) is None:
        stderr.write(f"gpuconf images mirror: {args.tool} is not on PATH (without --run the commands are printed)\n")
        return EXIT_ENVIRONMENT
    return _run_commands(commands, "mirror", stdout, stderr)


def _print_commands(commands: list[list[str]], stdout: TextIO) -> int:
    for cmd in commands:
        stdout.write(shlex.join(cmd) + "\n")
    return EXIT_OK


def _run_commands(commands: list[list[str]], verb: str, stdout: TextIO, stderr: TextIO) -> int:
    """Each command in turn, echoed as ``+ cmd``; the first that fails stops the rest."""
    for cmd in commands:
        stdout.write(f"+ {shlex.join(cmd)}\n")
        stdout.flush()
        if subprocess.run(cmd, check=False).returncode != 0:
            stderr.write(f"gpuconf images {verb}: failed: {shlex.join(cmd)}\n")
            return EXIT_ENVIRONMENT
    return EXIT_OK
