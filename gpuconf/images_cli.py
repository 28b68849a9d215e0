"""``gpuconf images list|build``: what a run pulls, and building the probe images."""

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
        for cmd in commands:
            stdout.write(shlex.join(cmd) + "\n")
        return EXIT_OK
    if shutil.which("docker") is None:
        stderr.write("gpuconf images build: docker is not on PATH (use --dry-run to see the commands)\n")
        return EXIT_ENVIRONMENT
    for cmd in commands:
        stdout.write(f"+ {shlex.join(cmd)}\n")
        stdout.flush()
        if subprocess.run(cmd, check=False).returncode != 0:
            stderr.write(f"gpuconf images build: failed: {shlex.join(cmd)}\n")
            return EXIT_ENVIRONMENT
    return EXIT_OK
